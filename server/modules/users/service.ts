// The users module: a tenant's accounts. Other modules create accounts through it (a tenant's first
// owner, an account an identity provider provisions, an invitation) and the team module runs its
// member rules on the statements below, in its own transactions. Its own rule: who is announced as
// having joined (user.created).
import type { TxSql } from '../../platform/db.js'
import { emitEvent, eventData } from '../outbox/service.js'
import { activateInvited, selectMember } from './store.js'

export {
  deleteMember,
  insertUser,
  listMembers,
  lockMemberAndOwners,
  selectMember,
  updateMember,
  type MemberRow,
} from './store.js'

export type JoinedBy = 'tenant_created' | 'invitation' | 'oidc'

/**
 * Announces a person joining a tenant (user.created): created active (a tenant's first owner, an
 * account an identity provider provisions) or accepting an invitation. An invitation alone is not a
 * registration: the invitee may never accept.
 */
export async function emitUserCreated(sql: TxSql, tenantId: string, userId: string, joinedBy: JoinedBy): Promise<void> {
  const [member] = await selectMember(sql, tenantId, userId)
  if (!member) return // removed in this very transaction: nobody to announce
  const { last_login_at: _, ...user } = member
  await emitEvent(sql, { tenantId, type: 'user.created', data: { ...eventData(user), tenantId, joinedBy } })
}

/**
 * An invited member accepts: active with the password they chose, and announced. False when they
 * are no longer invited (disabled or removed meanwhile, or another acceptance won).
 */
export async function acceptInvited(
  sql: TxSql,
  member: { tenantId: string; userId: string },
  f: { passwordHash: string; name: string | null },
): Promise<boolean> {
  if (!(await activateInvited(sql, member.userId, f))) return false
  await emitUserCreated(sql, member.tenantId, member.userId, 'invitation')
  return true
}
