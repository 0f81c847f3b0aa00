// The users module: a tenant's accounts, and the rules an account keeps whoever changes it. Other
// modules create accounts through it (a tenant's first owner, an account an identity provider
// provisions, an invitation), read members through it, and learn from it who is announced as having
// joined (user.created). The team module decides who may change or remove a member; what no one
// may do to an account is decided here: an invited member joins only by accepting, and a tenant
// keeps an active owner.
//
// The team makes its changes in its own transactions, on rows it locks first, so the statements
// that lock, change and remove a member (and the one that creates an account) pass through here by
// name rather than behind a function of this module: a module reaches another's statements through
// its service, never its store.
import { notFound } from '../../domain/errors.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import type { Db, TxSql } from '../../platform/db.js'
import { emitEvent, eventData } from '../outbox/service.js'
import { activateInvited, insertUser, listMembers, selectMember, type MemberRow, type NewUser } from './store.js'

export { deleteMember, insertUser, lockMemberAndOwners, updateMember, type MemberRow } from './store.js'

export type JoinedBy = 'tenant_created' | 'invitation' | 'oidc'

/** A page of a tenant's members, in the order they joined (ids are time-ordered). */
export async function listMembersPage(db: Db, tenantId: string, page: { limit: number; cursor?: string }) {
  const after = decodeIdCursor(page.cursor)
  const rows = await db.tenantRead(tenantId, (sql) => listMembers(sql, tenantId, page.limit + 1, after))
  return toPage(rows, page.limit, (m) => m.id)
}

/** A member of the tenant; RESOURCE_NOT_FOUND when it has none by that id. */
export async function getMember(db: Db, tenantId: string, userId: string): Promise<MemberRow> {
  const [row] = await db.tenantRead(tenantId, (sql) => selectMember(sql, tenantId, userId))
  if (!row) throw notFound('member', userId)
  return row
}

/**
 * An invited member: an account without a password, which joins when the invitee accepts (and
 * chooses one). The address is unique within the tenant (users_tenant_email_key).
 */
export async function insertInvited(sql: TxSql, u: Omit<NewUser, 'passwordHash' | 'status'>): Promise<MemberRow> {
  await insertUser(sql, { ...u, passwordHash: null, status: 'invited' })
  const [member] = await selectMember(sql, u.tenantId, u.id)
  return member!
}

/** Whether a change would set the status of a member who has not joined yet: only accepting does. */
export const changesInvitedStatus = (member: MemberRow, status: MemberRow['status']): boolean =>
  member.status === 'invited' && status !== member.status

/**
 * Whether changing a member to `after` (null: removing them) leaves the tenant without an active
 * owner. `otherActiveOwners` is counted on the rows lockMemberAndOwners locked, so the answer holds
 * until the transaction commits.
 */
export function leavesNoActiveOwner(
  member: MemberRow,
  after: Pick<MemberRow, 'role' | 'status'> | null,
  otherActiveOwners: number,
): boolean {
  const activeOwner = (m: Pick<MemberRow, 'role' | 'status'> | null) => m?.role === 'owner' && m.status === 'active'
  return activeOwner(member) && !activeOwner(after) && otherActiveOwners === 0
}

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
