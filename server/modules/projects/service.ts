// Project rules: every change keeps a version, pruned to the plan's limit; a restore is itself a
// change (the history only grows); a backup is a zip in the tenant's blob store behind a
// time-limited link, kept as long as the plan says and then swept away.
import { Readable } from 'node:stream'
import postgres from 'postgres'
import type { Logger } from 'pino'
import type { Clock } from '../../clock.js'
import type { Storage } from '../../platform/storage.js'
import { AppError, notFound } from '../../domain/errors.js'
import { decodeNumberCursor, toPage } from '../../domain/pagination.js'
import type { Actor } from '../../domain/actor.js'
import { planOf } from '../../domain/principal.js'
import { newId } from '../../../common/ids.js'
import { exactly, type Blobs } from '../../platform/blobs.js'
import { tenantReads, type Db, type TxSql } from '../../platform/db.js'
import { json, jsonArrayStream, zipStream } from '../../../common/zip.js'
import { auditBy } from '../audit/service.js'
import { emitEvent, eventData } from '../outbox/service.js'
import { PLAN_TERMS, type Plan } from '../../domain/plans.js'
import * as files from './files-store.js'
import * as store from './store.js'
import type { ProjectFields, ProjectRow, VersionRow } from './store.js'

export type { ProjectFields, ProjectRow } from './store.js'
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION, type BackupFile, type BackupManifest } from './backup-format.js'

/** Same validity as export links in the specification. */
export const BACKUP_LINK_SECONDS = 7 * 24 * 3600

export interface PageRequest {
  limit: number
  cursor?: string
}
export type CreateInput = { name: string; description?: string; language?: string }
export type PatchInput = Partial<ProjectFields>

/**
 * Records the project's current state, its files' manifest included, as a version, and drops versions beyond the plan's
 * limit (their manifests with them).
 */
export const recordVersion = (
  sql: TxSql,
  a: Actor,
  project: ProjectRow,
  change: VersionRow['change'],
  restoredFrom: number | null = null,
): Promise<void> => recordTenantVersion(sql, a.tenantId, planOf(a.principal), project, change, restoredFrom)

/** recordVersion for a tenant on a plan (a job's work, which has no caller's principal). */
export async function recordTenantVersion(
  sql: TxSql,
  tenantId: string,
  plan: Plan,
  project: ProjectRow,
  change: VersionRow['change'],
  restoredFrom: number | null,
): Promise<void> {
  await store.insertVersion(sql, { id: newId(), tenantId, project, change, restoredFrom })
  await files.snapshotManifest(sql, tenantId, project.id, project.version)
  const keep = PLAN_TERMS[plan].limits.projectVersions
  if (keep !== null) await store.pruneVersions(sql, tenantId, project.id, project.version, keep)
}

/**
 * project.updated: the project as it now is, the earlier values of the fields that changed, and what kind of change it
 * was.
 */
export const emitUpdated = (
  sql: TxSql,
  tenantId: string,
  before: ProjectRow,
  project: ProjectRow,
  change: {
    change: 'updated' | 'restored' | 'files'
    restoredFrom: number | null
    files?: { path: string; change: 'created' | 'replaced' | 'deleted' }[]
  },
) =>
  emitEvent(sql, {
    tenantId,
    type: 'project.updated',
    data: {
      ...eventData(project),
      previous: Object.fromEntries(
        store.PROJECT_FIELDS.filter((f) => before[f] !== project[f]).map((f) => [f, before[f]]),
      ),
      ...change,
    },
  })

// ---- a restore of a project backup (server/modules/restores/project-backup.ts) ------------------
// It writes the project's records in the restore's transaction; these record the change as the API
// would (a version of change 'restored', the event), on the tenant's plan.

/** The project, locked until the transaction ends; undefined when the tenant has none of that id. */
export const lockedProject = async (sql: TxSql, tenantId: string, id: string): Promise<ProjectRow | undefined> =>
  (await store.selectProject(sql, tenantId, id, { lock: true }))[0]

/**
 * A restore into a project that exists (`before`, locked): its fields set, and with the files the
 * restore wrote (as of version `before.version + 1`) recorded as a new version; project.updated.
 */
export async function restoredInto(
  sql: TxSql,
  tenantId: string,
  plan: Plan,
  before: ProjectRow,
  fields: ProjectFields,
  restoredFrom: number | null,
): Promise<ProjectRow> {
  const project = await store.updateProject(sql, tenantId, before.id, fields)
  await recordTenantVersion(sql, tenantId, plan, project, 'restored', restoredFrom)
  await emitUpdated(sql, tenantId, before, project, { change: 'restored', restoredFrom })
  return project
}

