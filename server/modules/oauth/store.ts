// OpenID Connect sign-ins in flight (oauth_states) and the account changes a sign-in makes. The
// table holds no tenant (the flow has none until the identity provider answers): system role only.
import type { Plan } from '../../domain/plans.js'
import type { TxSql } from '../../platform/db.js'

export interface NewOAuthState {
  stateHash: Buffer
  provider: string
  nonce: string
  codeVerifier: string
  browserHash: Buffer
  /** The organization the sign-in is for, when the person chose one. */
  tenantId: string | null
  createdAt: Date
  expiresAt: Date
}

export interface OAuthStateRow {
  provider: string
  nonce: string
  code_verifier: string
  browser_hash: Buffer
  chosen_tenant_id: string | null
  expires_at: Date
}

export async function insertState(sql: TxSql, s: NewOAuthState): Promise<void> {
  await sql`
    insert into oauth_states (state_hash, provider, nonce, code_verifier, browser_hash, chosen_tenant_id, created_at, expires_at)
    values (${s.stateHash}, ${s.provider}, ${s.nonce}, ${s.codeVerifier}, ${s.browserHash}, ${s.tenantId}, ${s.createdAt}, ${s.expiresAt})`
}

/** Takes the state out as it is read: of two requests with the same state, one gets it (single use). */
export async function consumeState(sql: TxSql, stateHash: Buffer): Promise<OAuthStateRow | undefined> {
  const [row] = await sql<OAuthStateRow[]>`
    delete from oauth_states where state_hash = ${stateHash}
    returning provider, nonce, code_verifier, browser_hash, chosen_tenant_id, expires_at`
  return row
}

/** Sign-ins started and never finished would otherwise stay forever. */
export async function deleteExpiredStates(sql: TxSql, at: Date): Promise<void> {
  await sql`delete from oauth_states where expires_at <= ${at}`
}

export interface TenantRow {
  id: string
  name: string
  plan: Plan
  status: 'active' | 'suspended'
}

export async function findTenant(sql: TxSql, tenantId: string): Promise<TenantRow | undefined> {
  const [row] = await sql<TenantRow[]>`select id, name, plan, status from tenants where id = ${tenantId}`
  return row
}

/**
 * An invited member who signs in with the identity provider has joined: they become active and
 * their pending invitations stop working. False when they were no longer invited.
 */
export async function activateInvited(sql: TxSql, userId: string, at: Date): Promise<boolean> {
  const rows =
    await sql`update users set status = 'active', updated_at = ${at} where id = ${userId} and status = 'invited' returning id`
  if (rows.length !== 1) return false
  await sql`update invitations set accepted_at = ${at} where user_id = ${userId} and accepted_at is null`
  return true
}
