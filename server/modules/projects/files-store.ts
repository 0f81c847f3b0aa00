// Project file SQL: the current files (project_files) and every version's manifest
// (project_version_files). Every query names its tenant even though row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'

export interface FileRow {
  path: string
  blob_key: string
  size: number
  sha256: string
  content_type: string
  version: number
  updated_at: Date
}

export interface FileWrite {
  path: string
  blobKey: string
  size: number
  sha256: string
  contentType: string
}

const columns = (sql: TxSql) => sql`path, blob_key, size::float8 as size, sha256, content_type, version, updated_at`

/** In path order (byte order: the column is collate "C"), after `after`. */
export function listFiles(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  o: { limit: number; after: string | null; prefix: string | null },
) {
  return sql<FileRow[]>`
    select ${columns(sql)} from project_files
     where tenant_id = ${tenantId} and project_id = ${projectId}
       ${o.prefix ? sql`and starts_with(path, ${o.prefix})` : sql``}
       ${o.after !== null ? sql`and path > ${o.after}` : sql``}
     order by path limit ${o.limit}`
}

export function selectFiles(sql: TxSql, tenantId: string, projectId: string, paths: string[]) {
  return sql<FileRow[]>`
    select ${columns(sql)} from project_files
     where tenant_id = ${tenantId} and project_id = ${projectId} and path = any(${sql.array(paths)}::text[])`
}

/**
 * What a change of `paths` is judged by, in one statement: whether the project is the tenant's,
 * the current files at those paths, and the bytes all its current files hold.
 */
export async function fileState(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  paths: string[],
): Promise<{ project: boolean; files: FileRow[]; used: number }> {
  const rows = await sql<(Partial<FileRow> & { project: boolean; used: number })[]>`
    select exists(select 1 from projects where tenant_id = ${tenantId} and id = ${projectId}) as project, u.used,
           f.path, f.blob_key, f.size::float8 as size, f.sha256, f.content_type, f.version, f.updated_at
      from (select coalesce(sum(size), 0)::float8 as used from project_files where tenant_id = ${tenantId} and project_id = ${projectId}) u
      left join project_files f on f.tenant_id = ${tenantId} and f.project_id = ${projectId} and f.path = any(${sql.array(paths)}::text[])`
  return {
    project: rows[0]!.project,
    used: rows[0]!.used,
    files: rows.filter((r) => r.path != null).map(({ project: _, used: __, ...f }) => f as FileRow),
  }
}

/** Every current file, in batches (for backups of any size). */
export function fileBatches(sql: TxSql, tenantId: string, projectId: string, batch = 500): AsyncIterable<FileRow[]> {
  return sql<FileRow[]>`
    select ${columns(sql)} from project_files
     where tenant_id = ${tenantId} and project_id = ${projectId}
     order by path`.cursor(batch)
}

/** Bytes of the project's current files. */
export async function usedBytes(sql: TxSql, tenantId: string, projectId: string): Promise<number> {
  const [row] = await sql<
    { n: number }[]
  >`select coalesce(sum(size), 0)::float8 as n from project_files where tenant_id = ${tenantId} and project_id = ${projectId}`
  return row!.n
}

