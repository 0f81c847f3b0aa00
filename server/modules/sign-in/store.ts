import type { Role } from '../../domain/permissions.js'
import type { Plan } from '../../domain/plans.js'
import type { TxSql } from '../../platform/db.js'

export interface AccountRow {
  user_id: string
  tenant_id: string
  email: string
  name: string
  role: Role
  user_status: 'active' | 'disabled' | 'invited'
  tenant_name: string
  plan: Plan
  tenant_status: 'active' | 'suspended'
}

const ACCOUNT = (sql: TxSql) => sql`
  u.id as user_id, u.tenant_id, u.email, u.name, u.role, u.status as user_status,
  t.name as tenant_name, t.plan, t.status as tenant_status`

/** At most this many accounts of one address are considered at sign-in (each costs a password check). */
export const MAX_ACCOUNTS_PER_ADDRESS = 10

/**
 * The accounts of an address (one per tenant at most), in one tenant when given; the most recently
 * used first.
 */
export async function findAccountsByEmail(
  sql: TxSql,
  email: string,
  tenantId?: string,
): Promise<(AccountRow & { password_hash: string | null })[]> {
  return sql<(AccountRow & { password_hash: string | null })[]>`
    select ${ACCOUNT(sql)}, u.password_hash
      from users u join tenants t on t.id = u.tenant_id
     where lower(u.email) = lower(${email}) ${tenantId ? sql`and u.tenant_id = ${tenantId}` : sql``}
     order by u.last_login_at desc nulls last, u.id
     limit ${MAX_ACCOUNTS_PER_ADDRESS}`
}

export async function findAccount(sql: TxSql, userId: string): Promise<AccountRow | undefined> {
  const [row] = await sql<AccountRow[]>`
    select ${ACCOUNT(sql)} from users u join tenants t on t.id = u.tenant_id where u.id = ${userId}`
  return row
}

export async function markLoggedIn(sql: TxSql, userId: string, at: Date): Promise<void> {
  await sql`update users set last_login_at = ${at} where id = ${userId}`
}

export interface NewSession {
  id: string
  tenantId: string
  userId: string
  method: 'password' | 'oidc' | 'cli' | 'invitation'
  ip: string
  userAgent: string
  createdAt: Date
  expiresAt: Date
}

export async function insertSession(sql: TxSql, s: NewSession): Promise<void> {
  await sql`
    insert into identity_sessions (id, tenant_id, user_id, method, ip, user_agent, created_at, expires_at)
    values (${s.id}, ${s.tenantId}, ${s.userId}, ${s.method}, ${s.ip}, ${s.userAgent.slice(0, 500)}, ${s.createdAt}, ${s.expiresAt})`
}

export async function insertSessionToken(
  sql: TxSql,
  t: { hash: Buffer; sessionId: string; tenantId: string; at: Date },
): Promise<void> {
  await sql`insert into session_tokens (hash, session_id, tenant_id, created_at) values (${t.hash}, ${t.sessionId}, ${t.tenantId}, ${t.at})`
}

export interface SessionRow extends AccountRow {
  session_id: string
  expires_at: Date
  revoked_at: Date | null
}

const SESSION = (sql: TxSql) => sql`
  s.id as session_id, s.expires_at, s.revoked_at, ${ACCOUNT(sql)}
  from identity_sessions s
  join users u on u.id = s.user_id
  join tenants t on t.id = s.tenant_id`

export async function findSessionByToken(
  sql: TxSql,
  hash: Buffer,
): Promise<(SessionRow & { retired_at: Date | null }) | undefined> {
  const [row] = await sql<(SessionRow & { retired_at: Date | null })[]>`
    select k.retired_at, ${SESSION(sql)} join session_tokens k on k.session_id = s.id where k.hash = ${hash}`
  return row
}

export async function findSession(sql: TxSql, sessionId: string): Promise<SessionRow | undefined> {
  const [row] = await sql<SessionRow[]>`select ${SESSION(sql)} where s.id = ${sessionId}`
  return row
}

/** Retires a token once: of two refreshes racing with the same token, one wins. */
export async function retireToken(sql: TxSql, hash: Buffer, at: Date): Promise<boolean> {
  const rows =
    await sql`update session_tokens set retired_at = ${at} where hash = ${hash} and retired_at is null returning 1`
  return rows.length === 1
}

export async function revokeSession(sql: TxSql, sessionId: string, at: Date): Promise<void> {
  await sql`update identity_sessions set revoked_at = ${at} where id = ${sessionId} and revoked_at is null`
}

/** Ends every session of a user (disabled, removed, or their role changed); returns the ended ids. */
export async function revokeUserSessions(sql: TxSql, userId: string, at: Date): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    update identity_sessions set revoked_at = ${at} where user_id = ${userId} and revoked_at is null returning id`
  return rows.map((r) => r.id)
}
