// Restore SQL: the restore jobs, and writing an archive's records back (the kinds and columns of
// server/modules/exports/format.ts, the same the export reads). Every query names its tenant even
// though row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'
import { columnsOf, SPECS, type Kind } from '../exports/format.js'

export type Row = Record<string, unknown>

export interface RestoreRow {
  id: string
  tenant_id: string
  status: 'processing' | 'completed' | 'failed'
  merge: boolean
  validate_only: boolean
  /** A project backup's: the project restored into, or made (as_new_project). */
  project_id: string | null
  as_new_project: boolean
  upload_key: string | null
  upload_size: number
  report: Record<string, unknown> | null
  error: { code: string; message: string; details?: Record<string, unknown> } | null
  requested_by: { type: string; id: string | null }
  job_id: string | null
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  job_status?: string | null
}

const RESTORE_COLUMNS = (sql: TxSql) => sql`
  r.id, r.tenant_id, r.status, r.merge, r.validate_only, r.project_id, r.as_new_project, r.upload_key, r.upload_size::float8 as upload_size, r.report, r.error,
  r.requested_by, r.job_id, r.created_at, r.started_at, r.finished_at, j.status as job_status`

export async function insertRestore(
  sql: TxSql,
  r: Pick<
    RestoreRow,
    | 'id'
    | 'tenant_id'
    | 'merge'
    | 'validate_only'
    | 'project_id'
    | 'as_new_project'
    | 'upload_key'
    | 'upload_size'
    | 'requested_by'
    | 'job_id'
    | 'created_at'
  >,
): Promise<void> {
  await sql`
    insert into tenant_restores (id, tenant_id, merge, validate_only, project_id, as_new_project, upload_key, upload_size, requested_by, job_id, created_at)
    values (${r.id}, ${r.tenant_id}, ${r.merge}, ${r.validate_only}, ${r.project_id}, ${r.as_new_project}, ${r.upload_key}, ${r.upload_size}, ${sql.json(r.requested_by as never)}, ${r.job_id}, ${r.created_at})`
}

export async function getRestore(sql: TxSql, tenantId: string, id: string): Promise<RestoreRow | undefined> {
  const [row] = await sql<RestoreRow[]>`
    select ${RESTORE_COLUMNS(sql)} from tenant_restores r left join jobs j on j.id = r.job_id where r.tenant_id = ${tenantId} and r.id = ${id}`
  return row
}

export function listRestores(sql: TxSql, tenantId: string, limit: number, before: string | null) {
  return sql<RestoreRow[]>`
    select ${RESTORE_COLUMNS(sql)} from tenant_restores r left join jobs j on j.id = r.job_id
     where r.tenant_id = ${tenantId} ${before ? sql`and r.id < ${before}` : sql``}
     order by r.id desc limit ${limit}`
}

export async function startRestore(sql: TxSql, tenantId: string, id: string, at: Date): Promise<void> {
  await sql`update tenant_restores set started_at = coalesce(started_at, ${at}) where tenant_id = ${tenantId} and id = ${id} and status = 'processing'`
}

/** Ends a restore (completed or failed) while it is processing; false when it had ended already. */
export async function endRestore(
  sql: TxSql,
  tenantId: string,
  id: string,
  o: { status: 'completed' | 'failed'; report: Record<string, unknown> | null; error: RestoreRow['error']; at: Date },
): Promise<boolean> {
  const r = await sql`
    update tenant_restores set status = ${o.status}, report = ${o.report ? sql.json(o.report as never) : null}, error = ${o.error ? sql.json(o.error as never) : null}, finished_at = ${o.at}
     where tenant_id = ${tenantId} and id = ${id} and status = 'processing'`
  return r.count > 0
}

/** The upload is gone (removed once the restore ended). */
export async function clearUpload(sql: TxSql, tenantId: string, id: string): Promise<void> {
  await sql`update tenant_restores set upload_key = null where tenant_id = ${tenantId} and id = ${id}`
}

