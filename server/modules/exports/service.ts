// Tenant exports: asked for through the API (manual), by a schedule, or by the plan (automatic
// backups); each is a job on the runner (queue 'exports.run') that writes the archive into the
// tenant's store (destination download: a link valid 7 days) or into a bucket the tenant named
// (destination s3), and records its size and checksum. docs/portability.md describes the archive.
//
// States: pending (queued) -> running -> completed or failed ({code, message}). An attempt that
// fails for a fault that may pass (the database or a store away) is tried again; the last failed
// attempt, or one that cannot succeed (the destination refuses), ends it failed. A job that ended
// without its export hearing of it (its worker killed on the last attempt) shows as failed
// JOB_INTERRUPTED, never as running for ever.
import postgres from 'postgres'
import type { Clock } from '../../clock.js'
import { newId } from '../../../common/ids.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, ERRORS, invalid, notFound, type ErrorCode } from '../../domain/errors.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import { PLAN_TERMS } from '../../domain/plans.js'
import {
  BlobKeyRefused,
  guardedS3Blobs,
  isStoreOrigin,
  siteS3Blobs,
  storeReason,
  type Blobs,
} from '../../platform/blobs.js'
import { isDatabaseUnavailable, type Db, type TxSql } from '../../platform/db.js'
import { enqueueJob, JobFailure, type Job } from '../../platform/jobs.js'
import { outboundHostAllowed, refusalIn, type CompiledPolicy } from '../../platform/outbound.js'
import type { Secrets } from '../../platform/secrets.js'
import type { Storage } from '../../platform/storage.js'
import { auditActor, auditBy, type AuditActor } from '../audit/service.js'
import { normalizeInclude, type ExportFormat, type Include } from './format.js'
import { auditEnd, shownState, shownTimes } from './job-record.js'
import { DATA_ATTEMPTS, type ArchiveLimits } from './limits.js'
import { inTenantFor, ownOrOperator, tenantPlan } from '../tenants/service.js'
import * as store from './store.js'
import {
  contentTypeOf,
  csvEntries,
  extensionOf,
  fileEntries,
  jsonSink,
  metadata,
  recordEntries,
  zipSink,
  type FileRef,
} from './writer.js'

export const EXPORT_QUEUE = 'exports.run'
/** The specification's validity of an export's download link. */
export const EXPORT_LINK_SECONDS = 7 * 24 * 3600
/** How long a destination check may take before it counts as failed. */
const PROBE_TIMEOUT_MS = 15_000

export const PROVIDERS = ['s3', 'r2', 'gcs', 'azure'] as const
export type Provider = (typeof PROVIDERS)[number]

/** A bucket of the tenant's, as the API takes it (the keys in the clear, only on the way in). */
export interface Destination {
  provider?: Provider
  /** Omitted: the site's own store (the S3 store of the tenant's region: R2_ENDPOINT on a site of one region). */
  s3Endpoint?: string
  s3Region?: string
  s3Bucket: string
  s3Prefix?: string
  s3AccessKey: string
  s3SecretKey: string
}

/** A destination with its defaults filled in and its prefix normalized: what is checked, sealed and reached. */
export interface Bucket {
  provider: Provider
  endpoint: string
  region: string
  bucket: string
  prefix: string
  accessKey: string
  secretKey: string
}

export interface ExportRequest {
  format?: ExportFormat
  include?: string[]
  destination?: 'download' | 's3'
  s3?: Destination
}

export interface ExportView {
  exportId: string
  tenantId: string
  kind: store.ExportKind
  scheduleId: string | null
  status: store.ExportStatus
  format: ExportFormat
  include: Include[]
  destination: 'download' | 's3'
  /** destination s3: where the archive went (no keys). */
  location: { provider: string; endpoint: string; bucket: string; key: string | null } | null
  downloadUrl: string | null
  expiresAt: string | null
  size: number | null
  checksum: string | null
  error: { code: string; message: string } | null
  createdAt: string
  startedAt: string | null
  completedAt: string | null
}

