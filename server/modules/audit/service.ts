// The audit log: the writing side, used by every module that does something security-relevant,
// and the reading side for tenant admins, with the retention sweep that keeps it to the plan.
import { newId } from '../../../common/ids.js'
import type { Actor, Origin } from '../../domain/actor.js'
import { AppError, forbidden } from '../../domain/errors.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import { AUDIT_LOG_PLAN, PLAN_TERMS, type Plan } from '../../domain/plans.js'
import { planOf } from '../../domain/principal.js'
import type { Logger } from 'pino'
import type { Db, TxSql } from '../../platform/db.js'
import {
  insertAuditEvent,
  listAuditEvents,
  sweepExpiredEvents,
  type AuditActorType,
  type AuditFilter,
} from './store.js'

/** Who an event names as having done it: a user or key by id, or the system or someone anonymous. */
export interface AuditActor {
  type: AuditActorType
  id: string | null
}

export interface Audited {
  tenantId: string
  actor: AuditActor
  action: string
  target?: { type: string; id: string }
  origin?: Origin
  details?: Record<string, unknown>
}

export const audit = (sql: TxSql, e: Audited): Promise<void> =>
  insertAuditEvent(sql, {
    id: newId(),
    tenantId: e.tenantId,
    actorType: e.actor.type,
    actorId: e.actor.id,
    action: e.action,
    targetType: e.target?.type ?? '',
    targetId: e.target?.id ?? '',
    ip: e.origin?.ip ?? '',
    userAgent: e.origin?.userAgent ?? '',
    details: e.details ?? {},
  })

/** The actor an audit entry names for a request's actor: its key, or its user. */
export const auditActor = (a: Pick<Actor<string | null>, 'principal'>): AuditActor =>
  a.principal.kind === 'api_key' ? { type: 'api_key', id: a.principal.id } : { type: 'user', id: a.principal.userId }

/** An event done by an actor, in its tenant's log, with where its request came from. */
export const auditBy = (sql: TxSql, a: Actor, e: Omit<Audited, 'tenantId' | 'actor' | 'origin'>): Promise<void> =>
  audit(sql, { tenantId: a.tenantId, actor: auditActor(a), origin: a.origin, ...e })

export interface AuditQuery {
  limit: number
  cursor?: string
  action?: string
  actorId?: string
  since?: string
  until?: string
}

export function auditLogService(deps: { db: Db }) {
  const { db } = deps
  return {
    async list(a: { tenantId: string; plan: Plan | null }, q: AuditQuery) {
      // A plan that keeps no audit log (free: atrium_audit_retention gives it none) says so rather
      // than answer with an empty list that looks like nothing happened.
      const plan = planOf(a)
      if (PLAN_TERMS[plan].auditRetention === null) {
        throw forbidden(`The audit log needs the ${PLAN_TERMS[AUDIT_LOG_PLAN].title} plan or higher`, {
          plan,
          requiredPlan: AUDIT_LOG_PLAN,
        })
      }
      const filter: AuditFilter = {
        ...(q.action !== undefined ? { action: q.action } : {}),
        ...(q.actorId !== undefined ? { actorId: q.actorId } : {}),
        ...(q.since !== undefined ? { since: new Date(q.since) } : {}),
        ...(q.until !== undefined ? { until: new Date(q.until) } : {}),
      }
      if (filter.since && filter.until && filter.since >= filter.until) {
        throw new AppError('VALIDATION_ERROR', 'since must be before until', {
          errors: [{ field: 'querystring.since', message: 'must be before until' }],
        })
      }
      const before = decodeIdCursor(q.cursor)
      const rows = await db.tenantRead(a.tenantId, (sql) =>
        listAuditEvents(sql, a.tenantId, filter, q.limit + 1, before),
      )
      return toPage(rows, q.limit, (e) => e.id)
    },

    /** Deletes events past their tenant's retention; null when another replica is sweeping. */
    sweep: (): Promise<number | null> => db.system((sql) => sweepExpiredEvents(sql)),
  }
}

export type AuditLogService = ReturnType<typeof auditLogService>

/** The retention sweep (queue 'audit.retention', server/jobs.ts): deletes events past their tenant's retention. */
export const auditRetention = (auditLog: AuditLogService, log: Logger) => async (): Promise<void> => {
  const deleted = await auditLog.sweep()
  if (deleted) log.info({ deleted }, 'audit events past their retention deleted')
}