// ---- records ------------------------------------------------------------------------------------

/**
 * merge=false: the tenant's records of these kinds go first (their children with them, by cascade). How many of each
 * top kind went.
 */
export async function deleteKinds(
  sql: TxSql,
  tenantId: string,
  kinds: readonly ('projects' | 'agents' | 'chat_sessions' | 'llm_settings')[],
): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const kind of kinds)
    out[kind] = (await sql`delete from ${sql(SPECS[kind].table)} where tenant_id = ${tenantId}`).count
  return out
}

/**
 * The ids the tenant has of these kinds as the restore begins, kept for the transaction (a replace
 * deletes the records themselves): what tells the tenant's own records from any other. Row-level
 * security confines the reads to the tenant, and the table lives only in this session until the
 * transaction ends.
 */
export async function snapshotOwnedIds(sql: TxSql, tenantId: string, kinds: readonly Kind[]): Promise<void> {
  await sql`create temporary table restore_owned (kind text not null, id uuid not null, primary key (kind, id)) on commit drop`
  for (const kind of kinds)
    await sql`insert into restore_owned (kind, id) select ${kind}, id from ${sql(SPECS[kind].table)} where tenant_id = ${tenantId}`
}

/** Which of these ids of a kind the tenant had as the restore began (snapshotOwnedIds). */
export async function ownedIds(sql: TxSql, kind: Kind, ids: readonly string[]): Promise<Set<string>> {
  if (!ids.length) return new Set()
  const rows = await sql<
    { id: string }[]
  >`select id from restore_owned where kind = ${kind} and id = any(${sql.array([...ids])}::uuid[])`
  return new Set(rows.map((r) => r.id))
}

/**
 * Which of these users and API keys are the tenant's (who started a restored run). Row-level
 * security confines the reads to the tenant: another tenant's are not there, as none are.
 */
export async function principalIds(
  sql: TxSql,
  tenantId: string,
  users: readonly string[],
  keys: readonly string[],
): Promise<{ users: Set<string>; keys: Set<string> }> {
  const [u, k] = await Promise.all([
    users.length
      ? sql<
          { id: string }[]
        >`select id from users where tenant_id = ${tenantId} and id = any(${sql.array([...users])}::uuid[])`
      : [],
    keys.length
      ? sql<
          { id: string }[]
        >`select id from api_keys where tenant_id = ${tenantId} and id = any(${sql.array([...keys])}::uuid[])`
      : [],
  ])
  return { users: new Set(u.map((r) => r.id)), keys: new Set(k.map((r) => r.id)) }
}

/**
 * Which of these ids the tenant already has, of a kind (a reference the archive leaves to the tenant's own records).
 */
export async function existingIds(
  sql: TxSql,
  kind: 'projects' | 'agents',
  tenantId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (!ids.length) return new Set()
  const rows = await sql<
    { id: string }[]
  >`select id from ${sql(SPECS[kind].table)} where tenant_id = ${tenantId} and id = any(${sql.array([...ids])}::uuid[])`
  return new Set(rows.map((r) => r.id))
}

/** Parameters one statement may bind (PostgreSQL's protocol takes 65,535): a long list is written in parts. */
const MAX_PARAMETERS = 60_000

/**
 * What merge=false does to a record whose key a project backup's restore meets in the tenant: a
 * current file is rewritten (and marked as of the version the restore makes) unless its bytes and
 * type are the same; an agent takes the backup's definition.
 */
const REPLACE: Partial<Record<Kind, (sql: TxSql) => ReturnType<TxSql>>> = {
  project_files: (sql) => sql`
    on conflict (tenant_id, project_id, path) do update
       set blob_key = excluded.blob_key, size = excluded.size, sha256 = excluded.sha256,
           content_type = excluded.content_type, version = excluded.version, updated_at = excluded.updated_at
     where (project_files.sha256, project_files.content_type) is distinct from (excluded.sha256, excluded.content_type)`,
  agents: (sql) => sql`
    on conflict (id) do update
       set name = excluded.name, system_prompt = excluded.system_prompt, config = excluded.config,
           created_at = excluded.created_at, updated_at = excluded.updated_at
     where agents.tenant_id = excluded.tenant_id`,
}

