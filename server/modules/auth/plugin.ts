// 'atrium-sign-in': password sign-in, identity sessions and access tokens under /api/v1/auth. Named
// apart from 'atrium-auth' (http/auth.ts), which checks every request's credential: this plugin
// gives it one more way to recognise one (access tokens), and gives the modules that start sessions
// themselves (cli-auth, oauth, team) the service and the token issuer to do it with.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { authRoutes } from './routes.js'
import { authService, type AuthService } from './service.js'
import { loginThrottle, type LoginLimits } from './throttle.js'
import { createTokenIssuer, type TokenIssuer } from './tokens.js'

declare module 'fastify' {
  interface FastifyInstance {
    signIn: AuthService
    tokens: TokenIssuer
  }
}

export interface SignInOptions {
  /** Password sign-in limits (tests lower them); LOGIN_LIMITS otherwise. */
  loginLimits?: Partial<LoginLimits>
}

export const signInPlugin = fp(
  async (app, o: SignInOptions) => {
    const {
      platform: { config, db, secrets, log },
      now,
      credentials,
      limits,
    } = app
    const tokens = await createTokenIssuer({ secrets, issuer: config.PUBLIC_URL, ttlSeconds: config.ACCESS_TOKEN_TTL_SECONDS, now })
    const throttle = loginThrottle({ counters: limits.counters, keyPrefix: limits.keyPrefix, limits: o.loginLimits })
    const auth = authService({ db, tokens, credentials, secrets, throttle, log, sessionTtlSeconds: config.SESSION_TTL_HOURS * 3600, now })
    app.decorate('signIn', auth)
    app.decorate('tokens', tokens)
    app.addAuthenticator(auth.authenticator())
    await app.register(authRoutes, { prefix: API_PREFIX, auth, tokens, publicUrl: config.PUBLIC_URL, guard: limits.signIn })
  },
  { name: 'atrium-sign-in', dependencies: ['atrium-platform', 'atrium-credentials', 'atrium-limits', 'atrium-auth', 'atrium-license', '@fastify/cookie'] },
)
