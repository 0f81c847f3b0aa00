// 'atrium-team': members and invitations under /api/v1, and the invitation page at the root; an
// accepted invitation starts its session through the sign-in service.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { SignInGuard } from '../../http/signin-guard.js'
import { SESSION_ROUTES_DEPENDENCIES } from '../sign-in/plugin.js'
import { invitationPageRoutes } from './page.js'
import { teamRoutes } from './routes.js'
import type { TeamService } from './service.js'

export const teamPlugin = fp(
  async (app, o: { team: TeamService; limits: { signIn: SignInGuard } }) => {
    await app.register(invitationPageRoutes)
    await app.register(teamRoutes, { prefix: API_PREFIX, team: o.team, guard: o.limits.signIn })
  },
  { name: 'atrium-team', dependencies: [...SESSION_ROUTES_DEPENDENCIES, 'atrium-sign-in', 'atrium-pages'] },
)
