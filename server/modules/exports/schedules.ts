// Scheduled exports: a tenant's bucket (S3, R2, GCS interoperability, Azure through an S3
// connector) receives an export every day, week or month. Each schedule is a schedule of the job
// runner (export:<tenant>:<id>, queue 'exports.scheduled'): a slot runs once across all replicas,
// and after a time when none ran, the latest missed slot runs once. The slot's job is the export:
// its id is the export's, so a slot taken again after a crash writes the same export, not another.
//
// The destination is checked when the schedule is made (a probe object written and deleted: the
// site's own store when no endpoint is given, reached as the server reaches its own objects; any
// other through the outbound policy); its keys are sealed by the secrets adapter, bound to the
// schedule's row, and never returned.
import type { Clock } from '../../clock.js'
import { newId } from '../../../common/ids.js'
import type { Actor } from '../../domain/actor.js'
import { notFound } from '../../domain/errors.js'
import { requireFeature, type FeatureContext } from '../../domain/features.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import type { Db, TxSql } from '../../platform/db.js'
import { removeSchedule, upsertSchedule, type Job } from '../../platform/jobs.js'
import { auditBy } from '../audit/service.js'
import { tenantFor } from '../tenants/service.js'
import { normalizeInclude, type ExportFormat, type Include } from './format.js'
import type { Destination, ExportsService, ExportView } from './service.js'
import * as store from './store.js'

export const SCHEDULED_QUEUE = 'exports.scheduled'
export const FREQUENCIES = ['daily', 'weekly', 'monthly'] as const
export type Frequency = (typeof FREQUENCIES)[number]
/** Runs a schedule shows with it. */
const LAST_RUNS = 10

export const scheduleName = (tenantId: string, id: string) => `export:${tenantId}:${id}`

/**
 * The slot of a schedule: 02:00 UTC plus a minute and hour taken from its id, so that a deployment's
 * schedules do not all start at once; weekly on Sunday, monthly on the 1st.
 */
export function cronOf(id: string, frequency: Frequency): string {
  const n = parseInt(id.replaceAll('-', '').slice(-6), 16)
  const minute = n % 60
  const hour = 2 + (Math.floor(n / 60) % 3)
  return frequency === 'daily'
    ? `${minute} ${hour} * * *`
    : frequency === 'weekly'
      ? `${minute} ${hour} * * 0`
      : `${minute} ${hour} 1 * *`
}

export interface ScheduleRequest {
  frequency: Frequency
  format?: ExportFormat
  include?: string[]
  destination: Destination
}

export interface ScheduleView {
  scheduleId: string
  tenantId: string
  frequency: Frequency
  format: ExportFormat
  include: Include[]
  destination: 's3'
  provider: string
  s3Endpoint: string
  s3Region: string
  s3Bucket: string
  s3Prefix: string
  /** When the next slot is due. */
  nextRunAt: string | null
  createdAt: string
  /** The latest runs, newest first. */
  lastRuns: ExportView[]
}

