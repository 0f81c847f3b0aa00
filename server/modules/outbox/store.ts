// Outbox SQL. The NOTIFY travels with the commit (PostgreSQL holds notifications until then), so
// listening workers wake exactly when an event becomes visible; a rolled-back one wakes nobody.
import type { TxSql } from '../../platform/db.js'

export const EVENTS_CHANNEL = 'atrium_events'

export async function insertEvent(
  sql: TxSql,
  e: { id: string; tenantId: string; type: string; data: Record<string, unknown> },
): Promise<void> {
  await sql`
    with inserted as (
      insert into webhook_events (id, tenant_id, type, data)
      values (${e.id}, ${e.tenantId}, ${e.type}, ${sql.json(e.data as never)})
      returning id
    )
    select pg_notify(${EVENTS_CHANNEL}, '') from inserted`
}
