// 'atrium-cli-auth': device login at the root (docs/architecture.md, "Where routes are served"),
// outside the /api/v1 credential hooks; an approved login starts its session through the sign-in service.
import fp from 'fastify-plugin'
import type { SignInGuard } from '../../http/signin-guard.js'
import type { Counters } from '../../platform/counters.js'
import type { Platform } from '../../platform/index.js'
import type { AuthService } from '../sign-in/service.js'
import { cliAuthRoutes } from './routes.js'
import type { CliAuthService } from './service.js'

export const cliAuthPlugin = fp(
  async (
    app,
    o: {
      platform: Pick<Platform, 'config'>
      cliAuth: CliAuthService
      signIn: AuthService
      limits: { counters: Counters; keyPrefix: string; signIn: SignInGuard }
    },
  ) => {
    const { limits } = o
    await app.register(cliAuthRoutes, {
      cli: o.cliAuth,
      guard: limits.signIn,
      auth: o.signIn,
      publicUrl: o.platform.config.PUBLIC_URL,
      rateLimit: { counters: limits.counters, keyPrefix: limits.keyPrefix },
    })
  },
  {
    name: 'atrium-cli-auth',
    dependencies: ['atrium-platform', 'atrium-limits', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'],
  },
)
