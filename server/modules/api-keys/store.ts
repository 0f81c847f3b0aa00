// API key SQL. Tenant queries name their tenant even though row-level security would also confine
// them; the lookup by hash runs across tenants (authentication comes before any tenant is known).
import type { TxSql } from '../../platform/db.js'
import type { Plan } from '../../domain/plans.js'
import type { KeyType } from './keys.js'

export interface KeyRow {
  id: string
  tenant_id: string | null
  user_id: string | null
  type: KeyType
  permissions: string[]
  expires_at: Date | null
  revoked_at: Date | null
  last_used_at: Date | null
  plan: Plan | null
  tenant_status: string | null
}

export async function findByHash(sql: TxSql, hash: Buffer): Promise<KeyRow | undefined> {
  const [row] = await sql<KeyRow[]>`
    select k.id, k.tenant_id, k.user_id, k.type, k.permissions, k.expires_at, k.revoked_at, k.last_used_at,
           t.plan, t.status as tenant_status
      from api_keys k left join tenants t on t.id = k.tenant_id
     where k.secret_hash = ${hash}`
  return row
}

/** What an admin sees of a key: never the secret or its hash. */
export interface KeyView {
  id: string
  name: string
  type: KeyType
  prefix: string
  last_four: string
  permissions: string[]
  user_id: string | null
  created_at: Date
  expires_at: Date | null
  revoked_at: Date | null
  last_used_at: Date | null
}

export interface NewKey {
  id: string
  tenantId: string | null
  userId: string | null
  name: string
  type: KeyType
  prefix: string
  lastFour: string
  hash: Buffer
  permissions: string[]
  expiresAt: Date | null
}

export async function insertKey(sql: TxSql, k: NewKey): Promise<KeyView> {
  const [row] = await sql<KeyView[]>`
    insert into api_keys (id, tenant_id, user_id, name, type, prefix, last_four, secret_hash, permissions, expires_at, tagged)
    values (${k.id}, ${k.tenantId}, ${k.userId}, ${k.name}, ${k.type}, ${k.prefix}, ${k.lastFour}, ${k.hash},
            ${k.permissions}, ${k.expiresAt}, true)
    returning id, name, type, prefix, last_four, permissions, user_id, created_at, expires_at, revoked_at, last_used_at`
  return row!
}

/** Newest first by the time-ordered (UUIDv7) id; revoked and expired keys included. */
export function listKeys(sql: TxSql, tenantId: string, limit: number, before: string | null) {
  return sql<KeyView[]>`
    select id, name, type, prefix, last_four, permissions, user_id, created_at, expires_at, revoked_at, last_used_at
      from api_keys
     where tenant_id = ${tenantId} ${before ? sql`and id < ${before}` : sql``}
     order by id desc limit ${limit}`
}

export function selectKey(sql: TxSql, tenantId: string, id: string, opts: { lock?: boolean } = {}) {
  return sql<KeyView[]>`
    select id, name, type, prefix, last_four, permissions, user_id, created_at, expires_at, revoked_at, last_used_at
      from api_keys
     where tenant_id = ${tenantId} and id = ${id} ${opts.lock ? sql`for update` : sql``}`
}

/** Revokes a live key; undefined when it was already revoked. */
export async function revokeKey(sql: TxSql, tenantId: string, id: string, at: Date): Promise<KeyView | undefined> {
  const [row] = await sql<KeyView[]>`
    update api_keys set revoked_at = ${at}
     where tenant_id = ${tenantId} and id = ${id} and revoked_at is null
    returning id, name, type, prefix, last_four, permissions, user_id, created_at, expires_at, revoked_at, last_used_at`
  return row
}

/** Minimum time between two writes of a key's last_used_at. */
export const LAST_USED_RESOLUTION_SECONDS = 60

/**
 * Notes that a key was used. The condition makes replicas that race over one key write the row
 * once per minute at most, and leaves the row untouched (no new row version) otherwise.
 */
export async function touchLastUsed(sql: TxSql, id: string): Promise<void> {
  await sql`
    update api_keys set last_used_at = now()
     where id = ${id}
       and (last_used_at is null or last_used_at < now() - make_interval(secs => ${LAST_USED_RESOLUTION_SECONDS}))`
}

/** Hashes of the live keys made before tags existed (a set that only shrinks; see legacy.ts). */
export async function legacyKeyHashes(sql: TxSql): Promise<Buffer[]> {
  const rows = await sql<{ secret_hash: Buffer }[]>`
    select secret_hash from api_keys where not tagged and revoked_at is null and (expires_at is null or expires_at > now())`
  return rows.map((r) => r.secret_hash)
}
