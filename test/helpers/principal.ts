import type { Principal } from '../../server/domain/principal.js'

/** A signed-in member of tenant t1 (session s1), with what a test changes. */
export const principal = (over: Partial<Principal> = {}): Principal => ({
  kind: 'user',
  id: 'u1',
  tenantId: 't1',
  plan: 'pro',
  userId: 'u1',
  role: 'member',
  sessionId: 's1',
  permissions: new Set(),
  ...over,
})
