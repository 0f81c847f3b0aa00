// Restores: a tenant archive (the zip format of an export) or a project backup uploaded, then read
// on the job runner (queue 'restores.run') in two passes, whichever it is (a Pass: report.ts; the
// project backup's own rules are in project-backup.ts, the rest of this comment is the tenant
// archive's). The first checks everything (archive.ts, records.ts) and writes nothing; with
// validate=true that is all, and the report says what a restore would do. The second copies the
// files' bytes into the tenant's store (each checked against its digest and its CRC-32), then
// writes the records in one transaction: merge=false deletes the tenant's records of the kinds the
// archive includes and puts the archive's in their place; merge=true adds what is absent and
// reports what was already there. A failure anywhere leaves the tenant's records as they were (the
// transaction rolls back) and removes the bytes this restore stored.
//
// Ids: a record the tenant already has keeps its id; every other id is derived for the tenant
// (format.ts derivedId), whatever tenant the archive names: so nothing a restore does depends on
// whether another tenant has a record of some id. Who started a run is kept only when that user or
// key is the tenant's. Runs and replies that were in flight when exported come back failed
// (RUN_INTERRUPTED): nothing runs them here.
import { createHash } from 'node:crypto'
import { pipeline, Transform, type Readable } from 'node:stream'
import type { Clock } from '../../clock.js'
import { isUuid, newId } from '../../../common/ids.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, invalid, notFound, type ErrorCode } from '../../domain/errors.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import { PLAN_TERMS, type Plan } from '../../domain/plans.js'
import type { Blobs } from '../../platform/blobs.js'
import type { Db, TxSql } from '../../platform/db.js'
import { enqueueJob, JobFailure, type Job } from '../../platform/jobs.js'
import type { Storage } from '../../platform/storage.js'
import { auditActor, auditBy } from '../audit/service.js'
import { derivedId, INTERRUPTED, kindsOf, RESTORED_BY, SPECS, type Kind } from '../exports/format.js'
import { inTenantFor, ownOrOperator, tenantFor, tenantPlan } from '../tenants/service.js'
import type { LlmSettingsService } from '../tenants/settings.js'
import { fileBlobKey, type ProjectFilesService, type StagedFile } from '../projects/files-service.js'
import { auditEnd, shownState, shownTimes } from '../exports/job-record.js'
import { DATA_ATTEMPTS, type ArchiveLimits } from '../exports/limits.js'
import { openArchive, refused, type Archive, type ArchiveEntry } from './archive.js'
import { backupPass } from './project-backup.js'
import { rowsOf, survey, type Row, type Survey } from './records.js'
import { reportOf, tally, type Copied, type Copy, type Pass, type Tally } from './report.js'
import * as store from './store.js'

export const RESTORE_QUEUE = 'restores.run'
/** Files copied into the store at once by a restore (each holds up to one upload part in memory). */
const COPY_CONCURRENCY = 2

export interface RestoreOptions {
  merge: boolean
  validate: boolean
  /**
   * A project backup: the tenant's project it is restored into; with asNewProject, the id of the
   * project it makes (chosen when the restore is asked for, so that every attempt makes the same one).
   */
  projectId: string | null
  /** A project backup: restored as a new project, whatever projects the tenant has. */
  asNewProject: boolean
}

/** What else ends a restore's job failed at once, besides its archive's ARCHIVE_* refusals. */
const JOB_REFUSALS = ['QUOTA_EXCEEDED', 'VALIDATION_ERROR', 'RESOURCE_NOT_FOUND'] as const

/**
 * The options a project backup alone takes: a tenant export given one of them is refused (asNewProject
 * first: with it, projectId is the id chosen for the new project, not one the client gave).
 */
const BACKUP_OPTIONS = ['asNewProject', 'projectId'] as const

export interface RestoreView {
  restoreId: string
  tenantId: string
  status: 'processing' | 'completed' | 'failed'
  merge: boolean
  validate: boolean
  projectId: string | null
  asNewProject: boolean
  size: number
  report: Record<string, unknown> | null
  error: { code: string; message: string; details?: Record<string, unknown> } | null
  createdAt: string
  startedAt: string | null
  completedAt: string | null
}

