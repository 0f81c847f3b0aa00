import type { TxSql } from '../../platform/db.js'
import type { Plan } from '../../http/principal.js'

export async function insertTenant(sql: TxSql, t: { id: string; name: string; plan: Plan }): Promise<void> {
  await sql`insert into tenants (id, name, plan) values (${t.id}, ${t.name}, ${t.plan})`
}
