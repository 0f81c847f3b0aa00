// 'atrium-cli-auth': device login at the root (docs/architecture.md), outside the /api/v1 credential hooks;
// an approved login starts its session through 'atrium-sign-in'.
import fp from 'fastify-plugin'
import { cliAuthRoutes } from './routes.js'
import { cliAuthService } from './service.js'

export const cliAuthPlugin = fp(
  async (app) => {
    const {
      platform: { config, db, secrets },
      now,
      signIn: auth,
      tokens,
      limits,
    } = app
    await app.register(cliAuthRoutes, {
      cli: cliAuthService({ db, secrets, auth, tokens, publicUrl: config.PUBLIC_URL, now }),
      guard: limits.signIn,
      auth,
      publicUrl: config.PUBLIC_URL,
      rateLimit: { counters: limits.counters, keyPrefix: limits.keyPrefix },
    })
  },
  { name: 'atrium-cli-auth', dependencies: ['atrium-platform', 'atrium-limits', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'] },
)
