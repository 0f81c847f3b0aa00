// The object collector: project file objects that nothing points at are deleted. File objects are
// content addressed and shared (tenants/<t>/projects/<p>/files/<sha256>), so none is deleted with
// the change that stops using it; most are let go of at once (an upload whose change was refused,
// a run that ended without its changes: files-service release()), and this sweep on the job runner
// finds the rest: uploads whose process died before their change (their registration expired),
// versions pruned by the plan, deleted projects, a release that could not reach the store.
//
// An object is deleted only when no current file, no version's manifest and no unexpired upload
// points at it, decided under the object's lock (files-store lockObject) that an upload of the same
// bytes takes to register: so an upload in flight is never lost to the sweep. Objects younger than
// COLLECT_GRACE_MS are left alone too (an upload by a release from before registrations existed, or
// a restore, which writes its objects before its rows).
import type { Logger } from 'pino'
import postgres from 'postgres'
import { unavailableDependency, type Db } from '../../platform/db.js'
import type { Storage } from '../../platform/storage.js'
import type { Blobs } from '../../platform/blobs.js'
import * as files from './files-store.js'
import type { ProjectFilesService } from './files-service.js'

/** Objects younger than this are not collected. */
export const COLLECT_GRACE_MS = 60 * 60_000
/** Keys decided together (one reference query per batch). */
const BATCH = 500
/**
 * What one sweep gives one tenant's stores at most: a store that lists without end (a tenant's own,
 * answering that its listing is never done) cannot hold the sweep from the other tenants. What is
 * left is the next sweep's.
 */
export const COLLECT_TENANT_MAX_OBJECTS = 1_000_000
export const COLLECT_TENANT_MAX_MS = 5 * 60_000
const FILE_KEY_RE = /^tenants\/[0-9a-f-]{36}\/projects\/[0-9a-f-]{36}\/files\/[0-9a-f]{64}$/

export interface Collection {
  /** Objects deleted. */
  deleted: number
  /** Expired upload registrations finished (their objects deleted when nothing else pointed at them). */
  expired: number
  /** Tenants whose store could not be read or written: their objects wait for the next sweep. */
  tenantsDeferred: number
}

const isDatabaseFault = (err: unknown) =>
  err instanceof postgres.PostgresError || unavailableDependency(err) === 'database'

export async function collectFileObjects(
  deps: { db: Db; storage: Storage; files: ProjectFilesService; log: Pick<Logger, 'info' | 'warn'> },
  opts: { now?: Date; graceMs?: number; tenantMaxObjects?: number; tenantMaxMs?: number } = {},
): Promise<Collection> {
  const now = opts.now ?? new Date()
  const before = now.getTime() - (opts.graceMs ?? COLLECT_GRACE_MS)
  const result: Collection = { deleted: 0, expired: 0, tenantsDeferred: 0 }
  const stores = new Map<string, Promise<Blobs>>()
  const storeOf = (tenantId: string) => {
    if (!stores.has(tenantId)) stores.set(tenantId, deps.storage.forTenant(tenantId))
    return stores.get(tenantId)!
  }
  const deferred = new Set<string>()
  const defer = (tenantId: string, err: unknown) => {
    if (deferred.has(tenantId)) return
    deferred.add(tenantId)
    result.tenantsDeferred++
    deps.log.warn(
      { err: { code: (err as { code?: unknown }).code, message: (err as Error).message }, tenantId },
      'tenant storage unavailable; its objects wait for the next collection',
    )
  }

  // Uploads whose change never came: the registration goes, and the object unless something else holds it.
  for (;;) {
    const batch = await deps.db.system((sql) => files.expiredStaged(sql, now, BATCH))
    if (!batch.length) break
    for (const s of batch) {
      try {
        if (
          !deferred.has(s.tenant_id) &&
          (await deps.files.removeUnreferenced(s.tenant_id, await storeOf(s.tenant_id), s.blob_key, [s.id]))
        )
          result.deleted++
      } catch (err) {
        if (isDatabaseFault(err)) throw err // the job tries again
        defer(s.tenant_id, err)
      }
      // A tenant whose store is away keeps its registration row: dropped here so the loop ends (the object stays
      // unreferenced, for a later sweep).
      if (deferred.has(s.tenant_id))
        await deps.db.tenant(s.tenant_id, (sql) => files.deleteStaged(sql, s.tenant_id, [s.id]))
      result.expired++
    }
  }

  // Every tenant's file objects, listed from every store it may have used.
  const tenants = await deps.db.system((sql) => sql<{ id: string }[]>`select id from tenants order by id`)
  for (const { id: tenantId } of tenants) {
    if (deferred.has(tenantId)) continue
    try {
      const blobs = await storeOf(tenantId)
      let keys: string[] = []
      const decide = async () => {
        const used = await deps.files.referenced(tenantId, keys)
        for (const key of keys)
          if (!used.has(key) && (await deps.files.removeUnreferenced(tenantId, blobs, key))) result.deleted++
        keys = []
      }
      const maxObjects = opts.tenantMaxObjects ?? COLLECT_TENANT_MAX_OBJECTS
      const until = Date.now() + (opts.tenantMaxMs ?? COLLECT_TENANT_MAX_MS)
      let listed = 0
      for await (const o of blobs.list(`tenants/${tenantId}/projects/`)) {
        if (++listed > maxObjects || Date.now() > until) {
          deps.log.warn(
            { tenantId, listed: listed - 1 },
            "a tenant's objects took more than a sweep gives one tenant; the rest wait for the next",
          )
          break
        }
        if (!FILE_KEY_RE.test(o.key) || o.lastModified.getTime() > before || keys.includes(o.key)) continue
        keys.push(o.key)
        if (keys.length >= BATCH) await decide()
      }
      if (keys.length) await decide()
    } catch (err) {
      if (isDatabaseFault(err)) throw err // the job tries again
      defer(tenantId, err)
    }
  }
  if (result.deleted || result.expired || result.tenantsDeferred)
    deps.log.info({ ...result }, 'unreferenced file objects collected')
  return result
}
