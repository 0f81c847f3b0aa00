// CLI device login endpoints, at the root (not under /api/v1, so the API's credential and general rate-limit hooks do
// not run here: docs/architecture.md, "Where routes are served"). Auth endpoints are exempt from the general limit, but
// these answer anonymous callers and touch the database, so each has its own limits per client address and per loginId.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { actorOf, originOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { created } from '../../http/route-schemas.js'
import { forbidden, notFound, unauthorized } from '../../domain/errors.js'
import type { Principal } from '../../domain/principal.js'
import { createRateLimiter, type RateLimiter } from '../../http/rate-limit.js'
import { Envelope, errors, Tenant, User } from '../../http/schemas.js'
import type { Counters } from '../../platform/counters.js'
import { assertSameOrigin, SESSION_COOKIE } from '../../http/session-cookie.js'
import type { SignInGuard } from '../../http/signin-guard.js'
import { addressKey } from '../../domain/client-address.js'
import { looksLikeKey } from '../api-keys/keys.js'
import type { AuthService } from '../sign-in/service.js'
import { approvalPageRoutes } from './page.js'
import { LOGIN_TTL_SECONDS, POLL_INTERVAL_SECONDS, type CliAuthService } from './service.js'

/**
 * Requests per minute. A CLI polls status every POLL_INTERVAL_SECONDS. Starting is limited per
 * address (nothing else identifies the caller yet); the other steps per loginId. A loginId not made
 * here is refused from memory and counts as a failure of its address (http/signin-guard.ts), so no
 * limit per address stands between a real login and its steps: many CLIs may share an office's
 * address, and one of them guessing cannot hold the others up.
 */
export interface CliAuthLimits {
  startPerIp: number
  statusPerLogin: number
  infoPerLogin: number
  completePerLogin: number
  tokenPerLogin: number
}

export const CLI_AUTH_LIMITS: CliAuthLimits = {
  startPerIp: 20,
  statusPerLogin: 60,
  infoPerLogin: 60,
  completePerLogin: 10,
  tokenPerLogin: 10,
}
const LIMIT_WINDOW_SECONDS = 60

export interface CliAuthRoutesOptions {
  cli: CliAuthService
  /** Failures (a loginId not made here, unknown, a bad verifier) count against the caller's address. */
  guard: SignInGuard
  auth: AuthService
  publicUrl: string
  rateLimit: {
    /** Fallbacks count in atrium_rate_limit_fallback_total{limiter="cli-auth:..."}. */
    counters: Counters
    /** The app's rate-limit prefix; these limits count under it, apart from the general limit. */
    keyPrefix: string
    limits?: Partial<CliAuthLimits>
  }
}

const tags = ['cli-auth']
const open = { auth: false, rateLimit: false } as const

const LoginId = Type.String({
  pattern: '^[A-Za-z0-9_-]{43}$',
  description: 'loginId from start (256 random bits, base64url)',
})
const State = Type.String({
  pattern: '^[0-9a-f]{64}$',
  description: '32 random bytes as 64 lowercase hex characters, chosen by the CLI',
})
const Status = Type.Union(
  [Type.Literal('pending'), Type.Literal('approved'), Type.Literal('expired'), Type.Literal('consumed')],
  {
    description:
      'pending until a signed-in user approves; approved until the CLI redeems it (consumed); expired 10 minutes after start unless consumed',
  },
)
const Time = Type.String({ format: 'date-time' })

