// Project SQL. Every query names its tenant even though row-level security would also confine it.
import { tenantRows, type TxSql } from '../../platform/db.js'

export interface ProjectRow {
  id: string
  name: string
  description: string
  language: string
  version: number
  created_at: Date
  updated_at: Date
}

export interface VersionRow {
  id: string
  version: number
  name: string
  description: string
  language: string
  change: 'created' | 'updated' | 'restored' | 'files'
  restored_from: number | null
  created_at: Date
}

export type ProjectFields = Pick<ProjectRow, 'name' | 'description' | 'language'>
export const PROJECT_FIELDS = ['name', 'description', 'language'] as const

const PROJECT = 'id, name, description, language, version, created_at, updated_at'

export const projects = tenantRows<ProjectRow>('projects', PROJECT)
export const selectProject = projects.byId

export const insertProject = (sql: TxSql, tenantId: string, id: string, f: ProjectFields): Promise<ProjectRow> =>
  projects.insert(sql, tenantId, { id, name: f.name, description: f.description, language: f.language })

/** Writes the fields and moves the project to its next version number. */
export async function updateProject(sql: TxSql, tenantId: string, id: string, f: ProjectFields): Promise<ProjectRow> {
  const [row] = await sql<ProjectRow[]>`
    update projects set name = ${f.name}, description = ${f.description}, language = ${f.language},
           version = version + 1, updated_at = now()
     where tenant_id = ${tenantId} and id = ${id}
    returning ${sql.unsafe(PROJECT)}`
  return row!
}

/** The deleted project, as it was; none when there was no such project. */
export function deleteProject(sql: TxSql, tenantId: string, id: string) {
  return sql<ProjectRow[]>`
    delete from projects where tenant_id = ${tenantId} and id = ${id}
    returning ${sql.unsafe(PROJECT)}`
}

export async function insertVersion(
  sql: TxSql,
  v: { id: string; tenantId: string; project: ProjectRow; change: VersionRow['change']; restoredFrom: number | null },
): Promise<void> {
  await sql`
    insert into project_versions (id, tenant_id, project_id, version, name, description, language, change, restored_from)
    values (${v.id}, ${v.tenantId}, ${v.project.id}, ${v.project.version}, ${v.project.name}, ${v.project.description},
            ${v.project.language}, ${v.change}, ${v.restoredFrom})`
}

/** Keeps the newest `keep` versions of a project (version numbers have no gaps, so a bound suffices). */
export async function pruneVersions(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  currentVersion: number,
  keep: number,
): Promise<number> {
  const rows = await sql`
    delete from project_versions
     where tenant_id = ${tenantId} and project_id = ${projectId} and version <= ${currentVersion - keep}
    returning id`
  return rows.length
}

/** Newest first by version number (not by id: replicas' clocks may disagree by a little). */
export async function listVersions(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  limit: number,
  below: number | null,
): Promise<VersionRow[]> {
  return sql<VersionRow[]>`
    select id, version, name, description, language, change, restored_from, created_at from project_versions
     where tenant_id = ${tenantId} and project_id = ${projectId} ${below !== null ? sql`and version < ${below}` : sql``}
     order by version desc limit ${limit}`
}

/** Every version of a project, oldest first, fetched in batches (for backups of any size). */
export function versionBatches(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  batch = 500,
): AsyncIterable<VersionRow[]> {
  return sql<VersionRow[]>`
    select id, version, name, description, language, change, restored_from, created_at from project_versions
     where tenant_id = ${tenantId} and project_id = ${projectId}
     order by version`.cursor(batch)
}

export async function getVersion(
  sql: TxSql,
  tenantId: string,
  projectId: string,
  versionId: string,
): Promise<VersionRow | undefined> {
  const [row] = await sql<VersionRow[]>`
    select id, version, name, description, language, change, restored_from, created_at from project_versions
     where tenant_id = ${tenantId} and project_id = ${projectId} and id = ${versionId}`
  return row
}

export async function insertBackup(
  sql: TxSql,
  b: {
    id: string
    tenantId: string
    projectId: string
    blobKey: string
    size: number
    checksum: string
    includeHistory: boolean
    includeAgents: boolean
    createdAt: Date
  },
): Promise<void> {
  await sql`
    insert into project_backups (id, tenant_id, project_id, blob_key, size, checksum, include_history, include_agents, created_at)
    values (${b.id}, ${b.tenantId}, ${b.projectId}, ${b.blobKey}, ${b.size}, ${b.checksum}, ${b.includeHistory}, ${b.includeAgents}, ${b.createdAt})`
}

export interface ExpiredBackup {
  id: string
  tenant_id: string
  blob_key: string
}

/**
 * Across tenants (system transaction): the oldest backups created before the cut-off of their
 * tenant's current plan (`cutoffs` by plan name), leaving out the backups and tenants `skip` names
 * (those the sweep has tried already). Every expired backup is older than the latest cut-off: that
 * bound lets the created_at index (migration 0007) pass over the young ones.
 */
export function expiredBackups(
  sql: TxSql,
  cutoffs: Readonly<Record<string, Date>>,
  skip: { backupIds: string[]; tenantIds: string[] },
  limit: number,
): Promise<ExpiredBackup[]> {
  const plans = Object.entries(cutoffs)
  const latest = new Date(Math.max(...plans.map(([, at]) => at.getTime())))
  return sql<ExpiredBackup[]>`
    select b.id, b.tenant_id, b.blob_key
      from project_backups b
      join tenants t on t.id = b.tenant_id
      join unnest(${sql.array(plans.map(([plan]) => plan))}::text[], ${sql.array(plans.map(([, at]) => at.toISOString()))}::timestamptz[]) as r (plan, cutoff)
        on r.plan = t.plan
     where b.created_at < ${latest} and b.created_at < r.cutoff
       and b.id <> all(${sql.array(skip.backupIds)}::uuid[])
       and b.tenant_id <> all(${sql.array(skip.tenantIds)}::uuid[])
     order by b.created_at, b.id
     limit ${limit}`
}

/** Deletes backup rows by id (across tenants); how many there were. */
export async function deleteBackups(sql: TxSql, ids: string[]): Promise<number> {
  const rows = await sql`delete from project_backups where id = any(${sql.array(ids)}::uuid[]) returning id`
  return rows.length
}
