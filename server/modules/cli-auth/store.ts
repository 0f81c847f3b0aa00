// CLI device login SQL. The table belongs to no tenant until a user approves a login, so it is only
// reached through the system role. Every time comes from the caller (the injected clock), never from
// the database's now(), so expiry follows one clock in the server and in tests.
import type { TxSql } from '../../platform/db.js'

export type StoredStatus = 'pending' | 'approved' | 'consumed'

export interface CliLoginRow {
  login_id: string
  state: string
  code_challenge: string
  cli_version: string
  platform: string
  verification_code: string
  status: StoredStatus
  requester_ip: string
  created_at: Date
  expires_at: Date
  tenant_id: string | null
  user_id: string | null
}

export interface NewCliLogin {
  loginId: string
  state: string
  codeChallenge: string
  cliVersion: string
  platform: string
  verificationCode: string
  requesterIp: string
  createdAt: Date
  expiresAt: Date
}

const COLUMNS = (sql: TxSql) => sql`
  login_id, state, code_challenge, cli_version, platform, verification_code, status, requester_ip,
  created_at, expires_at, tenant_id, user_id`

export async function insertLogin(sql: TxSql, l: NewCliLogin): Promise<void> {
  await sql`
    insert into cli_logins (login_id, state, code_challenge, cli_version, platform, verification_code, requester_ip, created_at, expires_at)
    values (${l.loginId}, ${l.state}, ${l.codeChallenge}, ${l.cliVersion}, ${l.platform}, ${l.verificationCode},
            ${l.requesterIp}, ${l.createdAt}, ${l.expiresAt})`
}

export async function findLogin(sql: TxSql, loginId: string): Promise<CliLoginRow | undefined> {
  const [row] = await sql<CliLoginRow[]>`select ${COLUMNS(sql)} from cli_logins where login_id = ${loginId}`
  return row
}

/** pending -> approved, once and only before expiry: of two racing approvals one gets the row. */
export async function approveLogin(
  sql: TxSql,
  a: { loginId: string; tenantId: string; userId: string; ip: string; at: Date },
): Promise<CliLoginRow | undefined> {
  const [row] = await sql<CliLoginRow[]>`
    update cli_logins
       set status = 'approved', tenant_id = ${a.tenantId}, user_id = ${a.userId}, approved_at = ${a.at}, approved_ip = ${a.ip}
     where login_id = ${a.loginId} and status = 'pending' and expires_at > ${a.at}
    returning ${COLUMNS(sql)}`
  return row
}

/** approved -> consumed, once and only before expiry: of two racing token calls one gets the row. */
export async function consumeLogin(sql: TxSql, loginId: string, at: Date): Promise<CliLoginRow | undefined> {
  const [row] = await sql<CliLoginRow[]>`
    update cli_logins set status = 'consumed', consumed_at = ${at}
     where login_id = ${loginId} and status = 'approved' and expires_at > ${at}
    returning ${COLUMNS(sql)}`
  return row
}

/**
 * Removes up to `limit` logins that expired before `before`: a bounded batch keeps start fast, and
 * SKIP LOCKED lets two replicas clean up at once without waiting on each other.
 */
export async function deleteExpiredLogins(sql: TxSql, before: Date, limit: number): Promise<number> {
  const rows = await sql`
    delete from cli_logins
     where login_id in (select login_id from cli_logins where expires_at < ${before} order by expires_at limit ${limit} for update skip locked)
    returning 1`
  return rows.length
}
