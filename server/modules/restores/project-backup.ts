// A project backup (the zip of POST /projects/{projectId}/backup: projects/backup-format.ts) restored
// by the restore job, beside the tenant export: the same reading of the archive, the same copy of the
// files' bytes, the same transaction, report and cleanup (service.ts run); what differs is here. The
// first pass (surveyBackup) checks the manifest, the project, the files against their bytes and the
// plan's bounds, the versions and the agents, and writes nothing; backupPass settles which project
// the backup goes into, and writeBackup writes it.
//
// Which project: options.projectId (a project of the tenant), options.asNewProject (a new one, its
// id chosen when the restore was asked for), or by default the project the backup was made of while
// the tenant has it, else the project an earlier restore of it made, else a new one (under an id
// derived for the tenant, so a second restore meets the first one's project).
//
// Into a project that exists, its history stays and grows: merge=false puts the backup's fields and
// files in place of the project's, merge=true keeps its fields and adds the files at paths it lacks
// (the others are conflicts); either is recorded as a new version (change "restored"), and the
// backup's versions are skipped. Into a new project the backup's versions come back (as many of the
// newest as the plan keeps) and the restore is its newest version. Agents are the tenant's, shared by
// its projects: one the tenant has is replaced by the backup's (merge=false) or left as it is
// (merge=true, a conflict); any other comes back under an id derived for the tenant.
import { AppError, notFound } from '../../domain/errors.js'
import { escapedText } from '../../domain/text.js'
import { PLAN_TERMS, type Plan } from '../../domain/plans.js'
import type { Db, TxSql } from '../../platform/db.js'
import { derivedId, type Kind } from '../exports/format.js'
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION, type BackupManifest } from '../projects/backup-format.js'
import { fileBlobKey } from '../projects/files-service.js'
import {
  lockedProject,
  projectFileBytes,
  restoredAsNew,
  restoredInto,
  type ProjectFields,
  type ProjectRow,
} from '../projects/service.js'
import type { Archive, ArchiveEntry } from './archive.js'
import { checkMeta, checkRow, currentFiles, invalidData, type CurrentFile, type Row } from './records.js'
import type { Pass, Tally } from './report.js'
import type { RestoreOptions } from './service.js'
import * as store from './store.js'

export interface BackupSurvey {
  meta: BackupManifest
  /** The project's record, as the backup has it (its id is the one the backup was made of). */
  project: Row
  /** The current files, each checked against its bytes (null: a version 1 backup, which holds none). */
  files: { rows: Row[]; bytes: Map<string, CurrentFile> } | null
  /** versions.json (read again when written), when the backup includes the history. */
  versions: ArchiveEntry | null
  agents: Row[]
  counts: Partial<Record<Kind, number>>
  totals: { count: number; bytes: number }
}

// A backup's lists hold records as the API shows them: each field, by the column it is.
const FILE_FIELDS = { path: 'path', size: 'size', sha256: 'sha256', contentType: 'content_type' }
const VERSION_FIELDS = {
  id: 'id',
  version: 'version',
  name: 'name',
  description: 'description',
  language: 'language',
  change: 'change',
  restored_from: 'restored_from',
  created_at: 'created_at',
}
const AGENT_FIELDS = {
  id: 'id',
  name: 'name',
  systemPrompt: 'system_prompt',
  config: 'config',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
}
const INCLUDES = ['history', 'agents', 'files'] as const

/** A record of a backup's list as its kind's record (`add`: the columns the list leaves out), checked. */
function fromFields(kind: Kind, value: unknown, fields: Record<string, string>, add: Row, entry: string): Row {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw invalidData(entry, `a ${kind} record is not an object`, { kind })
  const row: Row = { ...add }
  for (const [name, v] of Object.entries(value)) {
    const column = fields[name]
    if (!column)
      throw invalidData(entry, `a ${kind} record has a field "${escapedText(name)}" the format does not`, {
        kind,
        field: escapedText(name),
      })
    row[column] = v
  }
  return checkRow(kind, row, entry)
}

/** A JSON list entry of the backup, each item read by `item`. */
async function listOf(archive: Archive, entry: ArchiveEntry, item: (v: unknown) => Row): Promise<Row[]> {
  const value = await archive.json(entry)
  if (!Array.isArray(value)) throw invalidData(entry.name, 'must be a JSON array')
  return value.map(item)
}

