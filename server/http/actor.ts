// The one way a route learns who acts: the principal its credential gave, the tenant it acts in,
// and where the request came from.
import type { FastifyRequest } from 'fastify'
import type { Actor, Origin } from '../domain/actor.js'
import { unauthorized } from '../domain/errors.js'
import type { Principal } from '../domain/principal.js'

export const originOf = (request: FastifyRequest): Origin => ({
  ip: request.ip,
  userAgent: String(request.headers['user-agent'] ?? ''),
})

/**
 * Who acts in a request, in its tenant (the permission check already refused platform keys on
 * tenant routes). `principal`: one a route authenticated by its own means (device login approval);
 * the credential's otherwise. `platform`: a platform operator's route, acting for the platform.
 */
export function actorOf(request: FastifyRequest, o?: { principal?: Principal; platform?: false }): Actor
export function actorOf(request: FastifyRequest, o: { principal?: Principal; platform: boolean }): Actor<string | null>
export function actorOf(
  request: FastifyRequest,
  o: { principal?: Principal; platform?: boolean } = {},
): Actor<string | null> {
  const principal = o.principal ?? request.principal
  if (!principal || (!o.platform && !principal.tenantId)) throw unauthorized()
  return { tenantId: o.platform ? null : principal.tenantId, principal, origin: originOf(request) }
}

/**
 * Who acts on a route that names its tenant (`/platform/tenants/:tenantId/...`): the tenant's own
 * credential, or a platform operator's key (no tenant of its own); the service checks the two agree.
 */
export const tenantPathActor = (request: FastifyRequest) => actorOf(request, { platform: !request.principal?.tenantId })
