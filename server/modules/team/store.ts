// Invitation SQL, and the API-key revocation that team changes need.
import type { TxSql } from '../../platform/db.js'

export interface NewInvitation {
  id: string
  tenantId: string
  userId: string
  tokenHash: Buffer
  invitedBy: string | null
  createdAt: Date
  expiresAt: Date
}

export async function insertInvitation(sql: TxSql, i: NewInvitation): Promise<void> {
  await sql`
    insert into invitations (id, tenant_id, user_id, token_hash, invited_by, created_at, expires_at)
    values (${i.id}, ${i.tenantId}, ${i.userId}, ${i.tokenHash}, ${i.invitedBy}, ${i.createdAt}, ${i.expiresAt})`
}

/** Withdraws a member's open invitations (a new one replaces them). */
export async function deleteOpenInvitations(sql: TxSql, tenantId: string, userId: string): Promise<void> {
  await sql`delete from invitations where tenant_id = ${tenantId} and user_id = ${userId} and accepted_at is null`
}

export interface InvitationRow {
  id: string
  tenant_id: string
  user_id: string
  expires_at: Date
  accepted_at: Date | null
  user_status: 'active' | 'disabled' | 'invited'
  tenant_status: 'active' | 'suspended'
}

/** Looked up across tenants (the token is the only thing the invitee has). */
export async function findInvitation(sql: TxSql, tokenHash: Buffer): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select i.id, i.tenant_id, i.user_id, i.expires_at, i.accepted_at, u.status as user_status, t.status as tenant_status
      from invitations i join users u on u.id = i.user_id join tenants t on t.id = i.tenant_id
     where i.token_hash = ${tokenHash}`
  return row
}

/** Marks an invitation accepted once: of two acceptances racing with one token, one wins. */
export async function consumeInvitation(
  sql: TxSql,
  tokenHash: Buffer,
  at: Date,
): Promise<{ id: string; tenant_id: string; user_id: string } | undefined> {
  const [row] = await sql<{ id: string; tenant_id: string; user_id: string }[]>`
    update invitations set accepted_at = ${at}
     where token_hash = ${tokenHash} and accepted_at is null and expires_at > ${at}
    returning id, tenant_id, user_id`
  return row
}

/**
 * Revokes a user's live API keys; with `unless`, only keys holding a permission outside it (a
 * demoted user keeps the keys their new role could have made). Lives here rather than with the
 * keys because only team changes revoke by user. Returns the revoked key ids.
 */
export async function revokeUserKeys(
  sql: TxSql,
  tenantId: string,
  userId: string,
  at: Date,
  unless?: readonly string[],
): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    update api_keys set revoked_at = ${at}
     where tenant_id = ${tenantId} and user_id = ${userId} and revoked_at is null
       ${unless ? sql`and not (permissions <@ ${unless as string[]}::text[])` : sql``}
    returning id`
  return rows.map((r) => r.id)
}
