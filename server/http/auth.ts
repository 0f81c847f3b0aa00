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
    /** false for endpoints that authenticate by other means (login, device flow). */
    auth?: boolean
    /** false for endpoints exempt from the general limit (auth endpoints, as the spec says). */
    rateLimit?: boolean
    /** The permission the route needs. */
    permission?: string
  }
}

export const API_PREFIX = '/api/v1'
// Clients must not choose their tenant: it comes from the credential.
const TENANT_HEADER_RE = /(^|-)tenant(-|$)/i

export function installAuth(app: FastifyInstance, opts: { authenticators: Authenticator[]; limiter: RateLimiter }) {
  app.decorateRequest('principal', null)

  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith(API_PREFIX + '/') && request.url !== API_PREFIX) return
    const config = request.routeOptions.config ?? {}
    const routed = request.routeOptions.url !== undefined
    let failure: string | null = null
    if (config.auth !== false) {
      const r = await resolve(request, opts.authenticators)
      request.principal = r.principal
      failure = r.failure
    }

    if (config.rateLimit !== false) {
      const key = request.principal ? `${request.principal.kind}:${request.principal.id}` : `ip:${request.ip}`
      await opts.limiter.consume(key, reply)
    }

    if (routed && config.auth !== false && !request.principal) throw unauthorized(failure ?? 'Missing or invalid authentication')
    const tenantHeaders = Object.keys(request.headers).filter((h) => TENANT_HEADER_RE.test(h))
    if (tenantHeaders.length) {
      throw new AppError('VALIDATION_ERROR', 'Do not send a tenant header: the tenant comes from your credential', {
        errors: tenantHeaders.map((h) => ({ field: `headers.${h}`, message: 'must not be sent' })),
      })
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

async function resolve(request: FastifyRequest, authenticators: Authenticator[]): Promise<{ principal: Principal | null; failure: string | null }> {
  const header = request.headers.authorization
  if (!header) return { principal: null, failure: 'Send Authorization: Bearer <API key or access token>' }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  if (!m) return { principal: null, failure: 'The Authorization header must be: Bearer <API key or access token>' }
  for (const authenticate of authenticators) {
    const principal = await authenticate(m[1]!)
    if (principal) return { principal, failure: null }
  }
  return { principal: null, failure: 'The credential is invalid, expired or revoked' }
}

/** The tenant a tenant-scoped route acts in (the permission check already refused platform keys). */
export function tenantOf(request: FastifyRequest): { tenantId: string; principal: Principal } {
  const p = request.principal
  if (!p?.tenantId) throw unauthorized()
  return { tenantId: p.tenantId, principal: p }
}