export interface ExportsDeps {
  db: Db
  storage: Storage
  secrets: Secrets
  policy: CompiledPolicy
  /** What a restore takes (limits.ts): a zip export keeps inside it. */
  limits: ArchiveLimits
  version: string
  now?: Clock
}

/** An error of the catalog as a job records it. */
const failure = (code: ErrorCode, message?: string) => ({ code, message: message ?? ERRORS[code].message })

/** What an attempt's error says: whether another attempt may succeed, and what the export records if not. */
function classify(err: unknown): { retry: boolean; error: { code: string; message: string } } {
  if (err instanceof AppError) return { retry: err.status >= 500, error: { code: err.code, message: err.message } }
  const refused = refusalIn(err)
  if (refused)
    return {
      retry: false,
      error: failure(
        'EXPORT_DESTINATION_FAILED',
        `The outbound policy does not allow the destination: ${refused.reason}`,
      ),
    }
  if (err instanceof postgres.PostgresError || isDatabaseUnavailable(err))
    return { retry: true, error: failure('SERVICE_UNAVAILABLE', 'The database was unavailable') }
  // A key refused here never reached a store: another attempt would make the same key.
  if (err instanceof BlobKeyRefused)
    return { retry: false, error: failure('INTERNAL_ERROR', "The archive's object key was refused before any request") }
  return { retry: true, error: failure('SERVICE_UNAVAILABLE', 'Object storage was unavailable') }
}

/** A destination's failure, with the store's reason; a fault of this process stays what it is. */
const destinationFailed = (err: unknown) =>
  err instanceof BlobKeyRefused
    ? err
    : new AppError('EXPORT_DESTINATION_FAILED', `The destination failed: ${storeReason(err)}`, {
        reason: storeReason(err),
      })

export function normalizePrefix(prefix: string | undefined): string {
  const p = (prefix ?? '').replace(/^\/+/, '')
  if (!p) return ''
  const withSlash = p.endsWith('/') ? p : `${p}/`
  if (
    !/^[A-Za-z0-9][A-Za-z0-9._\-/]*$/.test(withSlash) ||
    withSlash
      .split('/')
      .slice(0, -1)
      .some((s) => s === '' || s === '.' || s === '..')
  ) {
    throw invalid(
      'body.s3Prefix',
      "may hold letters, digits and . _ - / only, in segments that are not empty, '.' or '..'",
    )
  }
  return withSlash
}

export const defaultRegion = (provider: Provider) => (provider === 'r2' ? 'auto' : 'us-east-1')

/** The probe object's key: valid in a store with a prefix and without (a key may not begin with '.'). */
export const probeKey = (prefix: string) => `${prefix}atrium-destination-check-${newId()}`