/** Bytes a version's manifest holds. */
export async function manifestBytes(sql: TxSql, tenantId: string, projectId: string, version: number): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select coalesce(sum(size), 0)::float8 as n from project_version_files where tenant_id = ${tenantId} and project_id = ${projectId} and version = ${version}`
  return row!.n
}

export async function upsertFile(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  version: number,
  f: FileWrite,
  at: Date,
): Promise<FileRow> {
  const [row] = await sql<FileRow[]>`
    insert into project_files (tenant_id, project_id, path, blob_key, size, sha256, content_type, version, updated_at)
    values (${tenantId}, ${projectId}, ${f.path}, ${f.blobKey}, ${f.size}, ${f.sha256}, ${f.contentType}, ${version}, ${at})
    on conflict (tenant_id, project_id, path) do update
       set blob_key = excluded.blob_key, size = excluded.size, sha256 = excluded.sha256,
           content_type = excluded.content_type, version = excluded.version, updated_at = excluded.updated_at
    returning ${columns(sql)}`
  return row!
}

export async function deleteFiles(sql: TxSql, tenantId: string, projectId: string, paths: string[]): Promise<void> {
  await sql`delete from project_files where tenant_id = ${tenantId} and project_id = ${projectId} and path = any(${sql.array(paths)}::text[])`
}

/** Records the current files as the manifest of `version` (which must exist in project_versions). */
export async function snapshotManifest(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  version: number,
): Promise<void> {
  await sql`
    insert into project_version_files (tenant_id, project_id, version, path, blob_key, size, sha256, content_type)
    select tenant_id, project_id, ${version}, path, blob_key, size, sha256, content_type from project_files
     where tenant_id = ${tenantId} and project_id = ${projectId}`
}

/**
 * Makes the current files those of version `from`'s manifest, as written by version `to`: paths not
 * in the manifest go, paths whose bytes or type differ are rewritten (and marked `to`), unchanged
 * ones keep their version and time.
 */
export async function restoreManifest(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  from: number,
  to: number,
  at: Date,
): Promise<void> {
  await sql`
    delete from project_files f
     where f.tenant_id = ${tenantId} and f.project_id = ${projectId}
       and not exists (select 1 from project_version_files m
                        where m.tenant_id = f.tenant_id and m.project_id = f.project_id and m.version = ${from} and m.path = f.path)`
  await sql`
    insert into project_files (tenant_id, project_id, path, blob_key, size, sha256, content_type, version, updated_at)
    select tenant_id, project_id, path, blob_key, size, sha256, content_type, ${to}, ${at} from project_version_files
     where tenant_id = ${tenantId} and project_id = ${projectId} and version = ${from}
    on conflict (tenant_id, project_id, path) do update
       set blob_key = excluded.blob_key, size = excluded.size, sha256 = excluded.sha256,
           content_type = excluded.content_type, version = excluded.version, updated_at = excluded.updated_at
     where (project_files.sha256, project_files.content_type) is distinct from (excluded.sha256, excluded.content_type)`
}

// ---- what points at an object (migration 0016) -----------------------------------------------------

/**
 * Holds an object's advisory lock for the transaction: registering an upload and deleting an
 * object nothing points at take it, so a delete never meets an upload of the same bytes half way.
 */
export async function lockObject(sql: TxSql, key: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${'atrium.object:' + key}, 0))`
}

/** Registers an upload, under its object's lock (taken as the row is made, in one statement). */
export async function insertStaged(
  sql: TxSql,
  s: { id: string; tenantId: string; blobKey: string; expiresAt: Date },
): Promise<void> {
  await sql`
    insert into staged_objects (id, tenant_id, blob_key, expires_at)
    select ${s.id}, ${s.tenantId}, ${s.blobKey}, ${s.expiresAt} from (select pg_advisory_xact_lock(hashtextextended(${'atrium.object:' + s.blobKey}, 0))) locked`
}

export async function deleteStaged(sql: TxSql, tenantId: string, ids: string[]): Promise<void> {
  if (ids.length)
    await sql`delete from staged_objects where tenant_id = ${tenantId} and id = any(${sql.array(ids)}::uuid[])`
}

/** The keys among `keys` that something points at: a current file, a version's manifest, an upload not yet expired. */
export async function referencedKeys(sql: TxSql, tenantId: string, keys: string[], now: Date): Promise<Set<string>> {
  if (!keys.length) return new Set()
  const rows = await sql<{ blob_key: string }[]>`
    select blob_key from project_files where tenant_id = ${tenantId} and blob_key = any(${sql.array(keys)}::text[])
    union
    select blob_key from project_version_files where tenant_id = ${tenantId} and blob_key = any(${sql.array(keys)}::text[])
    union
    select blob_key from staged_objects where tenant_id = ${tenantId} and blob_key = any(${sql.array(keys)}::text[]) and expires_at > ${now}`
  return new Set(rows.map((r) => r.blob_key))
}

/** Uploads whose change never came (expired registrations), oldest first: the collector's to finish. */
export function expiredStaged(sql: TxSql, now: Date, limit: number) {
  return sql<{ id: string; tenant_id: string; blob_key: string }[]>`
    select id, tenant_id, blob_key from staged_objects where expires_at <= ${now} order by expires_at limit ${limit}`
}
