// 'atrium-team': members and invitations under /api/v1, and the invitation page at the root; an
// accepted invitation starts its session through 'atrium-sign-in'.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { invitationPageRoutes } from './page.js'
import { teamRoutes } from './routes.js'
import { teamService } from './service.js'

export const teamPlugin = fp(
  async (app) => {
    const {
      platform: { config, db, secrets },
      now,
      credentials,
      limits,
      signIn: auth,
    } = app
    await app.register(invitationPageRoutes)
    await app.register(teamRoutes, {
      prefix: API_PREFIX,
      team: teamService({ db, secrets, auth, credentials, publicUrl: config.PUBLIC_URL, now }),
      guard: limits.signIn,
    })
  },
  {
    name: 'atrium-team',
    dependencies: ['atrium-platform', 'atrium-credentials', 'atrium-limits', 'atrium-auth', 'atrium-license', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'],
  },
)