const StartBody = Type.Object(
  {
    state: State,
    codeChallenge: Type.String({
      pattern: '^[A-Za-z0-9_-]{43}$',
      description: 'BASE64URL(SHA-256(codeVerifier)), RFC 7636',
    }),
    codeChallengeMethod: Type.Literal('S256', {
      description: 'Only S256: plain would let anyone who sees the challenge redeem the login',
    }),
    cliVersion: Type.String({ minLength: 1, maxLength: 64 }),
    platform: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'Operating system and architecture, e.g. linux-x64',
    }),
  },
  { additionalProperties: false },
)
const Started = Type.Object({
  loginId: Type.String(),
  authUrl: Type.String({ description: 'The approval page to open in a browser' }),
  verificationCode: Type.String({
    pattern: '^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$',
    description: 'Show it in the terminal: the browser shows the same',
  }),
  expiresAt: Time,
  interval: Type.Integer({ description: 'Seconds to wait between status polls' }),
})
const LoginQuery = Type.Object({ loginId: LoginId }, { additionalProperties: false })
const Info = Type.Object({
  loginId: Type.String(),
  verificationCode: Type.String(),
  cliVersion: Type.String(),
  platform: Type.String(),
  requesterIp: Type.String({ description: 'Address the login was started from' }),
  status: Status,
  createdAt: Time,
  expiresAt: Time,
})
const CompleteBody = Type.Object({ loginId: LoginId, state: State }, { additionalProperties: false })
const TokenBody = Type.Object(
  {
    loginId: LoginId,
    codeVerifier: Type.String({
      pattern: '^[A-Za-z0-9._~-]{43,128}$',
      description: 'The PKCE verifier the challenge was made from (RFC 7636: 43 to 128 unreserved characters)',
    }),
  },
  { additionalProperties: false },
)
const Issued = Type.Object({
  token: Type.String({ description: 'JWT access token for Authorization: Bearer' }),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
  refreshToken: Type.String({
    description: 'Identity session token (ats_...): POST /api/v1/auth/refresh {token} for a new access token',
  }),
  refreshExpiresAt: Time,
  user: User,
  tenant: Tenant,
})

const BEARER_RE = /^Bearer\s+(\S+)\s*$/i

