// Project files: the workspace agents act on. The bytes go to the tenant's blob store first,
// content addressed per tenant and project (so versions share unchanged bytes, and an object left
// by a transaction that then failed is harmless); the database then records, in one transaction,
// the current files and a new project version whose manifest lists them all. stage() + apply() is
// the one way files change: the HTTP routes use it, and so do agents, several changes at a time.
import { createHash } from 'node:crypto'
import type { Readable } from 'node:stream'
import type { Logger } from 'pino'
import { newId } from '../../../common/ids.js'
import type { Clock } from '../../clock.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, invalid, notFound } from '../../domain/errors.js'
import { decodeTextCursor, encodeCursor } from '../../domain/pagination.js'
import { PLAN_TERMS } from '../../domain/plans.js'
import { planOf } from '../../domain/principal.js'
import { exactly, type Blobs } from '../../platform/blobs.js'
import type { Db, TxSql } from '../../platform/db.js'
import type { Storage } from '../../platform/storage.js'
import * as files from './files-store.js'
import type { FileRow } from './files-store.js'
import { emitUpdated, recordVersion } from './service.js'
import * as store from './store.js'

export interface FileMeta {
  path: string
  size: number
  /** The SHA-256 of the bytes, in hex (the HTTP ETag, quoted). */
  etag: string
  contentType: string
  updatedAt: Date
  /** The project version that last wrote this path. */
  version: number
}
export interface StagedFile {
  path: string
  blobKey: string
  sha256: string
  size: number
  contentType: string
  /**
   * The upload's registration (staged_objects), which keeps its object until the change is made or refused; absent on
   * changes staged before it existed.
   */
  stageId?: string
}
export type FileChange = { path: string; staged: StagedFile } | { path: string; delete: true }

export const MAX_PATH_BYTES = 1024
/**
 * How long an upload keeps its object for a change not made yet (a PUT's is made at once; a run passes its own): then
 * the collector may take it.
 */
export const STAGE_HOLD_MS = 60 * 60_000
export const DEFAULT_CONTENT_TYPE = 'application/octet-stream'

/** Why a path is refused: `rule` names the rule in the error's details. */
function refuse(rule: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `path: ${message}`, { rule, errors: [{ field: 'path', message, rule }] })
}

// C0 controls, DEL and C1 controls: invisible in listings and terminals, and NUL cannot be stored.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
// With the u flag a surrogate pair is one code point, so only an unpaired half matches.
const LONE_SURROGATE = /\p{Cs}/u

/**
 * A file path as stored: NFC-normalised (so the same name typed on two systems is one file),
 * relative, '/'-separated, every segment a real name. Throws VALIDATION_ERROR naming the rule.
 */
export function normalizePath(path: string): string {
  if (typeof path !== 'string' || path === '') throw refuse('empty', 'must not be empty')
  if (LONE_SURROGATE.test(path)) throw refuse('invalid-unicode', 'must be valid Unicode (no unpaired surrogates)')
  const p = path.normalize('NFC')
  if (CONTROL.test(p)) throw refuse('control-character', 'must not contain NUL or other control characters')
  if (p.includes('\\')) throw refuse('backslash', "must use '/' as its only separator (no backslashes)")
  if (p.startsWith('/')) throw refuse('absolute', "must be relative (no leading '/')")
  const segments = p.split('/')
  if (segments.some((s) => s === '.' || s === '..'))
    throw refuse('dot-segment', "must not contain '.' or '..' segments")
  if (segments.some((s) => s === ''))
    throw refuse('empty-segment', "must not contain empty segments ('//' or a trailing '/')")
  if (Buffer.byteLength(p, 'utf8') > MAX_PATH_BYTES)
    throw refuse('too-long', `must be at most ${MAX_PATH_BYTES} bytes in UTF-8`)
  return p
}

const isNormalPath = (p: string) => {
  try {
    return normalizePath(p) === p
  } catch {
    return false
  }
}

// A media type as a header carries it: printable ASCII, bounded.
const CONTENT_TYPE = /^[\x21-\x7e][\x20-\x7e]{0,254}$/

/** The content type a file is stored with (the default when none): VALIDATION_ERROR for one a header cannot carry. */
export function checkContentType(contentType: string | undefined): string {
  const ct = contentType?.trim() || DEFAULT_CONTENT_TYPE
  if (!CONTENT_TYPE.test(ct)) throw invalid('contentType', 'must be printable ASCII of at most 255 characters')
  return ct
}