/** Refuses a second record of one value of `column` in a list. */
function once(rows: Row[], column: string, entry: string, kind: Kind) {
  const seen = new Set<unknown>()
  for (const r of rows) {
    if (seen.has(r[column]))
      throw invalidData(entry, `holds two ${kind} records with the ${column} ${String(r[column])}`, {
        kind,
        field: column,
      })
    seen.add(r[column])
  }
}

/** versions.json: the project's versions, each of a number up to the project's own, oldest first. */
async function backupVersions(archive: Archive, entry: ArchiveEntry, project: Row): Promise<Row[]> {
  const rows = await listOf(archive, entry, (v) =>
    fromFields('project_versions', v, VERSION_FIELDS, { project_id: project.id }, entry.name),
  )
  once(rows, 'id', entry.name, 'project_versions')
  once(rows, 'version', entry.name, 'project_versions')
  const odd = rows.find((v) => (v.version as number) < 1 || (v.version as number) > (project.version as number))
  if (odd)
    throw invalidData(entry.name, `version ${odd.version as number} is not one from 1 to the project's own`, {
      kind: 'project_versions',
      field: 'version',
    })
  return rows.sort((a, b) => (a.version as number) - (b.version as number))
}

/** The first pass over a project backup: everything it holds, checked; refused with the first problem. */
export async function surveyBackup(archive: Archive, o: { plan: Plan }): Promise<BackupSurvey> {
  const named = (name: string) => archive.entries.filter((e) => e.def.name === name)
  const one = (name: string) => named(name)[0] ?? null
  const meta = checkMeta(await archive.json(one('manifest')!), {
    entry: 'manifest.json',
    format: BACKUP_FORMAT,
    supported: BACKUP_FORMAT_VERSION,
    ids: ['backupId', 'tenantId', 'projectId'],
  }) as unknown as BackupManifest
  const includes = meta.includes as unknown as Record<string, unknown> | null
  if (!includes || typeof includes !== 'object' || Array.isArray(includes))
    throw invalidData('manifest.json', 'includes must be an object')
  for (const k of Object.keys(includes))
    if (!(INCLUDES as readonly string[]).includes(k))
      throw invalidData('manifest.json', `includes.${escapedText(k)} is not part of the format`)
  // Version 1 had no files; from version 2 the manifest says whether there are.
  const wanted = meta.formatVersion >= 2 ? INCLUDES : (['history', 'agents'] as const)
  for (const k of wanted)
    if (typeof includes[k] !== 'boolean') throw invalidData('manifest.json', `includes.${k} must be true or false`)
  const has = { history: includes.history === true, agents: includes.agents === true, files: includes.files === true }

  // Every entry is one the manifest says the backup holds, and each one it says is there.
  const parts: [string, string, boolean][] = [
    ['project', 'project.json', true],
    ['files', 'files.json', has.files],
    ['versions', 'versions.json', has.history],
    ['agents', 'agents.json', has.agents],
  ]
  for (const [name, entry, wantedHere] of parts) {
    if (wantedHere && !one(name)) throw invalidData(entry, 'is missing: manifest.json says the backup holds it')
    if (!wantedHere && one(name))
      throw invalidData(entry, 'is there, yet manifest.json says the backup does not hold it')
  }
  const fileEntries = named('files/<path>')
  if (!has.files && fileEntries.length)
    throw invalidData(fileEntries[0]!.name, 'is a file, yet manifest.json says the backup holds none')

  const project = checkRow('projects', await archive.json(one('project')!), 'project.json')
  if (project.id !== meta.projectId) throw invalidData('project.json', 'is not the project manifest.json names')
  if ((project.version as number) < 1)
    throw invalidData('project.json', 'projects.version must be a whole number from 1', { field: 'version' })
  const counts: Partial<Record<Kind, number>> = { projects: 1, project_versions: 0, project_files: 0, agents: 0 }
  const totals = { count: 0, bytes: 0 }

  let files: BackupSurvey['files'] = null
  if (has.files) {
    const current = currentFiles({
      plan: o.plan,
      project: project.id as string,
      bytes: new Map(fileEntries.map((e) => [e.match[1]!, e])),
      bytesEntry: (path) => `files/${path}`,
    })
    // A file's version and time are those of the project's record: the version it is restored under replaces them.
    const add = { project_id: project.id, version: project.version, updated_at: project.updated_at }
    const rows = await listOf(archive, one('files')!, (f) => {
      const row = fromFields('project_files', f, FILE_FIELDS, add, 'files.json')
      totals.bytes += current.add(row, 'files.json').size
      return row
    })
    current.done()
    counts.project_files = totals.count = rows.length
    files = { rows, bytes: current.files }
  }
  const versions = one('versions')
  if (versions) counts.project_versions = (await backupVersions(archive, versions, project)).length
  const agents = has.agents
    ? await listOf(archive, one('agents')!, (a) => fromFields('agents', a, AGENT_FIELDS, {}, 'agents.json'))
    : []
  once(agents, 'id', 'agents.json', 'agents')
  counts.agents = agents.length
  return { meta, project, files, versions, agents, counts, totals }
}