/** A project a restore made (its record, versions and files written): its state recorded as its newest version; project.created. */
export async function restoredAsNew(
  sql: TxSql,
  tenantId: string,
  plan: Plan,
  id: string,
  restoredFrom: number | null,
): Promise<ProjectRow> {
  const [project] = await store.selectProject(sql, tenantId, id)
  await recordTenantVersion(sql, tenantId, plan, project!, 'restored', restoredFrom)
  await emitEvent(sql, { tenantId, type: 'project.created', data: eventData(project!) })
  return project!
}

/** Bytes the project's current files hold (what the plan's projectFileBytes bounds). */
export const projectFileBytes = (sql: TxSql, tenantId: string, id: string): Promise<number> =>
  files.usedBytes(sql, tenantId, id)

export function projectsService(deps: {
  db: Db
  storage: Storage
  version: string
  now?: Clock
  /** The agents that have run on a project (the agents module's answer), for a backup's agents.json. */
  projectAgents?: (sql: TxSql, tenantId: string, projectId: string) => Promise<unknown[]>
}) {
  const { db, storage } = deps
  const clock = deps.now ?? Date.now

  const found = (id: string, rows: readonly ProjectRow[]) => {
    if (!rows[0]) throw notFound('project', id)
    return rows[0]
  }
  const load = async (sql: TxSql, tenantId: string, id: string, lock = false) =>
    found(id, await store.selectProject(sql, tenantId, id, { lock }))

  return {
    ...tenantReads(db, 'project', store.projects),

    create: (a: Actor, input: CreateInput) =>
      db.tenant(a.tenantId, async (sql) => {
        const project = await store.insertProject(sql, a.tenantId, newId(), {
          name: input.name.trim(),
          description: input.description ?? '',
          language: input.language ?? '',
        })
        await recordVersion(sql, a, project, 'created')
        await emitEvent(sql, { tenantId: a.tenantId, type: 'project.created', data: eventData(project) })
        return project
      }),

    update: (a: Actor, id: string, patch: PatchInput) =>
      db.tenant(a.tenantId, async (sql) => {
        const current = await load(sql, a.tenantId, id, true)
        const next = { ...pick(current), ...patch, ...(patch.name !== undefined ? { name: patch.name.trim() } : {}) }
        if (store.PROJECT_FIELDS.every((f) => next[f] === current[f])) return current // nothing changed: no new version
        const project = await store.updateProject(sql, a.tenantId, id, next)
        await recordVersion(sql, a, project, 'updated')
        await emitUpdated(sql, a.tenantId, current, project, { change: 'updated', restoredFrom: null })
        return project
      }),

    remove: (tenantId: string, id: string) =>
      db.tenant(tenantId, async (sql) => {
        const [deleted] = await store.deleteProject(sql, tenantId, id)
        if (!deleted) throw notFound('project', id)
        await emitEvent(sql, { tenantId, type: 'project.deleted', data: eventData(deleted) })
      }),

    async versions(tenantId: string, projectId: string, page: PageRequest) {
      const below = decodeNumberCursor(page.cursor)
      const rows = await db.tenant(tenantId, async (sql) => {
        await load(sql, tenantId, projectId)
        return store.listVersions(sql, tenantId, projectId, page.limit + 1, below)
      })
      return toPage(rows, page.limit, (v) => v.version)
    },

    restoreVersion: (a: Actor, projectId: string, versionId: string) =>
      db.tenant(a.tenantId, async (sql) => {
        const current = await load(sql, a.tenantId, projectId, true)
        const v = await store.getVersion(sql, a.tenantId, projectId, versionId)
        if (!v) throw notFound('version', versionId)
        // The version's files come back too; a plan lowered since may no longer hold them.
        const limit = PLAN_TERMS[planOf(a.principal)].limits.projectFileBytes
        const [restoring, used] = [
          await files.manifestBytes(sql, a.tenantId, projectId, v.version),
          await files.usedBytes(sql, a.tenantId, projectId),
        ]
        if (restoring > limit && restoring > used)
          throw new AppError(
            'QUOTA_EXCEEDED',
            `The version's files exceed the ${limit} bytes this plan allows a project`,
            { limit, used, requested: restoring },
          )
        const project = await store.updateProject(sql, a.tenantId, projectId, pick(v))
        await files.restoreManifest(sql, a.tenantId, projectId, v.version, project.version, new Date(clock()))
        await recordVersion(sql, a, project, 'restored', v.version)
        await emitUpdated(sql, a.tenantId, current, project, { change: 'restored', restoredFrom: v.version })
        return project
      }),

    /**
     * The zip streams from the database (versions by cursor) into blob storage, measured on the
     * way, inside one transaction: the backup row is written only once the object is complete.
     */
    backup: async (a: Actor, projectId: string, opts: { includeHistory: boolean; includeAgents: boolean }) => {
      // Chosen before the transaction opens: a customer's store may need reading its settings first.
      const blobs = await storage.forTenant(a.tenantId)
      return db.tenant(a.tenantId, async (sql) => {
        const project = await load(sql, a.tenantId, projectId)
        // The list is read whole (descriptions only); each file's bytes stream from the store when
        // the zip reaches its entry, one file at a time.
        const current: files.FileRow[] = []
        for await (const batch of files.fileBatches(sql, a.tenantId, projectId)) current.push(...batch)
        const backupId = newId()
        const createdAt = new Date(clock())
        const manifest: BackupManifest = {
          format: BACKUP_FORMAT,
          formatVersion: BACKUP_FORMAT_VERSION,
          atriumVersion: deps.version,
          backupId,
          createdAt: createdAt.toISOString(),
          tenantId: a.tenantId,
          projectId,
          includes: { history: opts.includeHistory, agents: opts.includeAgents, files: true },
        }
        const listed: BackupFile[] = current.map((f) => ({
          path: f.path,
          size: f.size,
          sha256: f.sha256,
          contentType: f.content_type,
        }))
        // Only the two small records are deflated: file bytes, and lists that grow with the project
        // (a long history of one repeated description deflates a thousand times), are stored as they
        // are, so that the backup keeps to the compression-ratio rule a restore holds archives to.
        const zip = zipStream(
          [
            { name: 'manifest.json', data: json(manifest) },
            { name: 'project.json', data: json(project) },
            { name: 'files.json', data: json(listed), compress: false },
            ...current.map((f) => ({
              name: `files/${f.path}`,
              data: lazyBlob(blobs, f.blob_key, f.size),
              compress: false,
            })),
            ...(opts.includeHistory
              ? [
                  {
                    name: 'versions.json',
                    data: jsonArrayStream(store.versionBatches(sql, a.tenantId, projectId)),
                    compress: false,
                  },
                ]
              : []),
            ...(opts.includeAgents
              ? [
                  {
                    name: 'agents.json',
                    data: json(deps.projectAgents ? await deps.projectAgents(sql, a.tenantId, projectId) : []),
                    compress: false,
                  },
                ]
              : []),
          ],
          createdAt,
        )
        const blobKey = `tenants/${a.tenantId}/backups/projects/${projectId}/${backupId}.zip`
        try {
          await blobs.put(blobKey, zip.stream, 'application/zip')
        } catch (err) {
          zip.destroy() // an upload that stopped reading must not leave the versions cursor open
          if (err instanceof postgres.PostgresError) throw err // reading the versions failed: ours, not storage's
          throw new AppError('SERVICE_UNAVAILABLE', 'Object storage is unavailable; try the backup again later', {
            dependency: 'storage',
            reason: (err as Error).name,
          })
        }
        const { size, sha256 } = await zip.measured
        const checksum = `sha256:${sha256}`
        await store.insertBackup(sql, {
          id: backupId,
          tenantId: a.tenantId,
          projectId,
          blobKey,
          size,
          checksum,
          includeHistory: opts.includeHistory,
          includeAgents: opts.includeAgents,
          createdAt,
        })
        // A backup takes the tenant's data out of the platform: the audit log records who did.
        await auditBy(sql, a, {
          action: 'project.backup_created',
          target: { type: 'project', id: projectId },
          details: { backupId, size, includeHistory: opts.includeHistory, includeAgents: opts.includeAgents },
        })
        const filename = `project-${projectId}-${createdAt.toISOString().replace(/[:.]/g, '-')}.zip`
        const downloadUrl = await blobs.presignGet(blobKey, { expiresSeconds: BACKUP_LINK_SECONDS, filename })
        return {
          backupId,
          downloadUrl,
          expiresAt: new Date(createdAt.getTime() + BACKUP_LINK_SECONDS * 1000).toISOString(),
          size,
          checksum,
        }
      })
    },
  }
}

