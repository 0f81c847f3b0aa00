// Who a request acts for: an API key, or a signed-in user holding an access token (JWT).
import type { Permission, Role } from './permissions.js'
import type { Plan } from './plans.js'

export interface Principal {
  kind: 'api_key' | 'user'
  /** Key id or user id: what the rate limit counts against. */
  id: string
  /** null for platform operator (svc_admin_) keys, which act across tenants. */
  tenantId: string | null
  plan: Plan | null
  userId: string | null
  /** The user's role in the tenant; null for API keys. */
  role: Role | null
  /** The identity session an access token was minted from; null for API keys. */
  sessionId: string | null
  permissions: ReadonlySet<string>
}

/** '*' grants every permission of the principal's tenant. */
export const hasPermission = (p: Principal, permission: Permission) =>
  p.permissions.has('*') || p.permissions.has(permission)

/** The plan whose limits hold for what a principal does; operator keys, which have none, get the smallest. */
export const planOf = (p: Pick<Principal, 'plan'>): Plan => p.plan ?? 'free'

/**
 * Turns a bearer credential into its principal. The API keys and the access tokens each have one;
 * http/auth.ts asks them in turn.
 */
export interface Authenticator {
  /**
   * What memory alone says of a bearer credential: its principal, null when it is none of this
   * authenticator's, not issued here, or no longer valid, or undefined when only a lookup can tell.
   * Only credentials that may exist are left undecided: the lookups are not limited per address.
   */
  fromMemory(token: string): Principal | null | undefined
  /** The lookup for a credential fromMemory could not judge. */
  lookUp(token: string): Promise<Principal | null>
}
