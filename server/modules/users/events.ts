// user.created announces a person joining a tenant: created active (a tenant's first owner, an
// account an identity provider provisions) or accepting an invitation. An invitation alone is not
// a registration: the invitee may never accept.
import type { TxSql } from '../../platform/db.js'
import { emitEvent, eventData } from '../outbox/service.js'
import { selectMember } from './store.js'

export type JoinedBy = 'tenant_created' | 'invitation' | 'oidc'

export async function emitUserCreated(sql: TxSql, tenantId: string, userId: string, joinedBy: JoinedBy): Promise<void> {
  const [member] = await selectMember(sql, tenantId, userId)
  if (!member) return // removed in this very transaction: nobody to announce
  const { last_login_at: _, ...user } = member
  await emitEvent(sql, { tenantId, type: 'user.created', data: { ...eventData(user), tenantId, joinedBy } })
}
