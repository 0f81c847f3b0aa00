// Who a request acts for. API keys give one today; JWTs from the identity work give another kind.
export interface Principal {
  kind: 'api_key' | 'user'
  /** Key id or user id: what the rate limit counts against. */
  id: string
  /** null for platform operator (svc_admin_) keys, which act across tenants. */
  tenantId: string | null
  plan: Plan | null
  userId: string | null
  permissions: ReadonlySet<string>
}

export const PLANS = ['free', 'pro', 'growth', 'enterprise'] as const
export type Plan = (typeof PLANS)[number]

/** '*' grants every permission of the principal's tenant. */
export const hasPermission = (p: Principal, permission: string) => p.permissions.has('*') || p.permissions.has(permission)

export interface Authenticator {
  /** The principal a bearer credential stands for, or null when it is not one this authenticator knows. */
  authenticate(token: string): Promise<Principal | null>
  /** True when authenticate would answer from memory, without a database lookup. */
  answersFromMemory(token: string): boolean
}