/** Where a project's bytes of a given SHA-256 live in the tenant's store. */
export const fileBlobKey = (tenantId: string, projectId: string, sha256: string) =>
  `tenants/${tenantId}/projects/${projectId}/files/${sha256}`

export const fileMeta = (r: FileRow): FileMeta => ({
  path: r.path,
  size: r.size,
  etag: r.sha256,
  contentType: r.content_type,
  updatedAt: r.updated_at,
  version: r.version,
})

const storeUnavailable = (err: unknown) =>
  err instanceof AppError
    ? err
    : new AppError(
        'SERVICE_UNAVAILABLE',
        'Object storage is unavailable; try again later',
        { dependency: 'storage', reason: (err as Error).name },
        { 'retry-after': '5' },
      )

/** An object's bytes, as many as its record says and no more (a store that sends more is refused, not buffered). */
async function collect(stream: Readable, size: number, key: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of exactly(stream, size, key)) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

/** Deletes of one tenant's objects at once on a replica (removeUnreferenced). */
const DELETES_PER_TENANT = 2

/** Runs at most `max` of the calls for one key at once; the others wait their turn, in order. */
function perKey(max: number) {
  const slots = new Map<string, { running: number; waiting: (() => void)[] }>()
  return async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    let s = slots.get(key)
    if (!s) slots.set(key, (s = { running: 0, waiting: [] }))
    if (s.running >= max) await new Promise<void>((resolve) => s!.waiting.push(resolve))
    s.running++
    try {
      return await fn()
    } finally {
      s.running--
      const next = s.waiting.shift()
      if (next) next()
      else if (s.running === 0) slots.delete(key)
    }
  }
}

/** A change's effect on the project's bytes: its size, or a delete. */
type Sized = { path: string; size: number } | { path: string; delete: true }