export function schedulesService(deps: {
  db: Db
  exports: ExportsService
  deployment: Omit<FeatureContext, 'plan'>
  now?: Clock
}) {
  const { db, exports } = deps
  const clock = deps.now ?? Date.now

  async function view(sql: TxSql, row: store.ScheduleRow): Promise<ScheduleView> {
    const runs = await store.listExports(sql, row.tenant_id, { limit: LAST_RUNS, before: null, scheduleId: row.id })
    return {
      scheduleId: row.id,
      tenantId: row.tenant_id,
      frequency: row.frequency,
      format: row.format,
      include: row.include,
      destination: 's3',
      provider: row.provider,
      s3Endpoint: row.endpoint,
      s3Region: row.region,
      s3Bucket: row.bucket,
      s3Prefix: row.prefix,
      nextRunAt: row.next_at?.toISOString() ?? null,
      createdAt: row.created_at.toISOString(),
      lastRuns: await Promise.all(runs.map(exports.present)),
    }
  }

  return {
    async create(a: Actor<string | null>, tenantId: string, input: ScheduleRequest): Promise<ScheduleView> {
      // The plan first, then the destination: nothing reaches out for a tenant that may not schedule.
      const { plan } = await db.tenant(tenantId, (sql) => tenantFor(sql, a, tenantId))
      requireFeature('scheduled_export', { plan, ...deps.deployment })
      const include = normalizeInclude(input.include ?? ['all'])
      const d = await exports.checkedDestination(tenantId, input.destination)
      const id = newId()
      const actor: Actor = { ...a, tenantId }
      return db.tenant(tenantId, async (sql) => {
        await tenantFor(sql, a, tenantId)
        const target = exports.sealTarget(tenantId, id, 'export_schedules', d)
        await store.insertSchedule(sql, {
          id,
          tenantId,
          frequency: input.frequency,
          format: input.format ?? 'zip',
          include,
          target,
          createdBy: { type: actor.principal.kind, id: actor.principal.id },
        })
        await upsertSchedule(
          sql,
          {
            name: scheduleName(tenantId, id),
            queue: SCHEDULED_QUEUE,
            cron: cronOf(id, input.frequency),
            tenantId,
            payload: { scheduleId: id },
          },
          new Date(clock()),
        )
        await auditBy(sql, actor, {
          action: 'export.schedule_created',
          target: { type: 'export_schedule', id },
          details: {
            frequency: input.frequency,
            format: input.format ?? 'zip',
            include,
            provider: d.provider,
            endpoint: d.endpoint,
            bucket: d.bucket,
            prefix: d.prefix,
          },
        })
        return view(sql, (await store.getSchedule(sql, tenantId, id))!)
      })
    },

    async list(a: Actor<string | null>, tenantId: string, page: { limit: number; cursor?: string }) {
      const before = decodeIdCursor(page.cursor)
      return db.tenant(tenantId, async (sql) => {
        await tenantFor(sql, a, tenantId)
        const p = toPage(await store.listSchedules(sql, tenantId, page.limit + 1, before), page.limit, (r) => r.id)
        return { items: await Promise.all(p.items.map((r) => view(sql, r))), nextCursor: p.nextCursor }
      })
    },

    async get(a: Actor<string | null>, tenantId: string, id: string): Promise<ScheduleView> {
      return db.tenant(tenantId, async (sql) => {
        await tenantFor(sql, a, tenantId)
        const row = await store.getSchedule(sql, tenantId, id)
        if (!row) throw notFound('export schedule', id)
        return view(sql, row)
      })
    },

    /** Deletes a schedule and its slots to come; its past runs stay listed with the tenant's exports. */
    async remove(a: Actor<string | null>, tenantId: string, id: string): Promise<void> {
      await db.tenant(tenantId, async (sql) => {
        await tenantFor(sql, a, tenantId)
        if (!(await store.deleteSchedule(sql, tenantId, id))) throw notFound('export schedule', id)
        await removeSchedule(sql, scheduleName(tenantId, id))
        await auditBy(
          sql,
          { ...a, tenantId },
          { action: 'export.schedule_deleted', target: { type: 'export_schedule', id } },
        )
      })
    },

    /** A slot's job: the export of that slot, made (once: its id is the job's) and written. */
    async run(job: Job<{ scheduleId: string }>): Promise<void> {
      const tenantId = job.tenantId!
      const made = await db.tenant(tenantId, async (sql) => {
        const schedule = await store.getSchedule(sql, tenantId, job.payload.scheduleId)
        if (!schedule) return false // deleted since the slot was queued
        if (!(await store.getExport(sql, tenantId, job.id))) {
          await store.insertExport(sql, {
            id: job.id,
            tenant_id: tenantId,
            kind: 'scheduled',
            schedule_id: schedule.id,
            format: schedule.format,
            include: schedule.include,
            destination: 's3',
            // Where it goes, without the keys: the run reads them from the schedule.
            target: { ...schedule.target, accessKeySealed: '', secretKeySealed: '' },
            requested_by: { type: 'system', id: null },
            job_id: job.id,
            created_at: new Date(clock()),
          })
        }
        return true
      })
      if (made) await exports.run({ ...job, payload: { exportId: job.id } })
    },
  }
}

export type SchedulesService = ReturnType<typeof schedulesService>