/**
 * Inserts records of a kind for the tenant (`extra` columns added, blob_key for files); with
 * `skipExisting` a record whose key is taken is left out (merge), with `replace` it is rewritten
 * (REPLACE). The keys of the records inserted or rewritten.
 */
export async function insertRecords(
  sql: TxSql,
  kind: Kind,
  tenantId: string,
  rows: readonly Row[],
  o: { skipExisting?: boolean; replace?: boolean; extra?: (row: Row) => Row },
): Promise<Row[]> {
  if (!rows.length) return []
  const spec = SPECS[kind]
  const json = Object.entries(spec.columns)
    .filter(([, c]) => c.type === 'json')
    .map(([name]) => name)
  const values = rows.map((r) => {
    const v: Row = { ...r, tenant_id: tenantId, ...(o.extra?.(r) ?? {}) }
    for (const name of json) v[name] = v[name] === null ? null : sql.json(v[name] as never)
    return v
  })
  const columns = ['tenant_id', ...columnsOf(kind), ...Object.keys(o.extra?.(rows[0]!) ?? {})]
  const key = spec.key.length ? [...spec.key] : ['tenant_id']
  const conflict = () => (o.replace ? REPLACE[kind]!(sql) : o.skipExisting ? sql`on conflict do nothing` : sql``)
  const out: Row[] = []
  const part = Math.floor(MAX_PARAMETERS / columns.length)
  for (let i = 0; i < values.length; i += part) {
    out.push(
      ...(await sql<Row[]>`
        insert into ${sql(spec.table)} ${sql(values.slice(i, i + part) as never, columns as never)}
        ${conflict()}
        returning ${sql(key)}`),
    )
  }
  return out
}

/** merge=false into a project that exists: its current files at paths other than `paths` go. How many went. */
export async function deleteFilesExcept(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  paths: readonly string[],
): Promise<number> {
  const r = await sql`
    delete from project_files
     where tenant_id = ${tenantId} and project_id = ${projectId} and path <> all(${sql.array([...paths])}::text[])`
  return r.count
}

/**
 * The LLM settings: merge=false replaces them (the tenant's sealed key stays: archives hold none); merge leaves
 * existing ones.
 */
export async function putLlmSettings(sql: TxSql, tenantId: string, row: Row, replace: boolean): Promise<boolean> {
  const r = await sql`
    insert into tenant_llm_settings (tenant_id, provider, base_url, model, temperature, max_tokens, updated_at)
    values (${tenantId}, ${row.provider as string}, ${row.base_url as string}, ${row.model as string}, ${row.temperature as number | null},
            ${row.max_tokens as number | null}, ${row.updated_at as string})
    on conflict (tenant_id) do ${
      replace
        ? sql`update set provider = excluded.provider, base_url = excluded.base_url, model = excluded.model,
                  temperature = excluded.temperature, max_tokens = excluded.max_tokens, updated_at = excluded.updated_at`
        : sql`nothing`
    }`
  return r.count > 0
}

/**
 * What the plan bounds, after the restore's writes: the tenant's chat sessions, and its largest project's file bytes.
 */
export async function usage(
  sql: TxSql,
  tenantId: string,
): Promise<{ chatSessions: number; largestProjectBytes: number }> {
  const [row] = await sql<{ chat_sessions: number; largest: number }[]>`
    select (select count(*)::int from chat_sessions where tenant_id = ${tenantId}) as chat_sessions,
           (select coalesce(max(b), 0)::float8 from (select sum(size) as b from project_files where tenant_id = ${tenantId} group by project_id) s) as largest`
  return { chatSessions: row!.chat_sessions, largestProjectBytes: row!.largest }
}
