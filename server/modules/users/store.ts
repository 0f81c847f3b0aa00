import type { TxSql } from '../../platform/db.js'

export type Role = 'owner' | 'admin' | 'member' | 'viewer'

export interface NewUser { id: string; tenantId: string; email: string; name: string; role: Role; passwordHash: string | null }

export async function insertUser(sql: TxSql, u: NewUser): Promise<void> {
  await sql`
    insert into users (id, tenant_id, email, name, role, password_hash)
    values (${u.id}, ${u.tenantId}, ${u.email}, ${u.name}, ${u.role}, ${u.passwordHash})`
}
