// Audit log SQL: the writing side every module uses, the tenant admin's reading side, and the
// retention sweep. How long events are kept is atrium_audit_retention(plan) (migration 0002), in
// one place for all three.
import type { TxSql } from '../../platform/db.js'

export type AuditActorType = 'user' | 'api_key' | 'system' | 'anonymous'

export interface AuditEvent {
  id: string
  tenantId: string
  actorType: AuditActorType
  actorId: string | null
  action: string
  targetType: string
  targetId: string
  ip: string
  userAgent: string
  details: Record<string, unknown>
}

/**
 * Records an event in the caller's transaction, so it exists exactly when the change it describes
 * does. Plans that keep no audit log (free) record nothing: the plan is read in the same statement.
 */
export async function insertAuditEvent(sql: TxSql, e: AuditEvent): Promise<void> {
  await sql`
    insert into audit_events (id, tenant_id, actor_type, actor_id, action, target_type, target_id, ip, user_agent, details)
    select ${e.id}, t.id, ${e.actorType}, ${e.actorId}, ${e.action}, ${e.targetType}, ${e.targetId}, ${e.ip}, ${e.userAgent.slice(0, 500)}, ${sql.json(e.details as never)}
      from tenants t
     where t.id = ${e.tenantId} and atrium_audit_retention(t.plan) > interval '0'`
}

export interface AuditRow {
  id: string
  action: string
  actor_type: AuditActorType
  actor_id: string | null
  target_type: string
  target_id: string
  ip: string
  user_agent: string
  details: Record<string, unknown>
  created_at: Date
}

export interface AuditFilter {
  /** An exact action, or a prefix when given as "auth.*". */
  action?: string
  actorId?: string
  since?: Date
  until?: Date
}

/**
 * A tenant's events newest first (by time-ordered id), only those inside the retention window of
 * the tenant's current plan: an event the sweep has not reached yet is never shown either.
 */
export function listAuditEvents(sql: TxSql, tenantId: string, f: AuditFilter, limit: number, before: string | null) {
  const prefix = f.action?.endsWith('.*') ? f.action.slice(0, -1) : null
  return sql<AuditRow[]>`
    select id, action, actor_type, actor_id, target_type, target_id, ip, user_agent, details, created_at
      from audit_events
     where tenant_id = ${tenantId}
       and created_at > now() - (select atrium_audit_retention(plan) from tenants where id = ${tenantId})
       ${prefix !== null ? sql`and left(action, ${prefix.length}) = ${prefix}` : f.action !== undefined ? sql`and action = ${f.action}` : sql``}
       ${f.actorId !== undefined ? sql`and actor_id = ${f.actorId}` : sql``}
       ${f.since !== undefined ? sql`and created_at >= ${f.since}` : sql``}
       ${f.until !== undefined ? sql`and created_at < ${f.until}` : sql``}
       ${before !== null ? sql`and id < ${before}` : sql``}
     order by id desc limit ${limit}`
}

// Any fixed 64-bit number, the same in every Atrium process, unlike the migrations' lock.
const SWEEP_LOCK_KEY = 7_242_019_301

/**
 * Deletes every event older than its tenant's retention, in one statement. Returns null when
 * another replica holds the sweep lock (it is doing the same work right now).
 */
export async function sweepExpiredEvents(sql: TxSql): Promise<number | null> {
  const [lock] = await sql<{ locked: boolean }[]>`select pg_try_advisory_xact_lock(${SWEEP_LOCK_KEY}) as locked`
  if (!lock?.locked) return null
  const [row] = await sql<{ deleted: number }[]>`
    with swept as (
      delete from audit_events e using tenants t
       where t.id = e.tenant_id and e.created_at < now() - atrium_audit_retention(t.plan)
      returning 1)
    select count(*)::int as deleted from swept`
  return row!.deleted
}