/** Where a backup is restored: a project of the tenant's, or a new one. */
interface Target {
  id: string
  exists: boolean
  /** Why this project: options.projectId, options.asNewProject, the backup's own, an earlier restore's, or a new one. */
  into: 'projectId' | 'asNewProject' | 'source' | 'earlierRestore' | 'new'
  /** Whether the project is the one the backup was made of (its version numbers are the backup's). */
  sameProject: boolean
}

export interface BackupContext {
  db: Db
  /** The key ids are derived with (format.ts restoreIdKey). */
  idKey: Buffer
  now: () => number
  to: string
  plan: Plan
  options: RestoreOptions
}

/**
 * A project backup's restore: checked (first pass), its project settled (before any byte is
 * copied: the store's keys name it), and what the job copies and writes.
 */
export async function backupPass(archive: Archive, c: BackupContext): Promise<Pass> {
  const s = await surveyBackup(archive, { plan: c.plan })
  const source = s.meta.projectId
  const derived = derivedId(c.idKey, c.to, source)
  const target = await c.db.tenant(c.to, async (sql): Promise<Target> => {
    const o = c.options
    if (o.asNewProject) return { id: o.projectId!, exists: false, into: 'asNewProject', sameProject: false }
    if (o.projectId) {
      if (!(await store.existingIds(sql, 'projects', c.to, [o.projectId])).size) throw notFound('project', o.projectId)
      return {
        id: o.projectId,
        exists: true,
        into: 'projectId',
        sameProject: o.projectId === source || o.projectId === derived,
      }
    }
    const have = await store.existingIds(sql, 'projects', c.to, [source, derived])
    if (have.has(source)) return { id: source, exists: true, into: 'source', sameProject: true }
    return {
      id: derived,
      exists: have.has(derived),
      into: have.has(derived) ? 'earlierRestore' : 'new',
      sameProject: true,
    }
  })
  return {
    counts: s.counts,
    files: s.totals,
    copies: [...(s.files?.bytes.values() ?? [])].map((f) => ({
      entry: f.entry,
      sha256: f.sha256,
      projectId: target.id,
    })),
    describe: {
      archive: {
        format: BACKUP_FORMAT,
        formatVersion: s.meta.formatVersion,
        atriumVersion: s.meta.atriumVersion,
        backupId: s.meta.backupId,
        tenantId: s.meta.tenantId,
        projectId: source,
        createdAt: s.meta.createdAt,
        includes: s.meta.includes,
      },
      project: { id: target.id, into: target.into, created: !target.exists },
    },
    audit: { format: BACKUP_FORMAT, fromTenant: s.meta.tenantId, backupId: s.meta.backupId, projectId: target.id },
    apply: (sql, t) => writeBackup(sql, archive, s, target, c, t),
  }
}

const fieldsOf = (r: Row | ProjectRow): ProjectFields => ({
  name: r.name as string,
  description: r.description as string,
  language: r.language as string,
})