export type ProjectsService = ReturnType<typeof projectsService>

/**
 * What one sweep did: backups removed (object and row), deletes that failed (their rows kept), and
 * tenants whose store was taken as down (their remaining expired backups not tried).
 */
export interface BackupSweep {
  removed: number
  failed: number
  tenantsDeferred: number
}

/** Consecutive failed deletes after which a store is taken as down for the rest of a sweep. */
const STORE_DOWN_AFTER = 3

/**
 * Backup retention, for the job runner to call every hour (the scheduling is the runner's).
 *
 * - Removes the project backups older than their tenant's current plan keeps them
 *   (PLAN_TERMS[plan].limits.backupRetentionDays as of `now`), but never while their download link is
 *   valid (BACKUP_LINK_SECONDS): the free plan keeps none, so its backups go when the link does.
 * - The object first, through the tenant's store (storage.forTenant), then the row: a crash
 *   between the two leaves a row whose object is gone, and the next sweep finishes it (deleting
 *   an object that is not there succeeds). Never an object without its row to find it by.
 * - An object whose delete fails keeps its row for the next sweep. After STORE_DOWN_AFTER failures
 *   in a row a store is taken as down: the rest of its tenants' backups wait for the next sweep,
 *   untried, and the sweep goes on with other tenants (counted in `tenantsDeferred`).
 * - In batches of `batchSize`, oldest first; each read and each delete is its own short system
 *   transaction, none held open across calls to a store.
 * - Idempotent and safe beside another sweep: what two of them remove is removed once; a sweep
 *   with nothing expired changes nothing. It resolves once every expired backup was tried, and
 *   rejects only when the database fails (objects already deleted are finished by the next run).
 * - Not written to the tenants' audit logs: like the other retention sweeps (audit events, webhook
 *   events) it is a rule of the plan, not someone's act; it is logged.
 */
