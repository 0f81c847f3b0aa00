// 'atrium-sign-in': password sign-in, identity sessions and access tokens under /api/v1/auth. Named
// apart from 'atrium-auth' (http/auth.ts), which checks every request's credential: this plugin
// gives it one more way to recognise one (access tokens). The service and the token issuer, which
// cli-auth, oauth and team start sessions with, are built by the composition root (services.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { SignInGuard } from '../../http/signin-guard.js'
import type { Platform } from '../../platform/index.js'
import { authRoutes } from './routes.js'
import type { AuthService } from './service.js'
import type { TokenIssuer } from './tokens.js'

declare module 'fastify' {
  interface FastifyInstance {
    signIn: AuthService
    tokens: TokenIssuer
  }
}

/**
 * What a module whose /api/v1 routes start sessions (sign-in, an accepted invitation) needs registered
 * before it: the request pipeline's credential cache, limits, authentication and license, and the
 * cookie the session is set in.
 */
export const SESSION_ROUTES_DEPENDENCIES = [
  'atrium-platform',
  'atrium-credentials',
  'atrium-limits',
  'atrium-auth',
  'atrium-license',
  '@fastify/cookie',
]

export const signInPlugin = fp(
  async (
    app,
    o: {
      platform: Pick<Platform, 'config'>
      signIn: AuthService
      tokens: TokenIssuer
      limits: { signIn: SignInGuard }
    },
  ) => {
    const { signIn: auth, tokens } = o
    app.decorate('signIn', auth)
    app.decorate('tokens', tokens)
    app.addAuthenticator(auth.authenticator())
    await app.register(authRoutes, {
      prefix: API_PREFIX,
      auth,
      tokens,
      publicUrl: o.platform.config.PUBLIC_URL,
      guard: o.limits.signIn,
    })
  },
  { name: 'atrium-sign-in', dependencies: SESSION_ROUTES_DEPENDENCIES },
)
