// Exports and restores are each the record of one job on the runner. They are shown as their row
// says, unless the job ended without the record hearing of it (its worker killed on the last
// attempt) or is gone, which shows as failed JOB_INTERRUPTED rather than in progress for ever; their
// end is audited as done by whoever asked for them.
import { ERRORS } from '../../domain/errors.js'
import type { TxSql } from '../../platform/db.js'
import { audit, type AuditActor } from '../audit/service.js'

interface JobRecord<S extends string, E> {
  status: S | 'failed'
  error: E | null
  job_id: string | null
  /** The job's own state while the runner keeps the job; null once it is gone. */
  job_status?: string | null
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
}

/** The status and error to show; `unended` are the record's statuses while its job is at work. */
export function shownState<S extends string, E>(
  row: JobRecord<S, E>,
  unended: readonly S[],
): { status: S | 'failed'; error: E | { code: 'JOB_INTERRUPTED'; message: string } | null } {
  const jobEnded = row.job_status === null || row.job_status === 'failed' || row.job_status === 'cancelled'
  return unended.includes(row.status as S) && row.job_id && jobEnded
    ? { status: 'failed', error: { code: 'JOB_INTERRUPTED', message: ERRORS.JOB_INTERRUPTED.message } }
    : { status: row.status, error: row.error }
}

/** The times a view gives, completedAt only when the shown status is completed. */
export const shownTimes = (row: JobRecord<string, unknown>, status: string) => ({
  createdAt: row.created_at.toISOString(),
  startedAt: row.started_at?.toISOString() ?? null,
  completedAt: status === 'completed' ? (row.finished_at?.toISOString() ?? null) : null,
})

/** A record's end in its tenant's audit log (`kind`.completed or .failed), done by whoever asked for it. */
export const auditEnd = (
  sql: TxSql,
  kind: 'export' | 'restore',
  row: { id: string; tenant_id: string; requested_by: { type: string; id: string | null } },
  outcome: 'completed' | 'failed',
  details: Record<string, unknown>,
): Promise<void> =>
  audit(sql, {
    tenantId: row.tenant_id,
    actor: row.requested_by as AuditActor,
    action: `${kind}.${outcome}`,
    target: { type: kind, id: row.id },
    details,
  })