export async function sweepExpiredBackups(
  deps: { db: Db; storage: Storage; log: Pick<Logger, 'info' | 'warn'> },
  opts: { now?: Date; batchSize?: number } = {},
): Promise<BackupSweep> {
  const now = (opts.now ?? new Date()).getTime()
  const batchSize = opts.batchSize ?? 100
  const cutoffs = Object.fromEntries(
    Object.entries(PLAN_TERMS).map(([plan, { limits: l }]) => [
      plan,
      new Date(now - Math.max(l.backupRetentionDays * 86400, BACKUP_LINK_SECONDS) * 1000),
    ]),
  )
  const stores = new Map<string, Promise<Blobs>>()
  const streaks = new Map<Blobs, number>()
  const skip = { backupIds: [] as string[], tenantIds: [] as string[] }
  const result: BackupSweep = { removed: 0, failed: 0, tenantsDeferred: 0 }
  const defer = (tenantId: string) => {
    skip.tenantIds.push(tenantId)
    result.tenantsDeferred++
  }

  for (;;) {
    const batch = await deps.db.system((sql) => store.expiredBackups(sql, cutoffs, skip, batchSize))
    const gone: string[] = []
    for (const b of batch) {
      if (skip.tenantIds.includes(b.tenant_id)) continue // deferred earlier in this batch
      let blobs: Blobs
      try {
        if (!stores.has(b.tenant_id)) stores.set(b.tenant_id, deps.storage.forTenant(b.tenant_id))
        blobs = await stores.get(b.tenant_id)!
      } catch (err) {
        deps.log.warn(
          { err, tenantId: b.tenant_id },
          'tenant storage unavailable; its expired backups wait for the next sweep',
        )
        defer(b.tenant_id)
        continue
      }
      if ((streaks.get(blobs) ?? 0) >= STORE_DOWN_AFTER) {
        defer(b.tenant_id)
        continue
      }
      try {
        await blobs.remove(b.blob_key)
        streaks.set(blobs, 0)
        gone.push(b.id)
      } catch (err) {
        result.failed++
        skip.backupIds.push(b.id)
        const streak = (streaks.get(blobs) ?? 0) + 1
        streaks.set(blobs, streak)
        deps.log.warn(
          { err, tenantId: b.tenant_id, backupId: b.id },
          'could not delete an expired backup; it is kept for the next sweep',
        )
        if (streak >= STORE_DOWN_AFTER) defer(b.tenant_id)
      }
    }
    if (gone.length) result.removed += await deps.db.system((sql) => store.deleteBackups(sql, gone))
    if (batch.length < batchSize) break
  }
  if (result.removed || result.failed || result.tenantsDeferred)
    deps.log.info({ ...result }, 'expired project backups swept')
  return result
}

/**
 * An object's bytes, opened only when first read (a zip reads its entries in turn), and no more of them than its record
 * says.
 */
const lazyBlob = (blobs: Blobs, key: string, size: number): Readable =>
  Readable.from(
    (async function* () {
      yield* exactly(await blobs.get(key), size, key)
    })(),
  )

const pick = (p: ProjectFields): ProjectFields => ({ name: p.name, description: p.description, language: p.language })