/** The second pass: the records, in the restore's transaction; what the report adds. */
async function writeBackup(
  sql: TxSql,
  archive: Archive,
  s: BackupSurvey,
  target: Target,
  c: BackupContext,
  t: Tally,
): Promise<Record<string, unknown>> {
  const { to } = c
  const pid = target.id
  const now = new Date(c.now()).toISOString()
  const files = (version: number): Row[] =>
    (s.files?.rows ?? []).map((r) => ({ ...r, project_id: pid, version, updated_at: now }))
  const blobKey = (r: Row) => ({ blob_key: fileBlobKey(to, pid, r.sha256 as string) })
  // The backup's version the restore returns to, in a project that exists and whose numbers are the backup's.
  const restoredFrom = target.sameProject ? (s.project.version as number) : null
  let project: ProjectRow
  let removed: number | null = null

  if (target.exists) {
    const before = await lockedProject(sql, to, pid)
    // Settled before the bytes were copied: a project deleted since is settled again on the job's next attempt.
    if (!before) throw new Error('The project restored into was deleted while the restore copied its files')
    if (s.versions)
      for (const v of await backupVersions(archive, s.versions, s.project))
        t.skip('project_versions', v.id as string, 'the project restored into keeps its own history')
    // The files are written as of the version the restore makes (the project is locked: the next one).
    const rows = files(before.version + 1)
    if (!c.options.merge) {
      if (s.files) {
        removed = await store.deleteFilesExcept(
          sql,
          to,
          pid,
          rows.map((r) => r.path as string),
        )
        await store.insertRecords(sql, 'project_files', to, rows, { replace: true, extra: blobKey })
        t.counts.project_files.restored += rows.length
      }
      project = await restoredInto(sql, to, c.plan, before, fieldsOf(s.project), restoredFrom)
      t.counts.projects.restored++
    } else {
      t.conflict('projects', pid)
      const added = new Set(
        (await store.insertRecords(sql, 'project_files', to, rows, { skipExisting: true, extra: blobKey })).map(
          (r) => r.path as string,
        ),
      )
      t.counts.project_files.restored += added.size
      for (const r of rows) if (!added.has(r.path as string)) t.conflict('project_files', r.path as string)
      // Its fields kept; a version only when files were added.
      project = added.size ? await restoredInto(sql, to, c.plan, before, fieldsOf(before), null) : before
    }
  } else {
    // A new project: the backup's history (the newest the plan keeps, the restore's own version among
    // them), then the restore as its newest version.
    const history = s.versions ? await backupVersions(archive, s.versions, s.project) : []
    const version = s.versions ? (s.project.version as number) + 1 : 1
    const keep = PLAN_TERMS[c.plan].limits.projectVersions
    const kept = history.filter((v) => keep === null || (v.version as number) > version - keep)
    for (const v of history.slice(0, history.length - kept.length))
      t.skip(
        'project_versions',
        v.id as string,
        `older than the ${keep} versions the ${PLAN_TERMS[c.plan].title} plan keeps`,
      )
    const created = target.into === 'asNewProject' ? now : s.project.created_at
    await store.insertRecords(
      sql,
      'projects',
      to,
      [{ ...s.project, id: pid, version, created_at: created, updated_at: now }],
      {},
    )
    t.counts.projects.restored++
    // Ids derived for the new project: restored twice as new projects, a backup's versions are two sets.
    const versions = kept.map((v) => ({ ...v, id: derivedId(c.idKey, pid, v.id as string), project_id: pid }))
    t.counts.project_versions.restored += (await store.insertRecords(sql, 'project_versions', to, versions, {})).length
    if (s.files) {
      await store.insertRecords(sql, 'project_files', to, files(version), { extra: blobKey })
      t.counts.project_files.restored += s.files.rows.length
    }
    // Its numbers are the backup's when it has the backup's history.
    project = await restoredAsNew(sql, to, c.plan, pid, s.versions ? (s.project.version as number) : null)
  }

  await writeAgents(sql, s, c, t)

  // The plan's bound on a project's files holds after the restore (merge adds to what the project has).
  const limit = PLAN_TERMS[c.plan].limits.projectFileBytes
  const used = await projectFileBytes(sql, to, pid)
  if (used > limit)
    throw new AppError(
      'QUOTA_EXCEEDED',
      `The project would hold ${used} bytes of files; the ${PLAN_TERMS[c.plan].title} plan allows ${limit}`,
      { limit, requested: used, project: pid },
    )
  return { projectVersion: project.version, ...(removed === null ? {} : { replaced: { project_files: removed } }) }
}

/** The backup's agents: the tenant's own keep their ids (replaced, or conflicts with merge); the others' are derived. */
async function writeAgents(sql: TxSql, s: BackupSurvey, c: BackupContext, t: Tally) {
  if (!s.agents.length) return
  const own = await store.existingIds(
    sql,
    'agents',
    c.to,
    s.agents.map((a) => a.id as string),
  )
  const rows = s.agents.map((a) =>
    own.has(a.id as string) ? a : { ...a, id: derivedId(c.idKey, c.to, a.id as string) },
  )
  const written = new Set(
    (
      await store.insertRecords(sql, 'agents', c.to, rows, c.options.merge ? { skipExisting: true } : { replace: true })
    ).map((r) => r.id as string),
  )
  t.counts.agents.restored += written.size
  for (const r of rows) if (!written.has(r.id as string)) t.conflict('agents', r.id as string)
}
