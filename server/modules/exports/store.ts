// Export SQL: the export jobs and schedules, and the tenant's records as the archive holds them.
//
// The records of every kind are read here, through the format's column lists (format.ts), rather
// than through each owning module: an export is a copy of the tenant's rows as they are, read in
// one snapshot, and the restore writes them back as they were (server/modules/restores/store.ts).
// Every query names its tenant even though row-level security would also confine it.
import type { SqlFragment, TxSql } from '../../platform/db.js'
import { columnsOf, SPECS, type Include, type Kind } from './format.js'

export type Row = Record<string, unknown>

/** Which of a kind's records: the tenant's, or one parent's (a project's versions). */
export interface RecordScope {
  tenantId: string
  where?: { column: string; value: string }
}

const keyOf = (kind: Kind) => (SPECS[kind].key.length ? [...SPECS[kind].key] : ['tenant_id'])
const tuple = (sql: TxSql, values: readonly unknown[]) =>
  values.map((v) => sql`${v as string}`).reduce((a, b) => sql`${a}, ${b}`)
const scoped = (sql: TxSql, s: RecordScope) =>
  sql`tenant_id = ${s.tenantId} ${s.where ? sql`and ${sql(s.where.column)} = ${s.where.value}` : sql``}`

/**
 * The keys of up to `limit` records of a kind after `after` (a key, in key order), each with its
 * size as PostgreSQL renders the record as JSON: what the writer reads next, measured before any of
 * it is fetched.
 */
export function recordSizes(sql: TxSql, kind: Kind, s: RecordScope, after: readonly unknown[] | null, limit: number) {
  const key = keyOf(kind)
  const columns = [...new Set([...columnsOf(kind), ...key])]
  return sql<{ key: unknown[]; bytes: number }[]>`
    select json_build_array(${sql(key)}) as key, octet_length(row_to_json(x)::text)::float8 as bytes
      from (select ${sql(columns)} from ${sql(SPECS[kind].table)}
             where ${scoped(sql, s)} ${after ? sql`and (${sql(key)}) > (${tuple(sql, after)})` : sql``}
             order by ${sql(key)} limit ${limit}) x
     order by ${sql(key)}`
}

/** A kind's records from one key to another, both included, in key order. */
export function recordRange(sql: TxSql, kind: Kind, s: RecordScope, from: readonly unknown[], to: readonly unknown[]) {
  const key = keyOf(kind)
  return sql<Row[]>`
    select ${sql(columnsOf(kind))} from ${sql(SPECS[kind].table)}
     where ${scoped(sql, s)} and (${sql(key)}) >= (${tuple(sql, from)}) and (${sql(key)}) <= (${tuple(sql, to)})
     order by ${sql(key)}`
}

/** What a record of a kind looks like in an archive: bigint counts as numbers (postgres.js gives text). */
export function asRecord(kind: Kind, row: Row): Row {
  for (const [name, c] of Object.entries(SPECS[kind].columns)) {
    if (c.type === 'int' && typeof row[name] === 'string') row[name] = Number(row[name])
  }
  return row
}

export interface TenantRecord {
  id: string
  name: string
  plan: string
  status: string
  created_at: Date
}

export async function tenantRecord(sql: TxSql, tenantId: string): Promise<TenantRecord | undefined> {
  const [row] = await sql<TenantRecord[]>`select id, name, plan, status, created_at from tenants where id = ${tenantId}`
  return row
}

/** Ids of a kind's records (the projects and agents an archive has one entry each for). */
export async function ids(sql: TxSql, kind: 'projects' | 'agents', tenantId: string): Promise<string[]> {
  const rows = await sql<
    { id: string }[]
  >`select id from ${sql(SPECS[kind].table)} where tenant_id = ${tenantId} order by id`
  return rows.map((r) => r.id)
}

/** The agents that have run on a project: its agents.json. */
export function projectAgents(sql: TxSql, tenantId: string, projectId: string) {
  return sql<{ id: string; name: string }[]>`
    select a.id, a.name from agents a
     where a.tenant_id = ${tenantId} and exists (select 1 from agent_runs r where r.tenant_id = a.tenant_id and r.agent_id = a.id and r.project_id = ${projectId})
     order by a.id`
}

/** Blob keys of a project's file contents that its current files do not hold (older versions'), one per digest. */
export function historyBlobs(sql: TxSql, tenantId: string, projectId: string) {
  return sql<{ sha256: string; blob_key: string; size: number }[]>`
    select distinct on (m.sha256) m.sha256, m.blob_key, m.size::float8 as size from project_version_files m
     where m.tenant_id = ${tenantId} and m.project_id = ${projectId}
       and not exists (select 1 from project_files f where f.tenant_id = m.tenant_id and f.project_id = m.project_id and f.sha256 = m.sha256)
     order by m.sha256`
}

/** The current files' keys in the store, by path. */
export function currentBlobs(sql: TxSql, tenantId: string, projectId: string) {
  return sql<{ path: string; blob_key: string; size: number }[]>`
    select path, blob_key, size::float8 as size from project_files where tenant_id = ${tenantId} and project_id = ${projectId} order by path`
}