export const cliAuthRoutes: FastifyPluginAsyncTypebox<CliAuthRoutesOptions> = async (
  app,
  { cli, auth, publicUrl, rateLimit, guard },
) => {
  const limits = { ...CLI_AUTH_LIMITS, ...rateLimit.limits }
  const base = `${rateLimit.keyPrefix}:cli-auth`
  const limiter = (name: keyof CliAuthLimits): RateLimiter =>
    createRateLimiter({
      counters: rateLimit.counters,
      max: limits[name],
      windowSeconds: LIMIT_WINDOW_SECONDS,
      name: `cli-auth:${name}`,
      keyPrefix: `${base}:${name}`,
    })
  const startPerIp = limiter('startPerIp')
  /** A step on a loginId: refused from memory when it was not made here; else limited per loginId. */
  const onLogin = (perLogin: keyof CliAuthLimits) => {
    const login = limiter(perLogin)
    return <T>(req: FastifyRequest, reply: FastifyReply, loginId: string, step: () => Promise<T>) =>
      guard(req.ip, { legacy: false }, async () => {
        if (!cli.issued(loginId)) throw notFound('CLI login', loginId)
        await login.consume(loginId, reply)
        return step()
      })
  }
  const limit = {
    status: onLogin('statusPerLogin'),
    info: onLogin('infoPerLogin'),
    complete: onLogin('completePerLogin'),
    token: onLogin('tokenPerLogin'),
  }

  const accessTokens = auth.authenticator()
  /**
   * The signed-in user approving: a Bearer access token, or the browser's session cookie, which is
   * accepted only on a request from our own origin (CSRF). API keys belong to programs, not people.
   */
  async function approverOf(req: FastifyRequest): Promise<Principal> {
    const header = req.headers.authorization
    let p: Principal | null
    if (header !== undefined) {
      const token = BEARER_RE.exec(header)?.[1]
      if (!token) throw unauthorized('The Authorization header must be: Bearer <access token>')
      if (looksLikeKey(token))
        throw forbidden('An API key cannot approve a CLI login: sign in as a user in the browser', {
          reason: 'api_key',
        })
      p = accessTokens.fromMemory(token) ?? (await accessTokens.lookUp(token))
      if (!p) throw unauthorized('The access token is invalid, expired or revoked')
    } else {
      const cookie = req.cookies?.[SESSION_COOKIE]
      if (!cookie) throw unauthorized('Sign in first: approving a CLI login needs a signed-in user')
      assertSameOrigin(req, publicUrl)
      p = await auth.principalOfSessionToken(cookie)
    }
    if (p.kind !== 'user' || !p.tenantId || !p.userId)
      throw forbidden('Only a signed-in user can approve a CLI login', { reason: 'not_a_user' })
    return p
  }

  // Login state and tokens must not be kept by browsers or proxies (RFC 6749 section 5.1).
  app.addHook('onSend', async (_req, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.post(
    '/cli/auth/start',
    {
      config: open,
      schema: {
        tags,
        summary: 'Start a CLI device login',
        security: [],
        description: `Step 1 of the device login. The CLI sends a random state and a PKCE S256 challenge, shows verificationCode, opens authUrl in a browser and polls status every interval seconds. Expires ${LOGIN_TTL_SECONDS / 60} minutes after start. Limited to ${limits.startPerIp} per minute per address.`,
        body: StartBody,
        response: { 201: Envelope(Started), ...errors('VALIDATION_ERROR', 'RATE_LIMIT_EXCEEDED') },
      },
    },
    async (req, reply) => {
      await startPerIp.consume(addressKey(req.ip), reply)
      const r = await cli.start(req.body, req.ip)
      return created(req, reply, { ...r, expiresAt: r.expiresAt.toISOString() })
    },
  )

  app.get(
    '/cli/auth/status',
    {
      config: open,
      schema: {
        tags,
        summary: 'Poll a CLI login',
        security: [],
        description: `pending, approved, expired or consumed; never a token. Poll every ${POLL_INTERVAL_SECONDS} s (at most ${limits.statusPerLogin} per minute per loginId).`,
        querystring: LoginQuery,
        response: {
          200: Envelope(Type.Object({ status: Status, expiresAt: Time })),
          ...errors('VALIDATION_ERROR', 'RESOURCE_NOT_FOUND', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      const r = await limit.status(req, reply, req.query.loginId, () => cli.status(req.query.loginId))
      return ok(req, { status: r.status, expiresAt: r.expiresAt.toISOString() })
    },
  )

  app.get(
    '/cli/auth/info',
    {
      config: open,
      schema: {
        tags,
        summary: 'What the approval page shows: the verification code and the requesting client',
        security: [],
        querystring: LoginQuery,
        response: { 200: Envelope(Info), ...errors('VALIDATION_ERROR', 'RESOURCE_NOT_FOUND', 'RATE_LIMIT_EXCEEDED') },
      },
    },
    async (req, reply) => {
      const r = await limit.info(req, reply, req.query.loginId, () => cli.info(req.query.loginId))
      return ok(req, { ...r, createdAt: r.createdAt.toISOString(), expiresAt: r.expiresAt.toISOString() })
    },
  )

  app.post(
    '/cli/auth/complete',
    {
      config: open,
      schema: {
        tags,
        summary: 'Approve a CLI login (the signed-in user, in the browser)',
        description:
          'Needs a signed-in user: the session cookie (same-origin requests only) or a Bearer access token; API keys are refused (403). The state must match the one in authUrl (403 otherwise). A login that is not pending is a VALIDATION_ERROR whose details.status says why. Recorded in the audit log.',
        body: CompleteBody,
        response: {
          200: Envelope(Type.Object({ loginId: Type.String(), status: Type.Literal('approved'), approvedAt: Time })),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RESOURCE_NOT_FOUND', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      const r = await limit.complete(req, reply, req.body.loginId, async () => {
        const approver = await approverOf(req)
        return cli.complete(actorOf(req, { principal: approver }), req.body.loginId, req.body.state)
      })
      return ok(req, { loginId: req.body.loginId, status: r.status, approvedAt: r.approvedAt.toISOString() })
    },
  )

  app.post(
    '/cli/auth/token',
    {
      config: open,
      schema: {
        tags,
        summary: 'Redeem an approved CLI login for an access token (once)',
        security: [],
        description:
          'The code verifier must match the challenge sent to start (401 otherwise). A login that is pending, expired or already consumed is a VALIDATION_ERROR whose details.status says which. The first successful call consumes the login; any other fails.',
        body: TokenBody,
        response: {
          200: Envelope(Issued),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RESOURCE_NOT_FOUND', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      const r = await limit.token(req, reply, req.body.loginId, () =>
        cli.token(req.body.loginId, req.body.codeVerifier, originOf(req)),
      )
      return ok(req, {
        token: r.token,
        tokenType: 'Bearer' as const,
        expiresIn: r.expiresIn,
        refreshToken: r.refreshToken,
        refreshExpiresAt: r.refreshExpiresAt.toISOString(),
        user: r.user,
        tenant: r.tenant,
      })
    },
  )

  await app.register(approvalPageRoutes)
}
