// `installer backup`: one archive of the whole site (backup/tar.ts). In order: the configuration,
// encrypted with the admin's passphrase (it holds ENCRYPTION_MASTER_KEY); every object of every
// bucket the site keeps objects in; the database in pg_dump's custom format; objects.jsonl (each
// object's store, key, size and SHA-256); then manifest.json. pg_dump runs while the objects are
// copied, into a file beside the archive (a tar entry's size comes before its bytes), so the two
// slowest parts overlap. The archive is written as NAME.partial and renamed when it is whole: a
// failed backup leaves no file that looks like a backup.
import { createReadStream, createWriteStream, rmSync, renameSync, statSync, statfsSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { once } from 'node:events'
import { pipeline } from 'node:stream/promises'
import { Client } from 'minio'
import { VERSION } from '../../common/version.js'
import { parseVersion } from '../../common/version-numbers.js'
import { within } from '../../common/deadline.js'
import { run, runStreaming } from '../core/run.js'
import {
  FORMAT,
  PART,
  macText,
  objectEntry,
  type BackupManifest,
  type IndexLine,
  type StoreSummary,
} from './manifest.js'
import { macOf, seal } from './seal.js'
import type { DatabaseAccess, SiteServices, Store } from './site.js'
import { TarWriter } from './tar.js'
import { configurationFiles } from './configuration.js'
import type { Resolved } from '../core/context.js'

/** Something in the way of a backup or restore: said to the admin as it is (exit 1). */
export class SiteDataError extends Error {
  override name = 'SiteDataError'
}

export interface BackupProgress {
  phase: 'objects' | 'database' | 'done'
  objects: number
  objectBytes: number
  databaseBytes: number
}

export interface BackupOptions {
  output: string
  passphrase: string
  /** The site's configuration files by name (.env, answers.yaml...), as they are on disk. */
  configuration: Record<string, string>
  target: 'compose' | 'helm'
  /** The Atrium version the site runs (what a restore compares with its own); this installer's when not known. */
  version?: string
  /** Objects fetched ahead of the one being written (their requests overlap the copy). */
  lookahead?: number
  onProgress?: (p: BackupProgress) => void
}

export interface BackupResult {
  path: string
  bytes: number
  /** Of the whole file, as `sha256sum` prints it. */
  sha256: string
  manifest: BackupManifest
}

export const s3Of = (s: Store): Client => {
  const url = new URL(s.endpoint)
  return new Client({
    endPoint: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: Number(url.port) || undefined,
    useSSL: url.protocol === 'https:',
    accessKey: s.accessKey,
    secretKey: s.secretKey,
    region: s.region,
    pathStyle: true,
  })
}

/** One psql query's single value (the text of one row and column); the tool's own message when it fails. */
export async function pgValue(db: DatabaseAccess, query: string): Promise<string> {
  const c = db.command('psql', [
    '--no-psqlrc',
    '--tuples-only',
    '--no-align',
    '--quiet',
    '--set',
    'ON_ERROR_STOP=1',
    '--command',
    query,
  ])
  const r = await run(c.file, c.args, { env: c.env, timeoutMs: 300_000 })
  if (r.notFound)
    throw new SiteDataError(
      `psql is not installed on this machine: install PostgreSQL's client tools (${db.where} is reached with psql, pg_dump and pg_restore)`,
    )
  if (r.exitCode !== 0) throw new SiteDataError(`${db.where}: ${r.stderr.trim() || `psql exited ${r.exitCode}`}`)
  return r.stdout.trim()
}

export interface DatabaseFacts {
  server: number
  schema: number
  tables: Record<string, number>
  /** What the tables take in PostgreSQL (pg_table_size, TOAST included, indexes not): their dump is usually smaller. */
  bytes: number
}

// Counted through query_to_xml, so one statement counts every table whatever its name, and the
// migrations table is read only when it exists (a statement naming a missing table fails to parse).
const FACTS_SQL = `select json_build_object(
  'server', current_setting('server_version_num')::int,
  'bytes', (select coalesce(sum(pg_table_size(c.oid)), 0) from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p', 'm') and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%'),
  'schema', case when to_regclass('public.atrium_migrations') is null then 0
    else (xpath('/row/v/text()', query_to_xml('select coalesce(max(version), 0) as v from public.atrium_migrations', false, true, '')))[1]::text::int end,
  'tables', coalesce((select json_object_agg(c.relname, (xpath('/row/v/text()', query_to_xml(format('select count(*) as v from %I.%I', n.nspname, c.relname), false, true, '')))[1]::text::bigint order by c.relname)
    from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind in ('r', 'p')), '{}'::json))`

export async function databaseFacts(db: DatabaseAccess): Promise<DatabaseFacts> {
  return JSON.parse(await pgValue(db, FACTS_SQL)) as DatabaseFacts
}

/** A client tool's major version (`pg_dump (PostgreSQL) 15.20 (Debian...)`), or why it cannot be used. */
export async function toolMajor(
  db: DatabaseAccess,
  tool: 'pg_dump' | 'pg_restore',
): Promise<{ major: number; text: string }> {
  const c = db.bare(tool, ['--version'])
  const r = await run(c.file, c.args)
  if (r.notFound || r.exitCode !== 0)
    throw new SiteDataError(
      `${tool} is not installed on this machine: install PostgreSQL's client tools, version ${db.inContainer ? 'of the bundled PostgreSQL' : 'at least the server’s'} (Debian: apt-get install postgresql-client-NN)`,
    )
  const v = parseVersion(r.stdout)
  return { major: v?.[0] ?? 0, text: r.stdout.trim() }
}

/** pg_dump cannot dump a newer server than itself: the version needed, said before anything is written. */
export function dumpToolProblem(tool: number, server: number): string | null {
  const major = Math.floor(server / 10_000)
  return tool < major
    ? `pg_dump ${tool} cannot back up PostgreSQL ${major}: install PostgreSQL ${major}'s client tools (or newer) on this machine`
    : null
}

const DISK_FULL = new Set(['ENOSPC', 'EDQUOT'])
/** System calls of writing a file: an error in one is this machine's disk, not pg_dump's or the store's. */
const FILE_CALLS = new Set(['open', 'write', 'close', 'fsync', 'rename'])
const megabytes = (n: number) => `${(n / 1_048_576).toFixed(1)} MB`

/** Free bytes for this user at `dir` (statfs), or null when it cannot be read. */
function freeAt(dir: string): number | null {
  try {
    const s = statfsSync(dir)
    return s.bavail * s.bsize
  } catch {
    return null
  }
}

/** What the site's objects take: every store listed, within `ms` (complete false when a listing stopped short). */
async function objectBytes(stores: readonly Store[], ms: number): Promise<{ bytes: number; complete: boolean }> {
  const total = { bytes: 0, complete: true }
  const until = Date.now() + ms
  try {
    for (const store of stores) {
      const listing = listStore(s3Of(store), store)[Symbol.asyncIterator]()
      for (;;) {
        const next = await within(Math.max(until - Date.now(), 1), 'listing the objects', listing.next())
        if (next.done) break
        total.bytes += next.value.size
      }
    }
  } catch {
    total.complete = false
  }
  return total
}

export interface NeededSpace {
  /** What the site's tables take in PostgreSQL (DatabaseFacts.bytes). */
  databaseBytes: number
  objects: { bytes: number; complete: boolean }
}

/**
 * A failed write of the backup's own files, said as what it is (this machine's disk, not pg_dump or the store): for a
 * full disk, where, how much is free and how much the backup needs; null for any other error.
 */
export function writeFailure(err: unknown, dir: string, needed: NeededSpace): SiteDataError | null {
  const e = err as NodeJS.ErrnoException | null
  if (typeof e?.code !== 'string' || !(DISK_FULL.has(e.code) || FILE_CALLS.has(e.syscall ?? ''))) return null
  if (!DISK_FULL.has(e.code)) return new SiteDataError(`cannot write the backup in ${dir}: ${e.message}`)
  const free = freeAt(dir)
  const { databaseBytes: db, objects } = needed
  // The dump is spooled beside the archive, then copied into it: twice its size at the peak.
  return new SiteDataError(
    `the disk is full at ${dir}${e.code === 'EDQUOT' ? " (this user's disk quota is used up)" : ''}: ` +
      `${free === null ? 'too little' : megabytes(free)} free there (the backup's partial files removed), and the ` +
      `backup needs up to ${megabytes(objects.bytes + 2 * db)}${objects.complete ? '' : ' or more'}: the objects ` +
      `(${megabytes(objects.bytes)}${objects.complete ? '' : ', listed in part'}) and twice the database's dump while it ` +
      `is copied into the archive (the tables take ${megabytes(db)} in PostgreSQL, their dump usually less): ` +
      'free space there, or write the backup to a disk with room',
  )
}

/** Lists a store's objects lazily (one page at a time), for the copy to pull from. */
async function* listStore(client: Client, store: Store): AsyncGenerator<{ name: string; size: number }> {
  try {
    for await (const o of client.listObjectsV2(store.bucket, '', true) as AsyncIterable<{
      name?: string
      size: number
    }>)
      if (o.name !== undefined) yield { name: o.name, size: o.size }
  } catch (err) {
    throw new SiteDataError(
      `cannot list the bucket ${store.bucket} at ${store.endpoint}: ${(err as { code?: string }).code ?? (err as Error).message}`,
    )
  }
}

type Body = AsyncIterable<Buffer> & { headers?: Record<string, string | undefined>; destroy?: () => void }
type Fetched = { name: string; size: number; body: Promise<Body | null> }

const gone = (err: unknown) => ['NoSuchKey', 'NotFound'].includes((err as { code?: string }).code ?? '')

/**
 * The objects in order, each one's GET started `ahead` objects before it is written. An object
 * deleted since it was listed resolves to null (a live site's objects come and go). Bodies fetched
 * but never written (the backup failed) are closed, so no socket keeps the process alive.
 */
async function* prefetched(client: Client, store: Store, ahead: number): AsyncGenerator<Fetched> {
  const queue: Fetched[] = []
  try {
    for await (const o of listStore(client, store)) {
      const body = (client.getObject(store.bucket, o.name) as Promise<Body>).catch((err: unknown) => {
        if (gone(err)) return null
        throw new SiteDataError(
          `cannot read ${o.name} from the bucket ${store.bucket}: ${(err as { code?: string }).code ?? (err as Error).message}`,
        )
      })
      body.catch(() => {}) // awaited in turn; a failure is reported there
      queue.push({ ...o, body })
      if (queue.length > ahead) yield queue.shift()!
    }
    while (queue.length) yield queue.shift()!
  } finally {
    for (const f of queue)
      void f.body.then(
        (b) => b?.destroy?.(),
        () => {},
      )
  }
}

/** Writes the backup; on any failure removes what it wrote and throws. */
export async function writeBackup(site: SiteServices, o: BackupOptions): Promise<BackupResult> {
  const partial = `${o.output}.partial`
  const spool = `${o.output}.dump.partial`
  const indexPath = `${o.output}.index.partial`
  for (const p of [o.output, partial, spool, indexPath]) {
    try {
      statSync(p)
      throw new SiteDataError(
        p === o.output
          ? `${p} exists: give a new file name (a backup never overwrites one)`
          : `${p} is left from a backup that did not finish: remove it, or give another name`,
      )
    } catch (err) {
      if (err instanceof SiteDataError) throw err
    }
  }
  const db = site.database
  const facts = await databaseFacts(db)
  const dumpTool = await toolMajor(db, 'pg_dump')
  const noDump = dumpToolProblem(dumpTool.major, facts.server)
  if (noDump) throw new SiteDataError(noDump)
  const tar = new TarWriter(partial)
  const progress: BackupProgress = { phase: 'objects', objects: 0, objectBytes: 0, databaseBytes: 0 }
  // Row-level security stays on for the dump: the owner sees every row through atrium_system's policy.
  const dumpCmd = db.command('pg_dump', ['--format=custom', '--enable-row-security', '--no-password'])
  const dump = runStreaming(dumpCmd.file, dumpCmd.args, { env: dumpCmd.env })
  // Kept and thrown at the next step: a spool that cannot be written (a full disk) stops the copy at once.
  let spoolFailed: Error | null = null
  const spooled = pipeline(dump.stdout, createWriteStream(spool, { flags: 'wx', mode: 0o600 })).catch(
    (err: Error) => (spoolFailed = err),
  )
  const index = createWriteStream(indexPath, { flags: 'wx', mode: 0o600 })
  // Kept and thrown at the next step (a full disk, say): never an unhandled 'error' event.
  let indexFailed: Error | null = null
  index.on('error', (err) => (indexFailed ??= err))
  let failure: unknown = null
  try {
    const sealed = seal(Buffer.from(JSON.stringify({ files: o.configuration })), o.passphrase)
    const config = await tar.entry(PART.configuration, sealed.data.length, sealed.data)
    const stores: StoreSummary[] = []
    for (const store of site.stores) {
      const client = s3Of(store)
      const summary: StoreSummary = { name: store.name, bucket: store.bucket, count: 0, bytes: 0 }
      for await (const f of prefetched(client, store, o.lookahead ?? 4)) {
        const body = await f.body
        if (!body) continue // deleted since it was listed
        // The size of what is read (the object may have been replaced since it was listed).
        const size = Number(body.headers?.['content-length'] ?? f.size)
        const contentType = body.headers?.['content-type']
        const written = await tar.entry(objectEntry(store.name, f.name), size, body, {
          attributes: contentType ? { 'user.mime_type': contentType } : {},
        })
        const line: IndexLine = {
          store: store.name,
          key: f.name,
          size,
          sha256: written.sha256,
          ...(contentType ? { contentType } : {}),
        }
        if (indexFailed) throw indexFailed
        if (spoolFailed) throw spoolFailed
        if (!index.write(JSON.stringify(line) + '\n')) await once(index, 'drain')
        summary.count++
        summary.bytes += size
        progress.objects++
        progress.objectBytes += size
        o.onProgress?.(progress)
      }
      stores.push(summary)
    }
    if (indexFailed) throw indexFailed
    index.end()
    await once(index, 'close')
    progress.phase = 'database'
    o.onProgress?.(progress)
    const [ended, spoolError] = await Promise.all([dump.done, spooled])
    // The spool's own failure first: pg_dump then fails too (its output has nowhere to go), but is not the cause.
    if (spoolError) throw spoolError
    if (ended.exitCode !== 0)
      throw new SiteDataError(`pg_dump failed on ${db.where}: ${ended.stderr || `exit ${ended.exitCode}`}`)
    const dumpBytes = statSync(spool).size
    progress.databaseBytes = dumpBytes
    const database = await tar.entry(PART.database, dumpBytes, createReadStream(spool, { highWaterMark: 1 << 20 }))
    const indexBytes = statSync(indexPath).size
    const indexed = await tar.entry(PART.index, indexBytes, createReadStream(indexPath, { highWaterMark: 1 << 20 }))
    const body: Omit<BackupManifest, 'mac'> = {
      format: FORMAT,
      atriumVersion: o.version ?? VERSION,
      schemaVersion: facts.schema,
      createdAt: new Date().toISOString(),
      target: o.target,
      configuration: {
        file: PART.configuration,
        bytes: config.bytes,
        sha256: config.sha256,
        encryption: sealed.params,
      },
      database: {
        file: PART.database,
        bytes: database.bytes,
        sha256: database.sha256,
        serverVersion: facts.server,
        dumpedWith: dumpTool.text,
        tables: facts.tables,
      },
      objects: {
        index: PART.index,
        indexBytes,
        indexSha256: indexed.sha256,
        count: stores.reduce((n, s) => n + s.count, 0),
        bytes: stores.reduce((n, s) => n + s.bytes, 0),
        stores,
      },
      archive: { sha256: tar.digest() },
    }
    const manifest: BackupManifest = { ...body, mac: macOf(sealed.keys, macText(body)) }
    await tar.entry(
      PART.manifest,
      Buffer.byteLength(JSON.stringify(manifest, null, 2)),
      Buffer.from(JSON.stringify(manifest, null, 2)),
    )
    await tar.finish()
    const sha256 = tar.digest()
    renameSync(partial, o.output)
    progress.phase = 'done'
    o.onProgress?.(progress)
    return { path: o.output, bytes: tar.bytes, sha256, manifest }
  } catch (err) {
    failure = err
    tar.destroy()
    index.destroy()
    dump.kill()
    dump.stdout.destroy()
    rmSync(partial, { force: true })
  } finally {
    await Promise.all([dump.done, spooled])
    rmSync(spool, { force: true })
    rmSync(indexPath, { force: true })
  }
  // Said once every partial file is gone, so the space free is what a backup there can have.
  const full = DISK_FULL.has((failure as { code?: unknown } | null)?.code as string)
  const objects = full ? await objectBytes(site.stores, 10_000) : { bytes: 0, complete: false }
  throw writeFailure(failure, dirname(resolve(o.output)), { databaseBytes: facts.bytes, objects }) ?? failure
}

/** Progress in words, at most every two seconds (and at each phase's start): for the admin's terminal. */
export function progressLines(say: (line: string) => void, everyMs = 2000): (p: BackupProgress) => void {
  let last = 0
  let phase = ''
  const mb = (n: number) => `${(n / 1_048_576).toFixed(1)} MB`
  return (p) => {
    const now = Date.now()
    if (p.phase === phase && now - last < everyMs) return
    phase = p.phase
    last = now
    if (p.phase === 'objects') say(`  objects: ${p.objects} (${mb(p.objectBytes)})`)
    else if (p.phase === 'database') say(`  objects: ${p.objects} (${mb(p.objectBytes)}), done; the database next`)
    else say(`  done: ${p.objects} objects (${mb(p.objectBytes)}), database dump ${mb(p.databaseBytes)}`)
  }
}

/**
 * The site's backup as the installer takes it (`backup`, and `install` before an upgrade): its configuration files
 * included.
 */
export function backupSite(
  ctx: Resolved,
  site: SiteServices,
  o: { output: string; passphrase: string; version: string; say?: (line: string) => void },
): Promise<BackupResult> {
  return writeBackup(site, {
    output: o.output,
    passphrase: o.passphrase,
    version: o.version,
    configuration: configurationFiles(ctx.answers.outputDir),
    target: ctx.files.target,
    onProgress: o.say ? progressLines(o.say) : undefined,
  })
}