// ---- export jobs --------------------------------------------------------------------------------

export type ExportStatus = 'pending' | 'running' | 'completed' | 'failed'
export type ExportKind = 'manual' | 'scheduled' | 'backup'

export interface ExportTarget {
  provider: 's3' | 'r2' | 'gcs' | 'azure'
  endpoint: string
  region: string
  bucket: string
  prefix: string
  accessKeySealed: string
  secretKeySealed: string
}

export interface ExportRow {
  id: string
  tenant_id: string
  kind: ExportKind
  schedule_id: string | null
  format: 'zip' | 'json' | 'csv'
  include: Include[]
  destination: 'download' | 's3'
  target: ExportTarget | null
  status: ExportStatus
  object_key: string | null
  size: number | null
  checksum: string | null
  error: { code: string; message: string } | null
  requested_by: { type: string; id: string | null }
  job_id: string | null
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  expires_at: Date | null
  /** The job's own state, when the job is still kept: an export whose job ended without it is reconciled. */
  job_status?: string | null
  job_error?: string | null
}

const EXPORT_COLUMNS = (sql: TxSql) => sql`
  e.id, e.tenant_id, e.kind, e.schedule_id, e.format, e.include, e.destination, e.target, e.status, e.object_key,
  e.size::float8 as size, e.checksum, e.error, e.requested_by, e.job_id, e.created_at, e.started_at, e.finished_at, e.expires_at,
  j.status as job_status, j.last_error as job_error`

export async function insertExport(
  sql: TxSql,
  e: Pick<
    ExportRow,
    | 'id'
    | 'tenant_id'
    | 'kind'
    | 'schedule_id'
    | 'format'
    | 'include'
    | 'destination'
    | 'target'
    | 'requested_by'
    | 'job_id'
    | 'created_at'
  >,
): Promise<void> {
  await sql`
    insert into tenant_exports (id, tenant_id, kind, schedule_id, format, include, destination, target, requested_by, job_id, created_at)
    values (${e.id}, ${e.tenant_id}, ${e.kind}, ${e.schedule_id}, ${e.format}, ${sql.array(e.include)}, ${e.destination},
            ${e.target ? sql.json(e.target as never) : null}, ${sql.json(e.requested_by as never)}, ${e.job_id}, ${e.created_at})`
}

export async function getExport(sql: TxSql, tenantId: string, id: string): Promise<ExportRow | undefined> {
  const [row] = await sql<ExportRow[]>`
    select ${EXPORT_COLUMNS(sql)} from tenant_exports e left join jobs j on j.id = e.job_id
     where e.tenant_id = ${tenantId} and e.id = ${id}`
  return row
}

export function listExports(
  sql: TxSql,
  tenantId: string,
  o: { limit: number; before: string | null; scheduleId?: string },
) {
  return sql<ExportRow[]>`
    select ${EXPORT_COLUMNS(sql)} from tenant_exports e left join jobs j on j.id = e.job_id
     where e.tenant_id = ${tenantId}
       ${o.scheduleId ? sql`and e.schedule_id = ${o.scheduleId}` : sql``}
       ${o.before ? sql`and e.id < ${o.before}` : sql``}
     order by e.id desc limit ${o.limit}`
}

