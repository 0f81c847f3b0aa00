import type { Role } from '../../domain/permissions.js'
import type { TxSql } from '../../platform/db.js'

export interface NewUser {
  id: string
  tenantId: string
  email: string
  name: string
  role: Role
  passwordHash: string | null
  /** 'invited' for a member who has yet to accept their invitation; active otherwise. */
  status?: UserStatus
}

export async function insertUser(sql: TxSql, u: NewUser): Promise<void> {
  await sql`
    insert into users (id, tenant_id, email, name, role, password_hash, status)
    values (${u.id}, ${u.tenantId}, ${u.email}, ${u.name}, ${u.role}, ${u.passwordHash}, ${u.status ?? 'active'})`
}

export type UserStatus = 'active' | 'disabled' | 'invited'

export interface MemberRow {
  id: string
  email: string
  name: string
  role: Role
  status: UserStatus
  created_at: Date
  last_login_at: Date | null
}

const MEMBER = (sql: TxSql) => sql`id, email, name, role, status, created_at, last_login_at`

/** A tenant's members in the order they joined (ids are time-ordered). */
export function listMembers(sql: TxSql, tenantId: string, limit: number, after: string | null) {
  return sql<MemberRow[]>`
    select ${MEMBER(sql)} from users
     where tenant_id = ${tenantId} ${after ? sql`and id > ${after}` : sql``}
     order by id limit ${limit}`
}

export function selectMember(sql: TxSql, tenantId: string, id: string) {
  return sql<MemberRow[]>`select ${MEMBER(sql)} from users where tenant_id = ${tenantId} and id = ${id}`
}

/**
 * Locks the member and every active owner of the tenant, in id order (one order for every caller,
 * so two changes cannot deadlock). Holding the owners' rows makes "is this the last active owner?"
 * true until commit: two owners demoting each other at once are decided one after the other.
 */
export function lockMemberAndOwners(sql: TxSql, tenantId: string, id: string) {
  return sql<MemberRow[]>`
    select ${MEMBER(sql)} from users
     where tenant_id = ${tenantId} and (id = ${id} or (role = 'owner' and status = 'active'))
     order by id for update`
}

export async function updateMember(
  sql: TxSql,
  tenantId: string,
  id: string,
  f: { role: Role; status: UserStatus },
): Promise<MemberRow> {
  const [row] = await sql<MemberRow[]>`
    update users set role = ${f.role}, status = ${f.status}, updated_at = now()
     where tenant_id = ${tenantId} and id = ${id}
    returning ${MEMBER(sql)}`
  return row!
}

/** An invited member becomes active with the password they chose; false when they are no longer invited. */
export async function activateInvited(
  sql: TxSql,
  id: string,
  f: { passwordHash: string; name: string | null },
): Promise<boolean> {
  const rows = await sql`
    update users set password_hash = ${f.passwordHash}, status = 'active', updated_at = now(),
           name = coalesce(${f.name}, name)
     where id = ${id} and status = 'invited'
    returning id`
  return rows.length === 1
}

export async function deleteMember(sql: TxSql, tenantId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from users where tenant_id = ${tenantId} and id = ${id} returning id`
  return rows.length === 1
}
