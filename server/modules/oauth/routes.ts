// OpenID Connect sign-in endpoints, at the root, not under /api/v1 (docs/architecture.md, "Where routes are served"):
//   GET  /oauth/providers             the providers for the sign-in page
//   GET  /oauth/{provider}/start      the authorization URL; sets the browser-binding cookie
//   GET  /oauth/{provider}/callback   the redirect URI: a small page that POSTs to authorize
//   POST /oauth/{provider}/authorize  completes the sign-in (POST only) and starts a session
// Like the other auth endpoints they are exempt from the general rate limit.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { originOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { sessionStarted } from '../../http/route-schemas.js'
import { invalid, notFound } from '../../domain/errors.js'
import { Envelope, errors, SessionStarted } from '../../http/schemas.js'
import { assertSameOrigin, setSessionCookie } from '../../http/session-cookie.js'
import { randomBase62 } from '../../../common/ids.js'
import { CALLBACK_HTML, CALLBACK_JS } from './page.js'
import { sendPage } from '../../http/pages.js'
import { STATE_TTL_SECONDS, type OAuthService } from './service.js'

/**
 * Binds a sign-in to the browser that started it (login CSRF: a sign-in started elsewhere cannot be
 * completed here). Only its hash is stored with the state. Scoped to /oauth; one value serves every
 * sign-in the browser has in flight, so two tabs do not undo each other.
 */
export const BROWSER_COOKIE = 'atrium_oauth'
const BROWSER_RE = /^[A-Za-z0-9]{43}$/

const tags = ['auth']
const open = { auth: false, rateLimit: false } as const
const ProviderParams = Type.Object({
  provider: Type.String({ minLength: 1, maxLength: 64, description: 'Provider id from OIDC_PROVIDERS' }),
})
const Param = (maxLength: number, description: string) =>
  Type.Optional(Type.String({ minLength: 1, maxLength, description }))
const AuthorizeBody = Type.Object(
  {
    callbackUrl: Param(
      16_384,
      'The URL (or just its query string) the identity provider redirected the browser to; instead of the fields below',
    ),
    code: Param(4096, 'Authorization code'),
    state: Param(512, 'The state the identity provider sent back'),
    iss: Param(2048, 'Issuer the identity provider sent back (RFC 9207)'),
    error: Param(256, 'Error code the identity provider sent back instead of a code'),
    error_description: Param(4096, 'Its description'),
  },
  { additionalProperties: false },
)

export interface OAuthRoutesOptions {
  oauth: OAuthService
  publicUrl: string
}

const secure = (request: FastifyRequest) => request.protocol === 'https'
const noStore = (reply: FastifyReply) => reply.header('cache-control', 'no-store')

/** The authorization response as the identity provider gave it: from callbackUrl, or from the fields. */
function callbackParams(body: {
  callbackUrl?: string
  code?: string
  state?: string
  iss?: string
  error?: string
  error_description?: string
}): URLSearchParams {
  const { callbackUrl, ...fields } = body
  if (callbackUrl === undefined)
    return new URLSearchParams(Object.entries(fields).filter((e): e is [string, string] => e[1] !== undefined))
  if (Object.keys(fields).length)
    throw invalid('callbackUrl', 'send either callbackUrl or the separate fields, not both')
  if (/^https?:\/\//i.test(callbackUrl)) {
    try {
      return new URL(callbackUrl).searchParams
    } catch {
      throw invalid('callbackUrl', 'is not a URL')
    }
  }
  return new URLSearchParams(callbackUrl.replace(/^\?/, ''))
}

