// Every /api/v1 request: credentials resolved, then rate limited, then the route's rules enforced
// (authenticated, no tenant header, permission). A credential is limited as itself (per key or
// user), never by its address: someone else's failures from the same address (a shared NAT, a
// proxy) cannot lock it out. Requests without a valid credential are limited by address. That
// needs no limit before the lookup, because only credentials that exist are looked up: memory
// refuses the rest (credential tags, platform/credential-tags.ts; JWT signatures).
import type { FastifyContextConfig, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { addressKey } from '../domain/client-address.js'
import { AppError, forbidden, unauthorized } from '../domain/errors.js'
import type { Permission } from '../domain/permissions.js'
import { hasPermission, type Authenticator, type Principal } from '../domain/principal.js'
import { createRateLimiter } from './rate-limit.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The modules that issue credentials (API keys, access tokens) say here how to recognise them. */
    addAuthenticator(authenticator: Authenticator): void
  }
  interface FastifyRequest {
    principal: Principal | null
  }
  interface FastifyContextConfig {
    /**
     * false for endpoints that authenticate by other means (login, device flow); 'optional' to learn
     * who calls when a credential is sent without requiring one (logout).
     */
    auth?: boolean | 'optional'
    /** false for endpoints exempt from the general limit (auth endpoints, as the spec says). */
    rateLimit?: boolean
    /** The permission the route needs (or several, all needed): the domain's, checked when the route compiles. */
    permission?: Permission | readonly Permission[]
    /**
     * true: the route acts for the platform, not a tenant: platform operator (svc_admin_) keys only.
     * 'also': a tenant route under /api/v1/platform/tenants/:tenantId that operator keys may call
     * for any tenant, besides the tenant's own credentials with the permission (exports).
     */
    operator?: boolean | 'also'
  }
}

export const API_PREFIX = '/api/v1'
export const isApiPath = (path: string) =>
  path === API_PREFIX || path.startsWith(API_PREFIX + '/') || path.startsWith(API_PREFIX + '?')
// Clients must not choose their tenant: it comes from the credential.
const TENANT_HEADER_RE = /(^|-)tenant(-|$)/i

/** 'atrium-auth': the rules above, as a hook on every request, with the API's general limit. */
export const authPlugin = fp(
  async (app) => {
    const { RATE_LIMIT_MAX: max, RATE_LIMIT_WINDOW_SECONDS: windowSeconds } = app.platform.config
    const limiter = createRateLimiter({
      counters: app.limits.counters,
      max,
      windowSeconds,
      keyPrefix: app.limits.keyPrefix,
    })
    // atrium-auth knows no credential format: the modules that issue credentials add theirs.
    const authenticators: Authenticator[] = []
    app.decorate('addAuthenticator', (a: Authenticator) => {
      authenticators.push(a)
    })
    app.decorateRequest('principal', null)

    // A callback hook, and the steps answered at once when memory decides (the credential and a
    // rate-limit token held): a request waits for a promise only when something must be looked up.
    app.addHook('onRequest', (request, reply, done) => {
      let pending: Promise<void> | undefined
      try {
        pending = authenticate(request, reply)
      } catch (err) {
        done(err as Error)
        return
      }
      if (pending) pending.then(() => done(), done)
      else done()
    })

    function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> | undefined {
      // Decided by the route that matched, not by the raw URL: a percent-encoded or absolute-form
      // target reaches the same handler and must meet the same rules. Unmatched URLs (404, 405) are
      // judged by their path so that probing the API is rate limited too.
      const routed = request.routeOptions.url !== undefined
      if (!isApiPath(routed ? request.routeOptions.url! : request.url)) return undefined
      const config = request.routeOptions.config ?? {}
      if (config.auth !== false && (config.auth !== 'optional' || request.headers.authorization)) {
        const { token, failure: malformed } = bearerToken(request.headers.authorization)
        const failure = token ? 'The credential is invalid, expired or revoked' : malformed
        const principal = token ? identify(token, authenticators) : null
        if (principal instanceof Promise) {
          return principal.then((p) => {
            request.principal = p
            return limitThenRules(request, reply, config, routed, failure)
          })
        }
        request.principal = principal
        return limitThenRules(request, reply, config, routed, failure)
      }
      return limitThenRules(request, reply, config, routed, null)
    }

    function limitThenRules(
      request: FastifyRequest,
      reply: FastifyReply,
      config: FastifyContextConfig,
      routed: boolean,
      failure: string | null,
    ): Promise<void> | undefined {
      // A route whose credential is optional and was not sent (logout by session token) limits its
      // own way (the sign-in guard): counted by address here, others' traffic could lock it out.
      const ownLimits = config.auth === 'optional' && !request.headers.authorization
      if (config.rateLimit !== false && !ownLimits) {
        const p = request.principal
        const limiting = limiter.consume(p ? `${p.kind}:${p.id}` : `ip:${addressKey(request.ip)}`, reply)
        if (limiting) return limiting.then(() => rules(request, config, routed, failure))
      }
      rules(request, config, routed, failure)
      return undefined
    }

    function rules(
      request: FastifyRequest,
      config: FastifyContextConfig,
      routed: boolean,
      failure: string | null,
    ): void {
      if (routed && (config.auth ?? true) === true && !request.principal)
        throw unauthorized(failure ?? 'Missing or invalid authentication')
      const tenantHeaders = Object.keys(request.headers).filter((h) => TENANT_HEADER_RE.test(h))
      if (tenantHeaders.length) {
        throw new AppError('VALIDATION_ERROR', 'Do not send a tenant header: the tenant comes from your credential', {
          errors: tenantHeaders.map((h) => ({ field: `headers.${h}`, message: 'must not be sent' })),
        })
      }
      if (config.operator === true && request.principal?.tenantId) {
        throw forbidden('This route needs a platform operator key (svc_admin_...)', { required: 'operator' })
      }
      if (config.permission && request.principal) {
        const needed = typeof config.permission === 'string' ? [config.permission] : config.permission
        if (!request.principal.tenantId) {
          if (config.operator === 'also') return
          throw forbidden('Platform operator keys act on /api/v1/platform routes only', { required: needed[0] })
        }
        // Named one at a time, the first one lacking: details.required stays one permission.
        const lacking = needed.find((p) => !hasPermission(request.principal!, p))
        if (lacking) throw forbidden(`This credential lacks the ${lacking} permission`, { required: lacking })
      }
    }
  },
  { name: 'atrium-auth', dependencies: ['atrium-platform', 'atrium-envelope', 'atrium-limits'] },
)

function bearerToken(header: string | undefined): { token: string | null; failure: string } {
  if (!header) return { token: null, failure: 'Send Authorization: Bearer <API key or access token>' }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  if (!m) return { token: null, failure: 'The Authorization header must be: Bearer <API key or access token>' }
  return { token: m[1]!, failure: '' }
}

/** Memory first; a lookup only for a credential memory says may exist. At once when memory decides. */
function identify(token: string, authenticators: Authenticator[]): Principal | null | Promise<Principal | null> {
  const undecided: Authenticator[] = []
  for (const a of authenticators) {
    const known = a.fromMemory(token)
    if (known) return known
    if (known === undefined) undecided.push(a)
  }
  if (!undecided.length) return null
  return (async () => {
    for (const a of undecided) {
      const principal = await a.lookUp(token)
      if (principal) return principal
    }
    return null
  })()
}
