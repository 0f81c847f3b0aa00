import type { TxSql } from '../../platform/db.js'
import type { Plan } from '../../http/principal.js'
import type { KeyType } from './keys.js'

export interface KeyRow {
  id: string
  tenant_id: string | null
  user_id: string | null
  type: KeyType
  permissions: string[]
  expires_at: Date | null
  revoked_at: Date | null
  plan: Plan | null
  tenant_status: string | null
}

export async function findByHash(sql: TxSql, hash: Buffer): Promise<KeyRow | undefined> {
  const [row] = await sql<KeyRow[]>`
    select k.id, k.tenant_id, k.user_id, k.type, k.permissions, k.expires_at, k.revoked_at,
           t.plan, t.status as tenant_status
      from api_keys k left join tenants t on t.id = k.tenant_id
     where k.secret_hash = ${hash}`
  return row
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

export async function insertKey(sql: TxSql, k: NewKey): Promise<void> {
  await sql`
    insert into api_keys (id, tenant_id, user_id, name, type, prefix, last_four, secret_hash, permissions, expires_at)
    values (${k.id}, ${k.tenantId}, ${k.userId}, ${k.name}, ${k.type}, ${k.prefix}, ${k.lastFour}, ${k.hash},
            ${k.permissions}, ${k.expiresAt})`
}
