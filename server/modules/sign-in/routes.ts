// Sign-in endpoints (docs/identity.md; where they are served: docs/architecture.md, "Where routes are
// served"). Signing in is exempt from the general rate limit (docs/api.md), and has limits of its own
// instead: login the throttle of throttle.ts, the steps that take a session token the sign-in guard
// (http/signin-guard.ts). /auth/me and a logout by access token are API use like any other:
// counted against the credential's own limit.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { originOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { sessionStarted } from '../../http/route-schemas.js'
import { unauthorized } from '../../domain/errors.js'
import { Envelope, errors, SessionStarted, Tenant, User } from '../../http/schemas.js'
import { clearSessionCookie, sessionTokenOf, setSessionCookie, SESSION_COOKIE } from '../../http/session-cookie.js'
import type { SignInGuard } from '../../http/signin-guard.js'
import { isLegacySessionToken, type AuthService } from './service.js'
import { DEVICE_COOKIE, DEVICE_COOKIE_DAYS } from './throttle.js'
import type { TokenIssuer } from './tokens.js'

const tags = ['auth']
const SessionToken = Type.String({
  maxLength: 200,
  description: 'Identity session token (ats_...); omit to use the session cookie',
})
const AccessToken = Type.Object({
  accessToken: Type.String({ description: 'JWT (EdDSA) for Authorization: Bearer' }),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'Seconds until the access token expires' }),
})
const TokenBody = Type.Object({ token: Type.Optional(SessionToken) }, { additionalProperties: false })
// Signing in and out stays open while an expired license makes the API read-only.
const open = { auth: false, rateLimit: false, readOnlyAllowed: true } as const

export const authRoutes: FastifyPluginAsyncTypebox<{
  auth: AuthService
  tokens: TokenIssuer
  publicUrl: string
  guard: SignInGuard
}> = async (app, { auth, tokens, publicUrl, guard }) => {
  /** A step that takes a session token: its failures count against the caller's address. */
  const guarded = <T>(req: FastifyRequest, token: string, step: (token: string) => Promise<T>) =>
    guard(req.ip, { legacy: isLegacySessionToken(token) }, () => step(token))

  app.post(
    '/auth/login',
    {
      config: open,
      schema: {
        tags,
        summary: 'Sign in with email and password',
        security: [],
        description:
          'Gives an identity session token (also set as an HttpOnly cookie) and marks the browser as a device this account trusts (the atrium_device cookie). 401 for wrong credentials, 403 for a disabled account, 429 while failed attempts from the address, for the account from the address, or for the account from everywhere must wait (a device the account trusts is not held back by the address or the account), 503 when too many sign-ins run at once. An address with accounts in several organizations that the password opens must send tenantId (VALIDATION_ERROR naming them otherwise).',
        body: Type.Object(
          {
            email: Type.String({ minLength: 3, maxLength: 320 }),
            password: Type.String({ minLength: 1, maxLength: 1024 }),
            tenantId: Type.Optional(
              Type.String({
                format: 'uuid',
                description: 'The organization to sign in to, when the address has accounts in several',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Envelope(SessionStarted),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED', 'SERVICE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      const r = await auth.login(req.body, { origin: originOf(req), deviceCookie: req.cookies?.[DEVICE_COOKIE] })
      setSessionCookie(req, reply, r.session.token, r.session.expiresAt)
      // Only the login reads it: scripts and other paths never see it.
      reply.setCookie(DEVICE_COOKIE, r.deviceCookie, {
        httpOnly: true,
        secure: req.protocol === 'https',
        sameSite: 'strict',
        path: '/api/v1/auth/login',
        maxAge: DEVICE_COOKIE_DAYS * 86_400,
      })
      return ok(req, sessionStarted(r))
    },
  )

  app.post(
    '/auth/exchange',
    {
      config: open,
      schema: {
        tags,
        summary: 'Exchange an identity session token for a JWT access token',
        security: [],
        body: TokenBody,
        response: {
          200: Envelope(AccessToken),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req) => {
      const r = await guarded(req, sessionTokenOf(req, req.body.token, publicUrl), (token) =>
        auth.exchange(token, originOf(req)),
      )
      return ok(req, { ...r, tokenType: 'Bearer' as const })
    },
  )

  app.post(
    '/auth/refresh',
    {
      config: open,
      schema: {
        tags,
        summary: 'Rotate the session token and get a fresh access token',
        security: [],
        description:
          'The presented session token is retired; presenting it again ends the whole session (it was copied).',
        body: TokenBody,
        response: {
          200: Envelope(
            Type.Composite([
              AccessToken,
              Type.Object({ token: Type.String(), expiresAt: Type.String({ format: 'date-time' }) }),
            ]),
          ),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      const r = await guarded(req, sessionTokenOf(req, req.body.token, publicUrl), (token) =>
        auth.refresh(token, originOf(req)),
      )
      if (req.body.token === undefined) setSessionCookie(req, reply, r.token, r.expiresAt)
      return ok(req, {
        token: r.token,
        expiresAt: r.expiresAt.toISOString(),
        accessToken: r.accessToken,
        tokenType: 'Bearer' as const,
        expiresIn: r.expiresIn,
      })
    },
  )

  app.post(
    '/auth/logout',
    {
      config: { auth: 'optional', readOnlyAllowed: true },
      schema: {
        tags,
        summary: 'End the session (its session token and every access token minted from it stop working)',
        description:
          'Identifies the session by the Bearer access token (counted against its limit like other API use), the token in the body, or the session cookie.',
        body: TokenBody,
        response: {
          200: Envelope(Type.Object({ loggedOut: Type.Literal(true) })),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      let sessionId = req.principal?.sessionId ?? null
      if (!sessionId && (req.body.token !== undefined || req.cookies?.[SESSION_COOKIE])) {
        sessionId = await guarded(req, sessionTokenOf(req, req.body.token, publicUrl), (token) =>
          auth.sessionIdOf(token),
        )
      }
      if (!sessionId)
        throw unauthorized('Send the access token, the session token, or the session cookie of the session to end')
      await auth.logout(sessionId, originOf(req))
      clearSessionCookie(req, reply)
      return ok(req, { loggedOut: true as const })
    },
  )

  app.get(
    '/auth/me',
    {
      schema: {
        tags,
        summary: 'Who the credential belongs to (counted against its limit like other API use)',
        response: {
          200: Envelope(
            Type.Object({
              user: Type.Union([User, Type.Null()]),
              tenant: Type.Union([Tenant, Type.Null()]),
              credential: Type.Object({
                type: Type.Union([Type.Literal('access_token'), Type.Literal('api_key')]),
                id: Type.String({ description: 'Session id for access tokens, key id for API keys' }),
                permissions: Type.Array(Type.String()),
              }),
            }),
          ),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req) => {
      const p = req.principal!
      const account = p.userId ? await auth.account(p.userId) : null
      return ok(req, {
        user: account?.user ?? null,
        tenant: account?.tenant ?? null,
        credential: {
          type: p.kind === 'user' ? ('access_token' as const) : ('api_key' as const),
          id: p.kind === 'user' ? p.sessionId! : p.id,
          permissions: [...p.permissions],
        },
      })
    },
  )

  app.get(
    '/auth/jwks.json',
    {
      config: open,
      schema: {
        tags,
        summary: 'Public keys that verify Atrium access tokens',
        security: [],
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
    },
    async () => tokens.jwks(),
  )
}
