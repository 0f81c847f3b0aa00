// Who performs an action: the principal of the credential (its user or key, role and permissions),
// the tenant it acts in, and where its request came from, which the audit log records. Routes
// build it from the request with http/actor.ts actorOf().
import type { Principal } from './principal.js'

/** Where a request came from, as the audit log records it. */
export interface Origin {
  ip: string
  userAgent: string
}

/**
 * Who performs an action. `tenantId` is the principal's tenant; null only for a platform operator
 * acting for the platform (Actor<string | null>, its own webhook endpoints).
 */
export interface Actor<TenantId extends string | null = string> {
  tenantId: TenantId
  principal: Principal
  origin: Origin
}