/** Manual exports asked for since a time (the free plan's monthly allowance), failed ones aside. */
export async function countManualSince(sql: TxSql, tenantId: string, since: Date): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from tenant_exports
     where tenant_id = ${tenantId} and kind = 'manual' and created_at >= ${since} and status <> 'failed'`
  return row!.n
}

/** Sets `set` on an export that has not ended (pending or running); false when it had ended. */
async function updateUnended(sql: TxSql, tenantId: string, id: string, set: SqlFragment): Promise<boolean> {
  const r = await sql`
    update tenant_exports set ${set}
     where tenant_id = ${tenantId} and id = ${id} and status in ('pending', 'running')`
  return r.count > 0
}

/** Takes an export to running (again, after a crash); false when it has already ended. */
export function startExport(sql: TxSql, tenantId: string, id: string, at: Date): Promise<boolean> {
  return updateUnended(sql, tenantId, id, sql`status = 'running', started_at = coalesce(started_at, ${at})`)
}

export function completeExport(
  sql: TxSql,
  tenantId: string,
  id: string,
  o: { objectKey: string; size: number; checksum: string; at: Date; expiresAt: Date | null },
): Promise<boolean> {
  return updateUnended(
    sql,
    tenantId,
    id,
    sql`status = 'completed', object_key = ${o.objectKey}, size = ${o.size}, checksum = ${o.checksum},
        finished_at = ${o.at}, expires_at = ${o.expiresAt}, error = null`,
  )
}

export function failExport(
  sql: TxSql,
  tenantId: string,
  id: string,
  error: { code: string; message: string },
  at: Date,
): Promise<boolean> {
  return updateUnended(sql, tenantId, id, sql`status = 'failed', error = ${sql.json(error)}, finished_at = ${at}`)
}

// ---- schedules ----------------------------------------------------------------------------------

export interface ScheduleRow {
  id: string
  tenant_id: string
  frequency: 'daily' | 'weekly' | 'monthly'
  format: 'zip' | 'json' | 'csv'
  include: Include[]
  provider: ExportTarget['provider']
  endpoint: string
  region: string
  bucket: string
  prefix: string
  created_at: Date
  /** The sealed destination, as an export of the schedule reaches it. */
  target: ExportTarget
  /** The runner's next slot for it. */
  next_at: Date | null
}

const SCHEDULE_COLUMNS = (sql: TxSql) => sql`
  s.id, s.tenant_id, s.frequency, s.format, s.include, s.provider, s.endpoint, s.region, s.bucket, s.prefix, s.created_at,
  json_build_object('provider', s.provider, 'endpoint', s.endpoint, 'region', s.region, 'bucket', s.bucket, 'prefix', s.prefix,
                    'accessKeySealed', s.access_key_sealed, 'secretKeySealed', s.secret_key_sealed) as target,
  js.next_at`

export async function insertSchedule(
  sql: TxSql,
  s: {
    id: string
    tenantId: string
    frequency: ScheduleRow['frequency']
    format: ScheduleRow['format']
    include: Include[]
    target: ExportTarget
    createdBy: { type: string; id: string }
  },
): Promise<void> {
  await sql`
    insert into export_schedules (id, tenant_id, frequency, format, include, provider, endpoint, region, bucket, prefix, access_key_sealed, secret_key_sealed, created_by)
    values (${s.id}, ${s.tenantId}, ${s.frequency}, ${s.format}, ${sql.array(s.include)}, ${s.target.provider}, ${s.target.endpoint}, ${s.target.region},
            ${s.target.bucket}, ${s.target.prefix}, ${s.target.accessKeySealed}, ${s.target.secretKeySealed}, ${sql.json(s.createdBy)})`
}

export async function getSchedule(sql: TxSql, tenantId: string, id: string): Promise<ScheduleRow | undefined> {
  const [row] = await sql<ScheduleRow[]>`
    select ${SCHEDULE_COLUMNS(sql)} from export_schedules s
      left join job_schedules js on js.name = 'export:' || s.tenant_id || ':' || s.id
     where s.tenant_id = ${tenantId} and s.id = ${id}`
  return row
}

export function listSchedules(sql: TxSql, tenantId: string, limit: number, before: string | null) {
  return sql<ScheduleRow[]>`
    select ${SCHEDULE_COLUMNS(sql)} from export_schedules s
      left join job_schedules js on js.name = 'export:' || s.tenant_id || ':' || s.id
     where s.tenant_id = ${tenantId} ${before ? sql`and s.id < ${before}` : sql``}
     order by s.id desc limit ${limit}`
}

export async function deleteSchedule(sql: TxSql, tenantId: string, id: string): Promise<boolean> {
  return (await sql`delete from export_schedules where tenant_id = ${tenantId} and id = ${id}`).count > 0
}

// ---- automatic backups ----------------------------------------------------------------------------

/**
 * Across tenants: active tenants of the plans with automatic backups whose latest backup is older
 * than their plan's interval (`hours` by plan), oldest due first.
 */
export function tenantsDueForBackup(sql: TxSql, hours: Readonly<Record<string, number>>, now: Date, limit: number) {
  const plans = Object.entries(hours)
  return sql<{ id: string; plan: string }[]>`
    select t.id, t.plan from tenants t
      join unnest(${sql.array(plans.map(([p]) => p))}::text[], ${sql.array(plans.map(([, h]) => h))}::int[]) as r (plan, hours) on r.plan = t.plan
     where t.status = 'active'
       and not exists (select 1 from tenant_exports e where e.tenant_id = t.id and e.kind = 'backup'
                         and e.created_at > ${now}::timestamptz - r.hours * interval '1 hour' + interval '1 minute')
     order by t.id limit ${limit}`
}

/**
 * Across tenants: archives in tenants' stores past their keeping: downloads whose link has expired,
 * and automatic backups older than their tenant's current plan keeps them (`days` by plan; a plan
 * absent keeps none).
 */
export function expiredArchives(sql: TxSql, days: Readonly<Record<string, number>>, now: Date, limit: number) {
  const plans = Object.entries(days)
  return sql<{ id: string; tenant_id: string; kind: ExportKind; object_key: string }[]>`
    select e.id, e.tenant_id, e.kind, e.object_key from tenant_exports e
      join tenants t on t.id = e.tenant_id
      left join unnest(${sql.array(plans.map(([p]) => p))}::text[], ${sql.array(plans.map(([, d]) => d))}::int[]) as r (plan, days) on r.plan = t.plan
     where e.destination = 'download' and e.object_key is not null
       and (case when e.kind = 'backup' then e.created_at + coalesce(r.days, 0) * interval '1 day' else e.expires_at end) < ${now}
     order by e.created_at limit ${limit}`
}

/** After its object is deleted: a backup's row goes; an export's stays, without its object. */
export async function forgetArchive(sql: TxSql, id: string, kind: ExportKind): Promise<void> {
  if (kind === 'backup') await sql`delete from tenant_exports where id = ${id}`
  else await sql`update tenant_exports set object_key = null where id = ${id}`
}
