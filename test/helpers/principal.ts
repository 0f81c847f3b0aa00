import type { Actor } from '../../server/domain/actor.js'
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

/** The owner of a tenant a test made, acting outside any request (as a run or a job does), to call a service. */
export const ownerActor = (tenantId: string, userId: string, plan: Principal['plan']): Actor => ({
  tenantId,
  principal: principal({ id: userId, tenantId, userId, plan, role: 'owner', sessionId: null }),
  origin: { ip: '', userAgent: '' },
})