export function exportsService(deps: ExportsDeps) {
  const { db, storage, secrets, policy } = deps
  const clock = deps.now ?? Date.now

  /**
   * A destination's bucket. One of the site's own stores (the address R2_ENDPOINT or REGION_STORES
   * gives) is reached as the server reaches its own objects, whatever OUTBOUND_ALLOWED_NETWORKS says:
   * the operator configured that address, and the tenant chooses only the bucket and keys there.
   * Any other endpoint is reached only where the outbound policy allows. Decided at every opening:
   * a schedule made for the site's store goes through the policy once the site's store is elsewhere.
   */
  const openDestination = (d: Omit<Bucket, 'provider' | 'prefix'>) =>
    (storage.isSiteEndpoint(d.endpoint) ? siteS3Blobs : (o: typeof d) => guardedS3Blobs(policy, o))({
      endpoint: d.endpoint,
      region: d.region,
      bucket: d.bucket,
      accessKey: d.accessKey,
      secretKey: d.secretKey,
    })

  /**
   * A destination as the API took it, its defaults filled in: without s3Endpoint, the S3 store of the
   * tenant's region (its objects' own region, so that a tenant bound to a region exports into it),
   * signed for that store's region unless s3Region says otherwise.
   */
  async function resolve(tenantId: string, d: Destination): Promise<Bucket> {
    const provider = d.provider ?? 's3'
    let endpoint = d.s3Endpoint
    let region = d.s3Region || defaultRegion(provider)
    if (endpoint === undefined) {
      const site = storage.siteStore((await storage.placement(tenantId)).region)?.s3
      if (!site)
        throw invalid(
          'body.s3Endpoint',
          'is required: this site has no object store of its own to default to (it keeps files in a folder on the server, not in an S3 store)',
          { rule: 'no-site-store' },
        )
      endpoint = site.endpoint
      region = d.s3Region || site.signingRegion
    }
    return {
      provider,
      endpoint,
      region,
      bucket: d.s3Bucket,
      prefix: normalizePrefix(d.s3Prefix),
      accessKey: d.s3AccessKey,
      secretKey: d.s3SecretKey,
    }
  }

  /**
   * Checks that the server can write to a destination and delete there: a probe object written and
   * deleted. VALIDATION_ERROR naming the check that failed (address, write, delete) and the store's
   * reason. The probe's key is valid by construction (a normalized prefix, then a name that begins
   * with a letter); were it ever refused here, that is this server's fault, thrown as it is, never
   * reported as the store being unreachable.
   */
  async function check(d: Bucket): Promise<void> {
    let url: URL
    try {
      url = new URL(d.endpoint)
    } catch {
      throw invalid('body.s3Endpoint', 'must be an http:// or https:// URL')
    }
    if (!isStoreOrigin(url)) {
      throw invalid('body.s3Endpoint', 'must be an http:// or https:// URL with no path, query or credentials')
    }
    if (!storage.isSiteEndpoint(d.endpoint)) await outboundHostAllowed('body.s3Endpoint', url, policy)
    const bucket = await openDestination(d).catch((err: unknown) => {
      throw refusalIn(err)
        ? invalid('body.s3Endpoint', 'may not be called: the outbound policy refuses it', { check: 'address' })
        : err
    })
    const key = probeKey(d.prefix)
    const step = async (check: 'write' | 'delete', work: () => Promise<unknown>) => {
      let timer: NodeJS.Timeout | undefined
      try {
        await Promise.race([
          work(),
          new Promise(
            (_, reject) =>
              (timer = setTimeout(
                () => reject(Object.assign(new Error('timeout'), { code: 'Timeout' })),
                PROBE_TIMEOUT_MS,
              )),
          ),
        ])
      } catch (err) {
        if (err instanceof BlobKeyRefused) throw err
        const reason = storeReason(err)
        const field = /AccessKey|Signature|AccessDenied|Authorization/i.test(reason)
          ? 'body.s3AccessKey'
          : /Bucket/i.test(reason)
            ? 'body.s3Bucket'
            : 'body.s3Endpoint'
        throw invalid(field, `the destination check could not ${check} a probe object: ${reason}`, { check, reason })
      } finally {
        clearTimeout(timer)
      }
    }
    try {
      await step('write', () =>
        bucket.put(
          key,
          Buffer.from('Atrium checks that it may write here; this object is deleted at once.\n'),
          'text/plain',
        ),
      )
      await step('delete', () => bucket.remove(key))
    } finally {
      bucket.close()
    }
  }

  async function present(row: store.ExportRow): Promise<ExportView> {
    const { status, error } = shownState(row, ['pending', 'running'])
    let downloadUrl: string | null = null
    const expires = row.expires_at?.getTime() ?? 0
    if (status === 'completed' && row.destination === 'download' && row.object_key && expires > clock()) {
      const blobs = await storage.forTenant(row.tenant_id)
      // A link lives 7 days at most (S3 signatures cannot be longer); a backup kept longer gets a fresh one each time.
      const seconds = Math.min(EXPORT_LINK_SECONDS, Math.max(1, Math.floor((expires - clock()) / 1000)))
      downloadUrl = await blobs.presignGet(row.object_key, {
        expiresSeconds: seconds,
        filename: row.object_key.split('/').pop()!,
      })
    }
    return {
      exportId: row.id,
      tenantId: row.tenant_id,
      kind: row.kind,
      scheduleId: row.schedule_id,
      status,
      format: row.format,
      include: row.include,
      destination: row.destination,
      location: row.target
        ? {
            provider: row.target.provider,
            endpoint: row.target.endpoint,
            bucket: row.target.bucket,
            key: row.object_key,
          }
        : null,
      downloadUrl,
      expiresAt: row.destination === 'download' ? (row.expires_at?.toISOString() ?? null) : null,
      size: row.size,
      checksum: row.checksum,
      error,
      ...shownTimes(row, status),
    }
  }

  /** A destination as the API took it, its defaults filled in and checked (a probe written and deleted). */
  async function checkedDestination(tenantId: string, d: Destination): Promise<Bucket> {
    const bucket = await resolve(tenantId, d)
    await check(bucket)
    return bucket
  }

  /** Seals a destination's keys for a row; the row keeps where it is, never the keys in the clear. */
  function sealTarget(tenantId: string, rowId: string, table: string, d: Bucket): store.ExportTarget {
    return {
      provider: d.provider,
      endpoint: d.endpoint,
      region: d.region,
      bucket: d.bucket,
      prefix: d.prefix,
      accessKeySealed: secrets.encrypt(d.accessKey, { tenantId, table, rowId, field: 'access_key' }),
      secretKeySealed: secrets.encrypt(d.secretKey, { tenantId, table, rowId, field: 'secret_key' }),
    }
  }

  /** A destination as the server reaches it: the keys unsealed. */
  const unsealTarget = (tenantId: string, rowId: string, table: string, t: store.ExportTarget) => ({
    ...t,
    accessKey: secrets.decrypt(t.accessKeySealed, { tenantId, table, rowId, field: 'access_key' }),
    secretKey: secrets.decrypt(t.secretKeySealed, { tenantId, table, rowId, field: 'secret_key' }),
  })

  /**
   * Queues an export in the caller's transaction (its own, or a schedule's or the backup sweep's):
   * the row and its job exist only if that transaction commits.
   */
  async function enqueue(
    sql: TxSql,
    e: {
      tenantId: string
      kind: store.ExportKind
      scheduleId: string | null
      format: ExportFormat
      include: Include[]
      target: store.ExportTarget | null
      requestedBy: AuditActor
      id?: string
      uniqueKey?: string
    },
  ): Promise<string | null> {
    const id = e.id ?? newId()
    const jobId = await enqueueJob(
      sql,
      EXPORT_QUEUE,
      { exportId: id },
      { tenantId: e.tenantId, maxAttempts: DATA_ATTEMPTS, ...(e.uniqueKey ? { uniqueKey: e.uniqueKey } : {}) },
    )
    if (!jobId) return null // that slot's export exists already
    await store.insertExport(sql, {
      id,
      tenant_id: e.tenantId,
      kind: e.kind,
      schedule_id: e.scheduleId,
      format: e.format,
      include: e.include,
      destination: e.target ? 's3' : 'download',
      target: e.target,
      requested_by: e.requestedBy,
      job_id: jobId,
      created_at: new Date(clock()),
    })
    return id
  }

  /** Writes the archive of one export; throws what the attempt met. */
  async function write(
    row: store.ExportRow,
    log: Job['log'],
  ): Promise<{ objectKey: string; size: number; checksum: string }> {
    const t = row.tenant_id
    const createdAt = row.created_at
    const stamp = createdAt
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d+Z$/, 'Z')
    const filename = `export_${t}_${stamp}.${row.format === 'csv' ? 'csv.zip' : extensionOf(row.format)}`
    const tenantBlobs = await storage.forTenant(t)
    let out: Blobs & { close?(): void }
    let objectKey: string
    if (row.target) {
      // A schedule's run reaches its bucket with the schedule's keys (sealed in the schedule's row, gone with it).
      const sealed = row.schedule_id
        ? (await db.tenant(t, (sql) => store.getSchedule(sql, t, row.schedule_id!)))?.target
        : row.target
      if (!sealed)
        throw new AppError('EXPORT_DESTINATION_FAILED', 'The schedule was deleted before its export ran', {
          reason: 'schedule-deleted',
        })
      out = await openDestination(
        row.schedule_id
          ? unsealTarget(t, row.schedule_id, 'export_schedules', sealed)
          : unsealTarget(t, row.id, 'tenant_exports', sealed),
      )
      objectKey = `${row.target.prefix}${filename}`
    } else {
      out = tenantBlobs
      objectKey = `tenants/${t}/exports/${row.id}/${filename}`
    }
    // A zip is what a restore reads: it keeps inside what a restore takes (limits.ts).
    const sink = row.format === 'json' ? jsonSink() : zipSink(createdAt, row.format === 'zip' ? deps.limits : null)
    const upload = out.put(objectKey, sink.stream, contentTypeOf(row.format)).catch((err: unknown) => {
      throw row.target ? destinationFailed(err) : err
    })
    upload.catch(() => {}) // awaited below; an early failure also stops the writing through the sink
    const files: FileRef[] = []
    const meta = metadata({ exportId: row.id, tenantId: t, include: row.include, createdAt, version: deps.version })
    try {
      await db.tenantSnapshot(t, async (sql) => {
        for await (const e of row.format === 'csv' ? csvEntries(sql, meta) : recordEntries(sql, meta, files))
          await sink.add(e)
      })
      sink.reserve(
        files.length,
        files.reduce((n, f) => n + f.size, 0),
      )
      for (const e of fileEntries(tenantBlobs, files)) await sink.add(e)
      const [measured] = await Promise.all([sink.end(), upload])
      log.info({ exportId: row.id, size: measured.size, files: files.length }, 'export written')
      return { objectKey, size: measured.size, checksum: `sha256:${measured.sha256}` }
    } catch (err) {
      sink.destroy()
      // An archive past the limits is the export's own refusal, whatever the upload made of its end.
      if (err instanceof AppError && err.code === 'EXPORT_TOO_LARGE') {
        await upload.catch(() => {})
        throw err
      }
      // The upload's own failure explains the rest (a sink that stopped being read).
      throw await upload.then(
        () => err,
        (uploadErr: unknown) => uploadErr,
      )
    } finally {
      out.close?.()
    }
  }

  return {
    enqueue,
    sealTarget,
    unsealTarget,
    present,

    checkedDestination,

    /** POST .../export: the export queued, or the reason it cannot be. */
    async request(a: Actor<string | null>, tenantId: string, input: ExportRequest): Promise<ExportView> {
      const include = normalizeInclude(input.include ?? ['all'])
      if (!include.length)
        throw invalid('body.include', 'must name at least one of projects, agents, chat_history, settings or all')
      const format = input.format ?? 'zip'
      ownOrOperator(a, tenantId) // before anything reaches out to a destination
      let destination: Bucket | null = null
      if ((input.destination ?? 'download') === 's3') {
        if (!input.s3) throw invalid('body.s3Bucket', 'destination s3 needs s3Bucket, s3AccessKey and s3SecretKey')
        destination = await checkedDestination(tenantId, input.s3)
      }
      const actor: Actor = { ...a, tenantId }
      const id = newId()
      const row = await inTenantFor(db, a, tenantId, async (sql, { plan }) => {
        const allowance = PLAN_TERMS[plan].limits.manualExportsPerMonth
        if (allowance !== null) {
          // One count at a time per tenant: two requests at once cannot both take the last one.
          await sql`select pg_advisory_xact_lock(hashtext(${`atrium:exports:${tenantId}`}))`
          const now = new Date(clock())
          const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
          const used = await store.countManualSince(sql, tenantId, month)
          if (used >= allowance) {
            const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString()
            throw new AppError(
              'QUOTA_EXCEEDED',
              `The ${PLAN_TERMS[plan].title} plan allows ${allowance} manual export${allowance === 1 ? '' : 's'} a month`,
              {
                limit: allowance,
                used,
                period: 'month',
                resetsAt,
              },
            )
          }
        }
        const target = destination ? sealTarget(tenantId, id, 'tenant_exports', destination) : null
        await enqueue(sql, {
          id,
          tenantId,
          kind: 'manual',
          scheduleId: null,
          format,
          include,
          target,
          requestedBy: auditActor(actor),
        })
        await auditBy(sql, actor, {
          action: 'export.requested',
          target: { type: 'export', id },
          details: {
            format,
            include,
            destination: target ? 's3' : 'download',
            ...(target ? { bucket: target.bucket, endpoint: target.endpoint } : {}),
          },
        })
        return (await store.getExport(sql, tenantId, id))!
      })
      return present(row)
    },

    async get(a: Actor<string | null>, tenantId: string, exportId: string): Promise<ExportView> {
      const row = await inTenantFor(db, a, tenantId, (sql) => store.getExport(sql, tenantId, exportId))
      if (!row) throw notFound('export', exportId)
      return present(row)
    },

    async list(
      a: Actor<string | null>,
      tenantId: string,
      page: { limit: number; cursor?: string; scheduleId?: string },
    ) {
      const before = decodeIdCursor(page.cursor)
      const rows = await inTenantFor(db, a, tenantId, (sql) =>
        store.listExports(sql, tenantId, {
          limit: page.limit + 1,
          before,
          ...(page.scheduleId ? { scheduleId: page.scheduleId } : {}),
        }),
      )
      const p = toPage(rows, page.limit, (r) => r.id)
      return { items: await Promise.all(p.items.map(present)), nextCursor: p.nextCursor }
    },

    /** The job of one export: run again from the start after a crash (the object is written whole or not at all). */
    async run(job: Job<{ exportId: string }>): Promise<void> {
      const tenantId = job.tenantId!
      const { exportId } = job.payload
      const row = await db.tenant(tenantId, async (sql) =>
        (await store.startExport(sql, tenantId, exportId, new Date(clock())))
          ? store.getExport(sql, tenantId, exportId)
          : undefined,
      )
      if (!row) return // ended already (an earlier attempt finished but its job did not hear), or gone with its tenant
      try {
        const done = await write(row, job.log)
        const at = new Date(clock())
        // A download's link is valid 7 days; a backup is kept as long as its tenant's plan keeps backups.
        const keepSeconds =
          row.kind === 'backup'
            ? await db
                .tenant(tenantId, (sql) => tenantPlan(sql, tenantId))
                .then((p) => PLAN_TERMS[p ?? 'free'].limits.backupRetentionDays * 86400)
            : EXPORT_LINK_SECONDS
        const expiresAt = row.destination === 'download' ? new Date(at.getTime() + keepSeconds * 1000) : null
        await db.tenant(tenantId, async (sql) => {
          if (!(await store.completeExport(sql, tenantId, exportId, { ...done, at, expiresAt }))) return
          await auditEnd(sql, 'export', row, 'completed', {
            kind: row.kind,
            format: row.format,
            size: done.size,
            checksum: done.checksum,
            destination: row.destination,
            ...(row.schedule_id ? { scheduleId: row.schedule_id } : {}),
          })
        })
      } catch (err) {
        if (job.signal.aborted) throw err // the replica is stopping: handed back, and tried again elsewhere
        const { retry, error } = classify(err)
        if (retry && job.attempt < job.maxAttempts) throw new JobFailure(error.message)
        job.log.warn({ err, exportId }, 'export failed')
        await db.tenant(tenantId, async (sql) => {
          if (!(await store.failExport(sql, tenantId, exportId, error, new Date(clock())))) return
          await auditEnd(sql, 'export', row, 'failed', { kind: row.kind, error })
        })
      }
    },
  }
}

export type ExportsService = ReturnType<typeof exportsService>