export interface RestoresDeps {
  db: Db
  storage: Storage
  limits: ArchiveLimits
  /** The LLM settings' own checks (PATCH /tenant/settings/llm's): restored settings pass them too. */
  llmSettings: Pick<LlmSettingsService, 'validate'>
  /** The key ids are derived with for a tenant (format.ts restoreIdKey). */
  idKey: Buffer
  /** The project files' objects: the bytes a restore writes are held for it, and let go of when it fails. */
  files: Pick<ProjectFilesService, 'hold' | 'release'>
  now?: Clock
}

/** How long the file bytes a restore writes are kept for it (its records are written after all of them). */
const RESTORE_HOLD_MS = 24 * 3600_000

type Held = Pick<StagedFile, 'blobKey' | 'stageId'>

const uploadKey = (tenantId: string, id: string) => `tenants/${tenantId}/restores/${id}/upload.zip`

// The patch's fields by the columns of a settings record.
const SETTINGS_COLUMNS: Record<string, string> = {
  provider: 'provider',
  baseUrl: 'base_url',
  model: 'model',
  'defaults.temperature': 'temperature',
  'defaults.maxTokens': 'max_tokens',
}

export function restoresService(deps: RestoresDeps) {
  const { db, storage } = deps
  const clock = deps.now ?? Date.now

  /**
   * Restored LLM settings as PATCH would take them (the schema, the outbound policy): the record as it is stored, or
   * ARCHIVE_INVALID_DATA naming the column.
   */
  async function checkedSettings(row: Row, entry: string): Promise<Row> {
    const patch = {
      provider: row.provider,
      baseUrl: row.base_url || null,
      model: row.model || null,
      defaults: { temperature: row.temperature, maxTokens: row.max_tokens },
    }
    try {
      return { ...row, ...(await deps.llmSettings.validate(patch)) }
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'VALIDATION_ERROR') throw err
      const error = (err.details.errors as { field: string; message: string }[] | undefined)?.[0]
      const column = SETTINGS_COLUMNS[error?.field ?? ''] ?? error?.field ?? 'llm'
      throw refused('ARCHIVE_INVALID_DATA', `${entry}: llm.${column} ${error?.message ?? err.message}`, {
        entry,
        kind: 'llm_settings',
        field: column,
        ...(typeof err.details.reason === 'string' ? { reason: err.details.reason } : {}),
      })
    }
  }

  function present(row: store.RestoreRow): RestoreView {
    const { status, error } = shownState(row, ['processing'])
    return {
      restoreId: row.id,
      tenantId: row.tenant_id,
      status,
      merge: row.merge,
      validate: row.validate_only,
      projectId: row.project_id,
      asNewProject: row.as_new_project,
      size: row.upload_size,
      report: row.report,
      error,
      ...shownTimes(row, status),
    }
  }

  /**
   * Copies the files' bytes into the store (or, validating, only reads them), each checked against
   * its digest; every key it wrote or found is held for the restore (`written`), and let go of when
   * it ends: kept where the records point at it, removed otherwise.
   */
  async function copyFiles(
    archive: Archive,
    copies: readonly Copy[],
    blobs: Blobs,
    to: string,
    o: { verifyOnly: boolean; written: Held[] },
  ): Promise<Copied> {
    const result = { stored: 0, alreadyPresent: 0, bytes: 0 }
    const copy = async (entry: ArchiveEntry, key: string, sha256: string) => {
      // Held before it is looked at: bytes already there may be a leftover nothing points at, which
      // the collector (or a failed attempt's release) would otherwise take before the records do.
      if (!o.verifyOnly) o.written.push(await deps.files.hold(to, key, RESTORE_HOLD_MS))
      const present = o.verifyOnly ? null : await blobs.size(key)
      if (present !== null) {
        // The store holds bytes of this digest already (the server wrote them, having checked them):
        // an entry of another size cannot be those bytes, and is never written over them.
        if (present !== entry.size)
          throw refused(
            'ARCHIVE_CORRUPT',
            `${entry.name} does not hold the bytes its manifest names (its size differs from theirs)`,
            { entry: entry.name, rule: 'size' },
          )
        result.alreadyPresent++ // the same digest, so the same bytes
        return
      }
      const hash = createHash('sha256')
      // pipeline, not pipe: a failed CRC check at the end of the entry must reach the reader.
      const hashed = pipeline(
        await archive.open(entry),
        new Transform({
          transform(chunk: Buffer, _enc, done) {
            hash.update(chunk)
            done(null, chunk)
          },
        }),
        () => {},
      )
      if (o.verifyOnly) for await (const _ of hashed as Readable);
      else await blobs.put(key, hashed, 'application/octet-stream')
      if (hash.digest('hex') !== sha256)
        throw refused('ARCHIVE_CORRUPT', `${entry.name} does not hold the bytes its manifest names (SHA-256 differs)`, {
          entry: entry.name,
          rule: 'sha256',
        })
      result.stored++
      result.bytes += entry.size
    }
    const work = copies.map((c) => () => copy(c.entry, fileBlobKey(to, c.projectId, c.sha256), c.sha256))
    // A few at once: each copy waits on the store for reading and for writing, in turn.
    let next = 0
    let failed: unknown = null
    await Promise.all(
      Array.from({ length: COPY_CONCURRENCY }, async () => {
        while (next < work.length && !failed) {
          try {
            await work[next++]!()
          } catch (err) {
            failed ??= err
          }
        }
      }),
    )
    if (failed) throw failed
    return result
  }

  /** The second pass's records, in one transaction; the report's counts. */
  async function apply(
    sql: TxSql,
    archive: Archive,
    s: Survey,
    to: string,
    o: { merge: boolean; plan: Plan; projects: Set<string>; projectId: (id: string) => string },
    t: Tally,
  ) {
    const version = s.meta.formatVersion
    // Which ids are the tenant's own, of every kind restored or referred to, as the restore begins.
    const restored = kindsOf(s.include)
    await store.snapshotOwnedIds(sql, to, [
      ...new Set(
        restored.flatMap((k) =>
          Object.entries(SPECS[k].columns)
            .filter(([, c]) => c.type === 'id')
            .map(([, c]) => c.ref ?? k),
        ),
      ),
    ])
    // The projects' ids were settled before their bytes were copied (the store's keys name them).
    const own = await store.ownedIds(
      sql,
      'projects',
      s.projects.map((p) => p.id),
    )
    if (own.size !== o.projects.size || [...own].some((id) => !o.projects.has(id)))
      throw new Error("The tenant's projects changed while the restore copied their files")
    /** Records with their ids (their own and their references) as the tenant restored into has them. */
    const mapped = async (kind: Kind, rows: Row[]): Promise<Row[]> => {
      const columns = Object.entries(SPECS[kind].columns)
        .filter(([, c]) => c.type === 'id')
        .map(([name, c]) => ({ name, of: c.ref ?? kind }))
      const owned = new Map<Kind, Set<string>>()
      for (const of of new Set(columns.map((c) => c.of))) {
        const ids = new Set(
          rows.flatMap((r) =>
            columns.filter((c) => c.of === of && typeof r[c.name] === 'string').map((c) => r[c.name] as string),
          ),
        )
        owned.set(of, await store.ownedIds(sql, of, [...ids]))
      }
      return rows.map((r) => {
        const out: Row = { ...r }
        for (const c of columns)
          if (typeof r[c.name] === 'string' && !owned.get(c.of)!.has(r[c.name] as string))
            out[c.name] = derivedId(deps.idKey, to, r[c.name] as string)
        return out
      })
    }
    /**
     * Who started each run, kept when it is a user or key of the tenant's; otherwise the restore's own mark
     * (RESTORED_BY).
     */
    const startedBy = async (rows: Row[]): Promise<Row[]> => {
      const named = rows.map((r) => {
        const s = r.started_by as { kind?: unknown; id?: unknown; userId?: unknown } | null
        const uuid = (v: unknown) => typeof v === 'string' && isUuid(v)
        return s &&
          typeof s === 'object' &&
          (s.kind === 'user' || s.kind === 'api_key') &&
          uuid(s.id) &&
          (s.userId === null || uuid(s.userId))
          ? {
              kind: s.kind,
              id: (s.id as string).toLowerCase(),
              userId: (s.userId as string | null)?.toLowerCase() ?? null,
            }
          : null
      })
      const theirs = await store.principalIds(
        sql,
        to,
        [
          ...new Set(
            named.flatMap((n) => (n ? [...(n.kind === 'user' ? [n.id] : []), ...(n.userId ? [n.userId] : [])] : [])),
          ),
        ],
        [...new Set(named.flatMap((n) => (n?.kind === 'api_key' ? [n.id] : [])))],
      )
      return rows.map((r, i) => {
        const n = named[i]
        const ours =
          n &&
          (n.kind === 'user' ? theirs.users.has(n.id) : theirs.keys.has(n.id)) &&
          (n.userId === null || theirs.users.has(n.userId))
        return ours ? r : { ...r, started_by: RESTORED_BY }
      })
    }
    const insert = async (kind: Kind, rows: Row[], extra?: (row: Row) => Row) => {
      const inserted = await store.insertRecords(sql, kind, to, rows, {
        skipExisting: o.merge,
        ...(extra ? { extra } : {}),
      })
      t.counts[kind].restored += inserted.length
      if (inserted.length < rows.length) {
        const keyOf = (r: Row) => SPECS[kind].key.map((k) => String(r[k])).join('/')
        const got = new Set(inserted.map(keyOf))
        for (const r of rows) if (!got.has(keyOf(r))) t.conflict(kind, keyOf(r))
      }
      return inserted
    }
    const replaced = o.merge
      ? null
      : await store.deleteKinds(
          sql,
          to,
          (['projects', 'agents', 'chat_sessions', 'llm_settings'] as const).filter((k) =>
            s.include.includes(SPECS[k].include),
          ),
        )

    // Projects, and under each one restored its versions, current files and versions' files.
    const projects = new Set(
      (
        await insert(
          'projects',
          await mapped(
            'projects',
            s.projects.map((p) => p.row),
          ),
        )
      ).map((r) => r.id as string),
    )
    for (const p of s.projects) {
      const pid = o.projectId(p.id)
      const blobKey = (r: Row) => ({ blob_key: fileBlobKey(to, pid, r.sha256 as string) })
      const parts: [Kind, ArchiveEntry[], ((r: Row) => Row) | undefined][] = [
        ['project_versions', p.versions, undefined],
        ['project_files', p.manifest, blobKey],
        ['project_version_files', p.versionFiles, blobKey],
      ]
      for (const [kind, entries, extra] of parts) {
        for (const e of entries) {
          const rows = await mapped(kind, await rowsOf(archive, e, kind, version))
          if (!projects.has(pid)) {
            for (const r of rows)
              t.skip(kind, String(r.id ?? `${pid}/${r.path as string}`), 'its project was already there')
            continue
          }
          await insert(kind, rows, extra)
        }
      }
    }

    // Projects a run or a session may point at: restored now, or the tenant's own.
    const projectRefs = new Set(projects)
    const agentRefs = new Set<string>()
    const known = async (kind: 'projects' | 'agents', refs: Set<string>, ids: string[]) => {
      const missing = [...new Set(ids.filter((id) => !refs.has(id)))]
      for (const id of await store.existingIds(sql, kind, to, missing)) refs.add(id)
      return (id: string) => refs.has(id)
    }

    // Agents, and the runs of each one restored (a run whose project is nowhere is skipped).
    const agents = await mapped(
      'agents',
      s.agents.map((a) => a.row),
    )
    for (const r of await insert('agents', agents)) agentRefs.add(r.id as string)
    const finishedAt = s.meta.createdAt
    for (const [i, a] of s.agents.entries()) {
      for (const e of a.runs) {
        const rows = await startedBy(await mapped('agent_runs', await rowsOf(archive, e, 'agent_runs', version)))
        if (!agentRefs.has(agents[i]!.id as string)) {
          for (const r of rows) t.skip('agent_runs', r.id as string, 'its agent was already there')
          continue
        }
        const hasProject = await known(
          'projects',
          projectRefs,
          rows.map((r) => r.project_id as string),
        )
        const keep: Row[] = []
        for (const r of rows) {
          if (!hasProject(r.project_id as string))
            t.skip(
              'agent_runs',
              r.id as string,
              `its project ${r.project_id as string} is neither in the archive nor in this tenant`,
            )
          else if (r.status === 'queued' || r.status === 'running')
            keep.push({ ...r, status: 'failed', error: INTERRUPTED, finished_at: finishedAt })
          else keep.push(r)
        }
        await insert('agent_runs', keep)
      }
    }

    // Chat: sessions (a binding to an agent or project that is nowhere is dropped), then their messages.
    const sessions = new Set<string>()
    let unbound = 0
    if (s.sessions) {
      const rows = await mapped('chat_sessions', await rowsOf(archive, s.sessions, 'chat_sessions', version))
      const hasProject = await known(
        'projects',
        projectRefs,
        rows.flatMap((r) => (r.project_id ? [r.project_id as string] : [])),
      )
      const hasAgent = await known(
        'agents',
        agentRefs,
        rows.flatMap((r) => (r.agent_id ? [r.agent_id as string] : [])),
      )
      for (const r of rows) {
        for (const [column, has] of [
          ['project_id', hasProject],
          ['agent_id', hasAgent],
        ] as const) {
          if (r[column] && !has(r[column] as string)) {
            r[column] = null
            unbound++
          }
        }
      }
      for (const r of await insert('chat_sessions', rows)) sessions.add(r.id as string)
    }
    for (const e of s.messages) {
      const rows = await mapped('chat_messages', await rowsOf(archive, e, 'chat_messages', version))
      const keep: Row[] = []
      for (const r of rows) {
        if (!sessions.has(r.session_id as string))
          t.skip('chat_messages', r.id as string, 'its session was already there')
        else keep.push(r.status === 'generating' ? { ...r, status: 'failed', error: INTERRUPTED } : r)
      }
      await insert('chat_messages', keep)
    }

    const llm = s.llm
    if (llm) {
      if (await store.putLlmSettings(sql, to, llm, !o.merge)) t.counts.llm_settings.restored++
      else t.conflict('llm_settings', to)
    }

    // The plan's bounds hold after the restore as before it; if not, nothing is written.
    const limits = PLAN_TERMS[o.plan].limits
    const used = await store.usage(sql, to)
    if (used.chatSessions > limits.chatSessions) {
      throw new AppError(
        'QUOTA_EXCEEDED',
        `The restore would leave ${used.chatSessions} chat sessions; the ${PLAN_TERMS[o.plan].title} plan keeps ${limits.chatSessions}`,
        {
          limit: limits.chatSessions,
          requested: used.chatSessions,
        },
      )
    }
    if (used.largestProjectBytes > limits.projectFileBytes) {
      throw new AppError(
        'QUOTA_EXCEEDED',
        `A project would hold ${used.largestProjectBytes} bytes of files; the ${PLAN_TERMS[o.plan].title} plan allows ${limits.projectFileBytes}`,
        {
          limit: limits.projectFileBytes,
          requested: used.largestProjectBytes,
        },
      )
    }
    return { replaced, unboundSessionLinks: unbound }
  }

  /** A tenant export's restore: checked (first pass), its projects' ids settled, and what the job copies and writes. */
  async function tenantPass(archive: Archive, to: string, plan: Plan, options: RestoreOptions): Promise<Pass> {
    for (const k of BACKUP_OPTIONS)
      if (options[k]) throw invalid(`options.${k}`, 'applies to a project backup; this archive is a tenant export')
    const s = await survey(archive, { plan, settings: checkedSettings })
    // A project the tenant has keeps its id; any other gets one derived for the tenant. Settled
    // before its bytes are copied, since their keys name it (apply() checks it still holds).
    const projects = await db.tenant(to, (sql) =>
      store.existingIds(
        sql,
        'projects',
        to,
        s.projects.map((p) => p.id),
      ),
    )
    const projectId = (id: string) => (projects.has(id) ? id : derivedId(deps.idKey, to, id))
    return {
      counts: s.counts,
      files: s.files,
      copies: s.projects.flatMap((p) => [
        ...[...p.files.values()].map((f) => ({ entry: f.entry, sha256: f.sha256, projectId: projectId(p.id) })),
        ...[...p.history].map(([sha256, entry]) => ({ entry, sha256, projectId: projectId(p.id) })),
      ]),
      describe: {
        archive: {
          exportId: s.meta.exportId,
          tenantId: s.meta.tenantId,
          createdAt: s.meta.createdAt,
          formatVersion: s.meta.formatVersion,
          atriumVersion: s.meta.atriumVersion,
          include: s.include,
        },
      },
      audit: { fromTenant: s.meta.tenantId, exportId: s.meta.exportId },
      apply: (sql, t) => apply(sql, archive, s, to, { merge: options.merge, plan, projects, projectId }, t),
    }
  }

  return {
    present,

    /**
     * POST .../restore: the upload streamed into the tenant's store (`file` from the form, at most
     * the upload limit), then the restore queued. `receive` is called with a sink for the file and
     * resolves with the options once the form has been read.
     */
    async request(
      a: Actor<string | null>,
      tenantId: string,
      receive: (
        put: (file: Readable) => Promise<number>,
        check: (options: RestoreOptions) => Promise<RestoreOptions>,
      ) => Promise<RestoreOptions>,
    ): Promise<RestoreView> {
      ownOrOperator(a, tenantId)
      await db.tenant(tenantId, (sql) => tenantFor(sql, a, tenantId))
      const id = newId()
      const key = uploadKey(tenantId, id)
      const blobs = await storage.forTenant(tenantId)
      let size: number | null = null
      try {
        // The project named is the tenant's, asked as soon as the options are read (before the file when they come first).
        const check = async (o: RestoreOptions) => {
          if (
            o.projectId &&
            !(await db.tenant(tenantId, (sql) => store.existingIds(sql, 'projects', tenantId, [o.projectId!]))).size
          )
            throw notFound('project', o.projectId)
          return o
        }
        const asked = await receive(async (file) => {
          // The form's own failure (too large, cut short) is the client's; any other is the store's.
          let formFailed: unknown = null
          file.once('error', (err) => (formFailed ??= err))
          let n = 0
          const counted = pipeline(
            file,
            new Transform({
              transform(chunk: Buffer, _enc, done) {
                n += chunk.length
                done(null, chunk)
              },
            }),
            () => {},
          )
          try {
            await blobs.put(key, counted, 'application/zip')
          } catch (err) {
            // (A form that failed before it reached here is errored already: it emits nothing more.)
            throw (
              formFailed ??
              file.errored ??
              new AppError('SERVICE_UNAVAILABLE', 'Object storage is unavailable; upload the archive again later', {
                dependency: 'storage',
                reason: (err as { code?: string }).code ?? 'store',
              })
            )
          }
          size = n
          return n
        }, check)
        // A new project's id is chosen now: every attempt of the job makes the same project.
        const options = asked.asNewProject ? { ...asked, projectId: newId() } : asked
        if (size === null)
          throw new AppError('VALIDATION_ERROR', 'file: the form must have a part named file with the archive', {
            errors: [{ field: 'file', message: 'is required' }],
          })
        const actor: Actor = { ...a, tenantId }
        const row = await db.tenant(tenantId, async (sql) => {
          const jobId = await enqueueJob(
            sql,
            RESTORE_QUEUE,
            { restoreId: id },
            { tenantId, maxAttempts: DATA_ATTEMPTS },
          )
          await store.insertRestore(sql, {
            id,
            tenant_id: tenantId,
            merge: options.merge,
            validate_only: options.validate,
            project_id: options.projectId,
            as_new_project: options.asNewProject,
            upload_key: key,
            upload_size: size!,
            requested_by: auditActor(actor),
            job_id: jobId,
            created_at: new Date(clock()),
          })
          await auditBy(sql, actor, {
            action: 'restore.requested',
            target: { type: 'restore', id },
            details: {
              merge: options.merge,
              validate: options.validate,
              size,
              ...(options.projectId ? { projectId: options.projectId, asNewProject: options.asNewProject } : {}),
            },
          })
          return (await store.getRestore(sql, tenantId, id))!
        })
        return present(row)
      } catch (err) {
        if (size !== null) await blobs.remove(key).catch(() => {}) // the restore was not queued: its upload goes
        throw err
      }
    },

    async get(a: Actor<string | null>, tenantId: string, restoreId: string): Promise<RestoreView> {
      const row = await inTenantFor(db, a, tenantId, (sql) => store.getRestore(sql, tenantId, restoreId))
      if (!row) throw notFound('restore', restoreId)
      return present(row)
    },

    async list(a: Actor<string | null>, tenantId: string, page: { limit: number; cursor?: string }) {
      const before = decodeIdCursor(page.cursor)
      const rows = await inTenantFor(db, a, tenantId, (sql) =>
        store.listRestores(sql, tenantId, page.limit + 1, before),
      )
      const p = toPage(rows, page.limit, (r) => r.id)
      return { items: p.items.map(present), nextCursor: p.nextCursor }
    },

    /**
     * The job of one restore: both passes; run again from the start after a crash (the records are written in one
     * transaction).
     */
    async run(job: Job<{ restoreId: string }>): Promise<void> {
      const to = job.tenantId!
      const { restoreId } = job.payload
      const row = await db.tenant(to, async (sql) => {
        const r = await store.getRestore(sql, to, restoreId)
        if (r?.status === 'processing') await store.startRestore(sql, to, restoreId, new Date(clock()))
        const plan = r ? await tenantPlan(sql, to) : null
        return r && plan ? { ...r, plan } : null
      })
      if (!row) return
      const blobs = await storage.forTenant(to)
      const removeUpload = async () => {
        if (!row.upload_key) return
        await blobs
          .remove(row.upload_key)
          .catch((err: unknown) => job.log.warn({ err, restoreId }, 'could not remove a restore upload'))
        await db.tenant(to, (sql) => store.clearUpload(sql, to, restoreId)).catch(() => {})
      }
      if (row.status !== 'processing') return removeUpload() // ended, but the upload was still there
      const written: Held[] = []
      const options: RestoreOptions = {
        merge: row.merge,
        validate: row.validate_only,
        projectId: row.project_id,
        asNewProject: row.as_new_project,
      }
      let archive: Archive | null = null
      try {
        archive = await openArchive(blobs, row.upload_key!, row.upload_size, deps.limits)
        const pass =
          archive.format === 'project-backup'
            ? await backupPass(archive, { db, idKey: deps.idKey, now: clock, to, plan: row.plan, options })
            : await tenantPass(archive, to, row.plan, options)
        const t = tally(pass.counts)
        const files = await copyFiles(archive, pass.copies, blobs, to, { verifyOnly: options.validate, written })
        const ended = await db.tenant(to, async (sql) => {
          const extra = options.validate ? {} : await pass.apply(sql, t)
          const report = reportOf(pass, options, options.validate ? null : t, files, extra)
          if (
            !(await store.endRestore(sql, to, restoreId, {
              status: 'completed',
              report,
              error: null,
              at: new Date(clock()),
            }))
          )
            return false
          await auditEnd(sql, 'restore', row, 'completed', {
            merge: options.merge,
            validate: options.validate,
            ...pass.audit,
            files: files.stored,
          })
          return true
        })
        job.log.info({ restoreId, ended, files }, options.validate ? 'restore validated' : 'restore applied')
        // The records point at the bytes now: their holds go (and a byte no record took goes with them).
        await deps.files.release(to, written)
        await removeUpload()
      } catch (err) {
        // Bytes this attempt stored are not referenced by its records: they go, unless something else points at them.
        await deps.files.release(to, written)
        if (job.signal.aborted) throw err
        // The archive's, the options' or the plan's: trying again would meet the same.
        const known =
          err instanceof AppError &&
          (err.code.startsWith('ARCHIVE_') || (JOB_REFUSALS as readonly string[]).includes(err.code))
        if (!known && job.attempt < job.maxAttempts)
          throw new JobFailure(err instanceof Error ? err.message : String(err))
        const error = known
          ? { code: (err as AppError).code, message: (err as AppError).message, details: (err as AppError).details }
          : {
              code: 'SERVICE_UNAVAILABLE' as ErrorCode,
              message: 'A database or the store was unavailable; upload the archive again',
            }
        job.log.warn({ err, restoreId }, 'restore failed')
        await db.tenant(to, async (sql) => {
          if (
            !(await store.endRestore(sql, to, restoreId, {
              status: 'failed',
              report: null,
              error,
              at: new Date(clock()),
            }))
          )
            return
          await auditEnd(sql, 'restore', row, 'failed', { code: error.code })
        })
        await removeUpload()
      } finally {
        archive?.close()
      }
    },
  }
}

export type RestoresService = ReturnType<typeof restoresService>
