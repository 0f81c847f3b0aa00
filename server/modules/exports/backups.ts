// The plans' automatic backups (pro and growth daily, enterprise hourly; free none) and the
// retention of what exports leave in tenants' stores. One recurring job (every hour, once across
// replicas) queues a backup for each tenant whose latest is older than its plan's interval, then
// removes the archives past their keeping: a download's once its 7-day link has expired, a
// backup's once older than its tenant's current plan keeps backups (7, 30 or 90 days). A backup is
// an export of everything (kind backup, zip) into the tenant's store, through the per-tenant
// storage seam (storage.forTenant): where the tenant's objects are, its backups are too.
import type { Logger } from 'pino'
import type { Clock } from '../../clock.js'
import { PLAN_TERMS, PLANS } from '../../domain/plans.js'
import type { Blobs } from '../../platform/blobs.js'
import type { Db } from '../../platform/db.js'
import type { Storage } from '../../platform/storage.js'
import type { ExportsService } from './service.js'
import * as store from './store.js'

export const BACKUPS_QUEUE = 'exports.backups'
const BATCH = 200

/** Hours between a plan's automatic backups, for the plans that have them. */
export const BACKUP_HOURS: Readonly<Record<string, number>> = Object.fromEntries(
  PLANS.flatMap((p) =>
    PLAN_TERMS[p].limits.automaticBackupHours ? [[p, PLAN_TERMS[p].limits.automaticBackupHours]] : [],
  ),
)
const RETENTION_DAYS: Readonly<Record<string, number>> = Object.fromEntries(
  PLANS.map((p) => [p, PLAN_TERMS[p].limits.backupRetentionDays]),
)

export interface BackupRound {
  queued: number
  removed: number
  failed: number
}

/** One round: the backups due queued, the expired archives removed (object first, then the row). */
export async function backupRound(
  deps: { db: Db; storage: Storage; exports: ExportsService; log: Pick<Logger, 'info' | 'warn'> },
  now: Date,
): Promise<BackupRound> {
  const round: BackupRound = { queued: 0, removed: 0, failed: 0 }
  for (;;) {
    const due = await deps.db.system((sql) => store.tenantsDueForBackup(sql, BACKUP_HOURS, now, BATCH))
    if (!due.length) break
    await deps.db.system(async (sql) => {
      for (const t of due) {
        const slot = Math.floor(now.getTime() / (BACKUP_HOURS[t.plan]! * 3600_000))
        const id = await deps.exports.enqueue(sql, {
          tenantId: t.id,
          kind: 'backup',
          scheduleId: null,
          format: 'zip',
          include: ['projects', 'agents', 'chat_history', 'settings'],
          target: null,
          requestedBy: { type: 'system', id: null },
          uniqueKey: `backup:${t.id}:${slot}`,
        })
        if (id) round.queued++
      }
    })
    if (due.length < BATCH) break
  }
  const stores = new Map<string, Promise<Blobs>>()
  const failedIds = new Set<string>()
  for (;;) {
    const expired = (await deps.db.system((sql) => store.expiredArchives(sql, RETENTION_DAYS, now, BATCH))).filter(
      (e) => !failedIds.has(e.id),
    )
    if (!expired.length) break
    for (const e of expired) {
      try {
        if (!stores.has(e.tenant_id)) stores.set(e.tenant_id, deps.storage.forTenant(e.tenant_id))
        await (await stores.get(e.tenant_id)!).remove(e.object_key)
        await deps.db.system((sql) => store.forgetArchive(sql, e.id, e.kind))
        round.removed++
      } catch (err) {
        // Kept for the next round; the rest go on.
        failedIds.add(e.id)
        round.failed++
        deps.log.warn(
          { err, tenantId: e.tenant_id, exportId: e.id },
          'could not remove an expired archive; it is tried again next hour',
        )
      }
    }
    if (expired.length < BATCH) break
  }
  if (round.queued || round.removed || round.failed)
    deps.log.info({ ...round }, 'automatic backups queued and expired archives removed')
  return round
}

/** The round of queue 'exports.backups' (server/jobs.ts): every hour, and at once on a new installation. */
export const automaticBackups =
  (deps: { db: Db; storage: Storage; exports: ExportsService; log: Logger; now?: Clock }) => async (): Promise<void> =>
    void (await backupRound(deps, new Date((deps.now ?? Date.now)())))
