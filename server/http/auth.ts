// Every /api/v1 request: credentials resolved, then rate limited, then the route's rules enforced
// (authenticated, no tenant header, permission). Resolving before limiting lets the limit count per
// key; enforcing after limiting means bad credentials are limited too (by IP).
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, forbidden, unauthorized } from './errors.js'
import { hasPermission, type Authenticator, type Principal } from './principal.js'
import type { RateLimiter } from './rate-limit.js'

declare module 'fastify' {
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
    /** The permission the route needs. */
    permission?: string
    /** The route acts for the platform, not a tenant: platform operator (svc_admin_) keys only. */
    operator?: boolean
  }
}

export const API_PREFIX = '/api/v1'
export const isApiPath = (path: string) => path === API_PREFIX || path.startsWith(API_PREFIX + '/') || path.startsWith(API_PREFIX + '?')
// Clients must not choose their tenant: it comes from the credential.
const TENANT_HEADER_RE = /(^|-)tenant(-|$)/i

export function installAuth(app: FastifyInstance, opts: { authenticators: Authenticator[]; limiter: RateLimiter }) {
  app.decorateRequest('principal', null)

  app.addHook('onRequest', async (request, reply) => {
    // Decided by the route that matched, not by the raw URL: a percent-encoded or absolute-form
    // target reaches the same handler and must meet the same rules. Unmatched URLs (404, 405) are
    // judged by their path so that probing the API is rate limited too.
    const routed = request.routeOptions.url !== undefined
    if (!isApiPath(routed ? request.routeOptions.url! : request.url)) return
    const config = request.routeOptions.config ?? {}
    const limited = config.rateLimit !== false
    const ip = `ip:${request.ip}`
    let failure: string | null = null
    let chargedIp = false
    if (config.auth !== false && (config.auth !== 'optional' || request.headers.authorization)) {
      const { token, failure: malformed } = bearerToken(request.headers.authorization)
      // A credential nobody can judge from memory costs its address before the lookup, so an
      // address over its limit cannot make the server look up key after made-up key.
      const chargeIp = async () => {
        if (!limited) return
        await opts.limiter.consume(ip, reply)
        chargedIp = true
      }
      request.principal = token ? await identify(token, opts.authenticators, chargeIp) : null
      failure = token ? 'The credential is invalid, expired or revoked' : malformed
    }

    if (limited) {
      if (request.principal) await opts.limiter.consume(`${request.principal.kind}:${request.principal.id}`, reply)
      else if (!chargedIp) await opts.limiter.consume(ip, reply)
    }

    if (routed && (config.auth ?? true) === true && !request.principal) throw unauthorized(failure ?? 'Missing or invalid authentication')
    const tenantHeaders = Object.keys(request.headers).filter((h) => TENANT_HEADER_RE.test(h))
    if (tenantHeaders.length) {
      throw new AppError('VALIDATION_ERROR', 'Do not send a tenant header: the tenant comes from your credential', {
        errors: tenantHeaders.map((h) => ({ field: `headers.${h}`, message: 'must not be sent' })),
      })
    }
    if (config.operator && request.principal?.tenantId) {
      throw forbidden('This route needs a platform operator key (svc_admin_...)', { required: 'operator' })
    }
    if (config.permission && request.principal) {
      if (!request.principal.tenantId) {
        throw forbidden('Platform operator keys act on /api/v1/platform routes only', { required: config.permission })
      }
      if (!hasPermission(request.principal, config.permission)) {
        throw forbidden(`This credential lacks the ${config.permission} permission`, { required: config.permission })
      }
    }
  })
}

function bearerToken(header: string | undefined): { token: string | null; failure: string } {
  if (!header) return { token: null, failure: 'Send Authorization: Bearer <API key or access token>' }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  if (!m) return { token: null, failure: 'The Authorization header must be: Bearer <API key or access token>' }
  return { token: m[1]!, failure: '' }
}

/** Memory first; only when no authenticator can judge the token from memory, beforeLookup, then lookups. */
async function identify(token: string, authenticators: Authenticator[], beforeLookup: () => Promise<void>): Promise<Principal | null> {
  const undecided: Authenticator[] = []
  for (const a of authenticators) {
    const known = a.fromMemory(token)
    if (known) return known
    if (known === undefined) undecided.push(a)
  }
  if (!undecided.length) return null
  await beforeLookup()
  for (const a of undecided) {
    const principal = await a.lookUp(token)
    if (principal) return principal
  }
  return null
}

/** The tenant a tenant-scoped route acts in (the permission check already refused platform keys). */
export function tenantOf(request: FastifyRequest): { tenantId: string; principal: Principal } {
  const p = request.principal
  if (!p?.tenantId) throw unauthorized()
  return { tenantId: p.tenantId, principal: p }
}