export function projectFilesService(deps: { db: Db; storage: Storage; now?: Clock; log?: Pick<Logger, 'warn'> }) {
  const { db } = deps
  const clock = deps.now ?? Date.now

  const blobsOf = async (tenantId: string): Promise<Blobs> => {
    try {
      return await deps.storage.forTenant(tenantId)
    } catch (err) {
      throw storeUnavailable(err)
    }
  }
  const readBlob = async (tenantId: string, key: string, size: number): Promise<Buffer> => {
    const blobs = await blobsOf(tenantId)
    try {
      return await collect(await blobs.get(key), size, key)
    } catch (err) {
      throw storeUnavailable(err)
    }
  }
  /**
   * QUOTA_EXCEEDED unless the project's files stay within the plan after `changes` (each path's
   * new size replacing its current one): what apply() decides as it makes the change, and
   * stage() before anything is uploaded. A change that frees space is always allowed, even on a
   * project left over a lowered quota.
   */
  const checkQuota = (a: Actor, changes: readonly Sized[], current: ReadonlyMap<string, FileRow>, used: number) => {
    const limit = PLAN_TERMS[planOf(a.principal)].limits.projectFileBytes
    let next = used
    for (const c of changes) next += ('size' in c ? c.size : 0) - (current.get(c.path)?.size ?? 0)
    if (next > limit && next > used) {
      throw new AppError('QUOTA_EXCEEDED', `The project's files may hold at most ${limit} bytes on this plan`, {
        limit,
        used,
        requested: next,
      })
    }
  }
  /** PRECONDITION_FAILED unless every path has the etag `ifMatch` asks ('*': it exists; null: it does not). */
  const checkConditions = (
    conditions: readonly (readonly [string, string | null])[],
    existing: ReadonlyMap<string, FileRow>,
  ) => {
    for (const [p, etag] of conditions) {
      const current = existing.get(p)?.sha256 ?? null
      const holds = etag === null ? current === null : etag === '*' ? current !== null : current === etag
      if (!holds)
        throw new AppError('PRECONDITION_FAILED', `${p} is not as the request expected`, { path: p, etag: current })
    }
  }
  const sized = (changes: readonly FileChange[]): Sized[] =>
    changes.map((c) => ('staged' in c ? { path: c.path, size: c.staged.size } : c))

  /**
   * Deletes the object at `key` unless something points at it (a file, a version, an upload not
   * expired), under the object's lock, after dropping the registrations `stageIds`: an upload of
   * the same bytes waits for the lock, so it registers after the delete and uploads again. True
   * when the object was deleted.
   */
  async function removeUnreferenced(
    tenantId: string,
    blobs: Blobs,
    key: string,
    stageIds: string[] = [],
  ): Promise<boolean> {
    return deletesOf(tenantId, () => removeNow(tenantId, blobs, key, stageIds))
  }
  const removeNow = (tenantId: string, blobs: Blobs, key: string, stageIds: string[]) =>
    db.tenant(tenantId, async (sql) => {
      await files.lockObject(sql, key)
      await files.deleteStaged(sql, tenantId, stageIds)
      if ((await files.referencedKeys(sql, tenantId, [key], new Date(clock()))).has(key)) return false
      await blobs.remove(key)
      return true
    })
  /**
   * The delete runs inside the transaction that holds the object's lock, so it holds a database
   * connection while the store answers (at most STORAGE_TIMEOUT_SECONDS): a tenant whose store is
   * slow has at most DELETES_PER_TENANT of them at once on this replica, and waits for the rest.
   */
  const deletesOf = perKey(DELETES_PER_TENANT)

  /**
   * Lets go of uploads whose change was refused or will never be made: their registrations go,
   * and each object that nothing else points at (no file, no version, no other upload) is deleted,
   * under the object's lock. What cannot be done now (the store or the database away) is the
   * collector's later: the registration expires and the object is found unreferenced.
   */
  async function release(tenantId: string, staged: readonly Pick<StagedFile, 'blobKey' | 'stageId'>[]): Promise<void> {
    const byKey = new Map<string, string[]>()
    for (const s of staged) byKey.set(s.blobKey, [...(byKey.get(s.blobKey) ?? []), ...(s.stageId ? [s.stageId] : [])])
    if (!byKey.size) return
    try {
      const blobs = await blobsOf(tenantId)
      for (const [key, ids] of byKey) await removeUnreferenced(tenantId, blobs, key, ids)
    } catch (err) {
      deps.log?.warn(
        { err: { code: (err as { code?: unknown }).code, message: (err as Error).message }, tenantId },
        'uploads not released now; the object collector takes them later',
      )
    }
  }
  const projectExists = async (sql: TxSql, tenantId: string, projectId: string, lock = false) => {
    const [p] = await store.selectProject(sql, tenantId, projectId, { lock })
    if (!p) throw notFound('project', projectId)
    return p
  }
  const findFile = async (sql: TxSql, tenantId: string, projectId: string, path: string): Promise<FileRow> => {
    await projectExists(sql, tenantId, projectId)
    const [row] = await files.selectFiles(sql, tenantId, projectId, [path])
    if (!row) throw notFound('file', path)
    return row
  }

  return {
    normalizePath,

    /** A page of the project's files in path order (byte order), optionally under a prefix. */
    async list(
      tenantId: string,
      projectId: string,
      page: { limit: number; cursor?: string; prefix?: string },
    ): Promise<{ data: FileMeta[]; nextCursor: string | null }> {
      const after = decodeTextCursor(page.cursor, isNormalPath)
      const prefix = page.prefix ? page.prefix.normalize('NFC') : null
      const rows = await db.tenant(tenantId, async (sql) => {
        await projectExists(sql, tenantId, projectId)
        return files.listFiles(sql, tenantId, projectId, { limit: page.limit + 1, after, prefix })
      })
      const data = rows.slice(0, page.limit).map(fileMeta)
      return { data, nextCursor: rows.length > page.limit ? encodeCursor(data[data.length - 1]!.path) : null }
    },

    /** A file's description without its bytes (for conditional requests). */
    async stat(tenantId: string, projectId: string, path: string): Promise<FileMeta> {
      const p = normalizePath(path)
      return fileMeta(await db.tenant(tenantId, (sql) => findFile(sql, tenantId, projectId, p)))
    },

    async read(tenantId: string, projectId: string, path: string): Promise<{ meta: FileMeta; body: Buffer }> {
      const p = normalizePath(path)
      const row = await db.tenant(tenantId, (sql) => findFile(sql, tenantId, projectId, p))
      return { meta: fileMeta(row), body: await readBlob(tenantId, row.blob_key, row.size) }
    },

    readStaged: (tenantId: string, staged: StagedFile): Promise<Buffer> =>
      readBlob(tenantId, staged.blobKey, staged.size),

    /**
     * Checks the path, the content type, the plan's per-file limit, and, before anything is sent
     * to the store, what apply() will check again as it makes the change: the project's quota with
     * this file and the `pending` changes made with it, and the If-Match conditions. Then registers
     * the upload (so that its object is kept until the change is made or refused) and uploads the
     * bytes. No version yet: apply() makes the change, in its caller's transaction; release() lets
     * go of an upload whose change is refused.
     */
    async stage(
      a: Actor,
      projectId: string,
      path: string,
      body: Buffer,
      contentType?: string,
      o: { pending?: readonly FileChange[]; ifMatch?: Record<string, string | null>; holdMs?: number } = {},
    ): Promise<StagedFile> {
      const p = normalizePath(path)
      const ct = checkContentType(contentType)
      const limit = PLAN_TERMS[planOf(a.principal)].limits.fileBytes
      if (body.length > limit)
        throw new AppError('PAYLOAD_TOO_LARGE', `A file may hold at most ${limit} bytes on this plan`, {
          limit,
          size: body.length,
        })
      const sha256 = createHash('sha256').update(body).digest('hex')
      const staged: StagedFile = {
        path: p,
        blobKey: fileBlobKey(a.tenantId, projectId, sha256),
        sha256,
        size: body.length,
        contentType: ct,
        stageId: newId(),
      }
      const changes = new Map<string, Sized>(sized(o.pending ?? []).map((c) => [c.path, c]))
      changes.set(p, { path: p, size: body.length })
      const conditions = Object.entries(o.ifMatch ?? {}).map(([q, etag]) => [normalizePath(q), etag] as const)
      await db.tenant(a.tenantId, async (sql) => {
        // Sent together (one round trip): a refusal below rolls the registration back with the rest.
        const [state] = await Promise.all([
          files.fileState(sql, a.tenantId, projectId, [...new Set([...changes.keys(), ...conditions.map(([q]) => q)])]),
          files.insertStaged(sql, {
            id: staged.stageId!,
            tenantId: a.tenantId,
            blobKey: staged.blobKey,
            expiresAt: new Date(clock() + (o.holdMs ?? STAGE_HOLD_MS)),
          }),
        ])
        // Another tenant's (or no) project: refused before anything is uploaded.
        if (!state.project) throw notFound('project', projectId)
        const existing = new Map(state.files.map((r) => [r.path, r]))
        const used = state.used
        checkConditions(conditions, existing)
        checkQuota(a, [...changes.values()], existing, used)
      })
      try {
        const blobs = await blobsOf(a.tenantId)
        // The object's own type does not matter: the same bytes may be stored under several types.
        await blobs.put(staged.blobKey, body, DEFAULT_CONTENT_TYPE)
      } catch (err) {
        await release(a.tenantId, [staged])
        throw storeUnavailable(err)
      }
      return staged
    },

    release,
    removeUnreferenced,
    /**
     * Registers an upload about to be made outside stage() (a restore's file bytes), under the
     * object's lock: the object is then kept for the change until release(), or until `holdMs`.
     */
    hold: (tenantId: string, blobKey: string, holdMs: number): Promise<Pick<StagedFile, 'blobKey' | 'stageId'>> =>
      db.tenant(tenantId, async (sql) => {
        const stageId = newId()
        await files.insertStaged(sql, { id: stageId, tenantId, blobKey, expiresAt: new Date(clock() + holdMs) })
        return { blobKey, stageId }
      }),
    /** The keys among `keys` that something points at now. */
    referenced: (tenantId: string, keys: string[]) =>
      db.tenant(tenantId, (sql) => files.referencedKeys(sql, tenantId, keys, new Date(clock()))),

    /** The most bytes one file of this actor's plan may hold: what an upload is read up to. */
    fileLimit: (a: Actor) => PLAN_TERMS[planOf(a.principal)].limits.fileBytes,

    /**
     * A file written as one change (a PUT): staged, then made a version; an upload whose change is refused is let go
     * of.
     */
    async put(
      a: Actor,
      projectId: string,
      path: string,
      body: Buffer,
      contentType: string | undefined,
      ifMatch: string | null | undefined,
    ) {
      const conditions = ifMatch === undefined ? {} : { ifMatch: { [path]: ifMatch } }
      const staged = await this.stage(a, projectId, path, body, contentType, conditions)
      try {
        return await db.tenant(a.tenantId, (sql) =>
          this.apply(sql, a, projectId, [{ path: staged.path, staged }], conditions),
        )
      } catch (err) {
        // Refused as the change was made (a race past stage's checks): nothing of it is kept.
        await release(a.tenantId, [staged])
        throw err
      }
    },

    /**
     * Makes every change as one new project version, in the caller's transaction: the version's
     * manifest lists all files as they then are, and project.updated is emitted. `ifMatch` maps a
     * path to the etag it must have ('*': it must exist; null: it must not). Refuses, changing
     * nothing, a change over the project's quota (QUOTA_EXCEEDED), a failed precondition
     * (PRECONDITION_FAILED) and a delete of a missing file (RESOURCE_NOT_FOUND). `files` are the
     * files written, in the order given; `created` the paths among them that did not exist before.
     */
    async apply(
      sql: TxSql,
      a: Actor,
      projectId: string,
      changes: FileChange[],
      opts: { ifMatch?: Record<string, string | null> } = {},
    ): Promise<{ version: number; files: FileMeta[]; created: string[] }> {
      if (changes.length === 0) throw invalid('changes', 'must hold at least one change')
      const terms = PLAN_TERMS[planOf(a.principal)].limits
      const normal = changes.map((c) => ({ ...c, path: normalizePath(c.path) }))
      const paths = normal.map((c) => c.path)
      const twice = paths.find((p, i) => paths.indexOf(p) !== i)
      if (twice !== undefined) throw invalid('changes', `names ${twice} more than once`)
      for (const c of normal) {
        if (!('staged' in c)) continue
        const s = c.staged
        // A staged file names bytes of this tenant and project only: its key is derived, never trusted.
        if (
          !/^[0-9a-f]{64}$/.test(s.sha256) ||
          s.blobKey !== fileBlobKey(a.tenantId, projectId, s.sha256) ||
          !Number.isSafeInteger(s.size) ||
          s.size < 0
        ) {
          throw invalid('changes', `${c.path}: is not a file staged for this project`)
        }
        checkContentType(s.contentType)
        if (s.size > terms.fileBytes)
          throw new AppError('PAYLOAD_TOO_LARGE', `A file may hold at most ${terms.fileBytes} bytes on this plan`, {
            limit: terms.fileBytes,
            size: s.size,
          })
      }
      const conditions = Object.entries(opts.ifMatch ?? {}).map(([p, etag]) => [normalizePath(p), etag] as const)

      const before = await projectExists(sql, a.tenantId, projectId, true) // serialises changes to this project's files
      // Sent together (one round trip). The uploads become files in this transaction: their registrations go with it.
      const [{ files: rows, used }] = await Promise.all([
        files.fileState(sql, a.tenantId, projectId, [...new Set([...paths, ...conditions.map(([p]) => p)])]),
        files.deleteStaged(
          sql,
          a.tenantId,
          normal.flatMap((c) => ('staged' in c && c.staged.stageId ? [c.staged.stageId] : [])),
        ),
      ])
      const existing = new Map(rows.map((r) => [r.path, r]))
      checkConditions(conditions, existing)
      for (const c of normal) if ('delete' in c && !existing.has(c.path)) throw notFound('file', c.path)
      checkQuota(a, sized(normal), existing, used)

      const project = await store.updateProject(sql, a.tenantId, projectId, {
        name: before.name,
        description: before.description,
        language: before.language,
      })
      const at = new Date(clock())
      const written: FileMeta[] = []
      const deleted = normal.filter((c) => 'delete' in c).map((c) => c.path)
      if (deleted.length) await files.deleteFiles(sql, a.tenantId, projectId, deleted)
      for (const c of normal) {
        if (!('staged' in c)) continue
        const s = c.staged
        written.push(
          fileMeta(
            await files.upsertFile(
              sql,
              a.tenantId,
              projectId,
              project.version,
              { path: c.path, blobKey: s.blobKey, size: s.size, sha256: s.sha256, contentType: s.contentType },
              at,
            ),
          ),
        )
      }
      await recordVersion(sql, a, project, 'files')
      await emitUpdated(sql, a.tenantId, before, project, {
        change: 'files',
        restoredFrom: null,
        files: normal.map((c) => ({
          path: c.path,
          change: 'delete' in c ? 'deleted' : existing.has(c.path) ? 'replaced' : 'created',
        })),
      })
      return {
        version: project.version,
        files: written,
        created: written.filter((f) => !existing.has(f.path)).map((f) => f.path),
      }
    },
  }
}

export type ProjectFilesService = ReturnType<typeof projectFilesService>
