// Sign-in endpoints (API-SPEC "Authentication"; paths as DESIGN.md pins them). All are exempt from
// the general rate limit, as the spec says; login has its own lockout.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ok } from '../../http/envelope.js'
import { unauthorized } from '../../http/errors.js'
import { Envelope, errors } from '../../http/schemas.js'
import { clearSessionCookie, sessionTokenOf, setSessionCookie, SESSION_COOKIE } from '../../http/session-cookie.js'
import { originOf } from '../audit/service.js'
import type { AuthService } from './service.js'
import type { TokenIssuer } from './tokens.js'

const tags = ['auth']
const Role = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')])
const Plan = Type.Union([Type.Literal('free'), Type.Literal('pro'), Type.Literal('growth'), Type.Literal('enterprise')])
export const User = Type.Object({ id: Type.String({ format: 'uuid' }), email: Type.String(), name: Type.String(), role: Role })
export const Tenant = Type.Object({ id: Type.String({ format: 'uuid' }), name: Type.String(), plan: Plan })
const SessionToken = Type.String({ maxLength: 200, description: 'Identity session token (ats_...); omit to use the session cookie' })
const AccessToken = Type.Object({
  accessToken: Type.String({ description: 'JWT (EdDSA) for Authorization: Bearer' }),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
})
const TokenBody = Type.Object({ token: Type.Optional(SessionToken) }, { additionalProperties: false })
// Signing in and out stays open while an expired license makes the API read-only.
const open = { auth: false, rateLimit: false, readOnlyAllowed: true } as const

export const authRoutes: FastifyPluginAsyncTypebox<{ auth: AuthService; tokens: TokenIssuer; publicUrl: string }> = async (app, { auth, tokens, publicUrl }) => {
  app.post('/auth/login', {
    config: open,
    schema: {
      tags, summary: 'Sign in with email and password', security: [],
      description: 'Gives an identity session token (also set as an HttpOnly cookie). 401 for wrong credentials, 403 for a disabled account, 429 while the address is locked after repeated failures.',
      body: Type.Object({ email: Type.String({ minLength: 3, maxLength: 320 }), password: Type.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false }),
      response: {
        200: Envelope(Type.Object({ token: Type.String(), tokenType: Type.Literal('session'), expiresAt: Type.String({ format: 'date-time' }), user: User, tenant: Tenant })),
        ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED'),
      },
    },
  }, async (req, reply) => {
    const r = await auth.login(req.body.email, req.body.password, originOf(req))
    setSessionCookie(req, reply, r.session.token, r.session.expiresAt)
    return ok(req, { token: r.session.token, tokenType: 'session' as const, expiresAt: r.session.expiresAt.toISOString(), user: r.user, tenant: r.tenant })
  })

  app.post('/auth/exchange', {
    config: open,
    schema: {
      tags, summary: 'Exchange an identity session token for a JWT access token', security: [],
      body: TokenBody,
      response: { 200: Envelope(AccessToken), ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN') },
    },
  }, async (req) => {
    const r = await auth.exchange(sessionTokenOf(req, req.body.token, publicUrl), originOf(req))
    return ok(req, { ...r, tokenType: 'Bearer' as const })
  })

  app.post('/auth/refresh', {
    config: open,
    schema: {
      tags, summary: 'Rotate the session token and get a fresh access token', security: [],
      description: 'The presented session token is retired; presenting it again ends the whole session (it was copied).',
      body: TokenBody,
      response: {
        200: Envelope(Type.Composite([AccessToken, Type.Object({ token: Type.String(), expiresAt: Type.String({ format: 'date-time' }) })])),
        ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN'),
      },
    },
  }, async (req, reply) => {
    const r = await auth.refresh(sessionTokenOf(req, req.body.token, publicUrl), originOf(req))
    if (req.body.token === undefined) setSessionCookie(req, reply, r.token, r.expiresAt)
    return ok(req, { token: r.token, expiresAt: r.expiresAt.toISOString(), accessToken: r.accessToken, tokenType: 'Bearer' as const, expiresIn: r.expiresIn })
  })

  app.post('/auth/logout', {
    config: { auth: 'optional', rateLimit: false, readOnlyAllowed: true },
    schema: {
      tags, summary: 'End the session (its session token and every access token minted from it stop working)',
      description: 'Identifies the session by the Bearer access token, the token in the body, or the session cookie.',
      body: TokenBody,
      response: { 200: Envelope(Type.Object({ loggedOut: Type.Literal(true) })), ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN') },
    },
  }, async (req, reply) => {
    let sessionId = req.principal?.sessionId ?? null
    if (!sessionId && (req.body.token !== undefined || req.cookies?.[SESSION_COOKIE])) {
      sessionId = await auth.sessionIdOf(sessionTokenOf(req, req.body.token, publicUrl))
    }
    if (!sessionId) throw unauthorized('Send the access token, the session token, or the session cookie of the session to end')
    await auth.logout(sessionId, originOf(req))
    clearSessionCookie(req, reply)
    return ok(req, { loggedOut: true as const })
  })

  app.get('/auth/me', {
    config: { rateLimit: false },
    schema: {
      tags, summary: 'Who the credential belongs to',
      response: {
        200: Envelope(Type.Object({
            user: Type.Union([User, Type.Null()]),
            tenant: Type.Union([Tenant, Type.Null()]),
            credential: Type.Object({
              type: Type.Union([Type.Literal('access_token'), Type.Literal('api_key')]),
              id: Type.String({ description: 'Session id for access tokens, key id for API keys' }),
              permissions: Type.Array(Type.String()),
            }),
          })),
        ...errors('VALIDATION_ERROR', 'UNAUTHORIZED'),
      },
    },
  }, async (req) => {
    const p = req.principal!
    const account = p.userId ? await auth.account(p.userId) : null
    return ok(req, {
      user: account?.user ?? null,
      tenant: account?.tenant ?? null,
      credential: { type: p.kind === 'user' ? 'access_token' as const : 'api_key' as const, id: p.kind === 'user' ? p.sessionId! : p.id, permissions: [...p.permissions] },
    })
  })

  app.get('/auth/jwks.json', {
    config: open,
    schema: {
      tags, summary: 'Public keys that verify Atrium access tokens', security: [],
      response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
    },
  }, async () => tokens.jwks())
}