export const oauthRoutes: FastifyPluginAsyncTypebox<OAuthRoutesOptions> = async (app, { oauth, publicUrl }) => {
  app.get(
    '/oauth/providers',
    {
      config: open,
      schema: {
        tags,
        summary: 'Identity providers users can sign in with (for the sign-in page)',
        security: [],
        response: {
          200: Envelope(
            Type.Array(
              Type.Object({
                id: Type.String(),
                name: Type.String(),
                startUrl: Type.String({ description: 'GET it for the authorization URL' }),
              }),
            ),
          ),
          ...errors(),
        },
      },
    },
    async (req) => ok(req, oauth.list(publicUrl)),
  )

  app.get(
    '/oauth/:provider/start',
    {
      config: open,
      exposeHeadRoute: false, // every call stores a sign-in: no HEAD twin doing the same
      schema: {
        tags,
        summary: 'Start signing in with an identity provider',
        security: [],
        description: `Gives the authorization URL to send the browser to (authorization code flow with PKCE S256, state and nonce) and sets the ${BROWSER_COOKIE} cookie that binds the sign-in to this browser. The sign-in must be completed within ${STATE_TTL_SECONDS / 60} minutes. An address with accounts in several organizations passes tenantId to choose one. 503 when the identity provider cannot be reached.`,
        params: ProviderParams,
        querystring: Type.Object(
          { tenantId: Type.Optional(Type.String({ format: 'uuid', description: 'The organization to sign in to' })) },
          { additionalProperties: false },
        ),
        response: {
          200: Envelope(
            Type.Object({
              authorizationUrl: Type.String({ description: 'Where to send the browser' }),
              expiresAt: Type.String({ format: 'date-time', description: 'The sign-in must be completed before this' }),
            }),
          ),
          ...errors('VALIDATION_ERROR', 'RESOURCE_NOT_FOUND', 'SERVICE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      const held = req.cookies?.[BROWSER_COOKIE]
      const browser = held && BROWSER_RE.test(held) ? held : randomBase62(43)
      const r = await oauth.start(req.params.provider, browser, req.query.tenantId ?? null)
      reply.setCookie(BROWSER_COOKIE, browser, {
        httpOnly: true,
        secure: secure(req),
        sameSite: 'lax',
        path: '/oauth',
        maxAge: STATE_TTL_SECONDS,
      })
      noStore(reply)
      return ok(req, { authorizationUrl: r.authorizationUrl, expiresAt: r.expiresAt.toISOString() })
    },
  )

  app.post(
    '/oauth/:provider/authorize',
    {
      config: open,
      schema: {
        tags,
        summary: 'Complete signing in with an identity provider (POST only)',
        security: [],
        description: [
          'Send what the identity provider redirected the browser to the callback with: {callbackUrl} (the whole URL or its query string), or {code, state, iss}.',
          `Needs the ${BROWSER_COOKIE} cookie set by start in the same browser, and a same-origin request.`,
          'Gives an identity session token (also set as the session cookie), as password sign-in does.',
          '400 when the state is missing, unknown, expired, already used or of another provider (details.reason state_invalid, state_expired, state_provider_mismatch);',
          '401 when the identity provider refuses the code or its answer cannot be verified (idp_error);',
          '403 for another browser (browser_mismatch), a cross-origin request (csrf), an email address that is missing or not verified (email_missing, email_unverified), no account (no_account), only an invitation not yet accepted through its link (invitation_pending, with a provider that serves every organization), accounts in several organizations and none chosen (tenant_required, details.tenants names them: start again with tenantId), a disabled account (account_disabled) or a suspended organization (tenant_suspended);',
          '404 for an unknown provider; 503 when the identity provider cannot be reached.',
        ].join(' '),
        params: ProviderParams,
        body: AuthorizeBody,
        response: {
          200: Envelope(SessionStarted),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RESOURCE_NOT_FOUND', 'SERVICE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      if (!oauth.has(req.params.provider)) throw notFound('identity provider', req.params.provider)
      noStore(reply)
      assertSameOrigin(req, publicUrl)
      const held = req.cookies?.[BROWSER_COOKIE]
      const r = await oauth.authorize(
        req.params.provider,
        { params: callbackParams(req.body), browser: held && BROWSER_RE.test(held) ? held : null },
        originOf(req),
      )
      setSessionCookie(req, reply, r.session.token, r.session.expiresAt)
      return ok(req, sessionStarted(r))
    },
  )

  // The redirect URI. The page and its script are same-origin (CSP allows nothing else); the code
  // and state go to authorize in a POST, and out of the address bar and history.
  app.get(
    '/oauth/:provider/callback',
    {
      config: open,
      schema: { hide: true, params: ProviderParams },
    },
    async (req, reply) => {
      if (!oauth.has(req.params.provider)) throw notFound('identity provider', req.params.provider)
      return sendPage(reply, 'html', CALLBACK_HTML)
    },
  )

  app.get('/oauth/callback.js', { config: open, schema: { hide: true } }, async (_req, reply) =>
    sendPage(reply, 'js', CALLBACK_JS),
  )
}
