// `installer restore`: the site backup (backup/backup.ts) put back. The archive is read twice. The
// first read changes nothing: every byte is hashed against the manifest, the passphrase must open
// the configuration and the manifest's MAC, and an archive from a newer release is refused. Then
// the target must be empty (a database without tables, buckets without objects) unless --force,
// which empties it. The second read puts every object back and streams the dump into
// `pg_restore --single-transaction`, so the database is restored whole or not at all; when anything
// fails the buckets are emptied again, and the target is as it was (empty).
import { createReadStream } from 'node:fs'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createHash } from 'node:crypto'
import type { Client } from 'minio'
import { SCHEMA_VERSION, VERSION } from '../../common/version.js'
import { parseVersion } from '../../common/version-numbers.js'
import { putStream } from '../../common/s3-upload.js'
import { runStreaming } from '../core/run.js'
import { SiteDataError, pgValue, s3Of, toolMajor } from './backup.js'
import { PART, macText, parseManifest, versionProblem, type BackupManifest, type IndexLine } from './manifest.js'
import { deriveKeys, macOf, paramsProblem, sameMac, unseal } from './seal.js'
import type { DatabaseAccess, SiteServices, Store } from './site.js'
import { ArchiveError, readTar } from './tar.js'

/** A backup this installer will not restore, found before anything changed. */
export class RestoreRefused extends Error {
  override name = 'RestoreRefused'
}

export interface VerifiedBackup {
  manifest: BackupManifest
  /** The configuration files as they were backed up, by name. */
  configuration: Record<string, string>
  /** Each object's SHA-256 as the first read found it (and objects.jsonl lists it), in archive order. */
  objectDigests: Digests
}

/** SHA-256 digests in one growing buffer: 32 bytes an object, not an object per object. */
export class Digests {
  private buf = Buffer.alloc(32 * 1024)
  length = 0

  push(d: Buffer): void {
    if ((this.length + 1) * 32 > this.buf.length) this.buf = Buffer.concat([this.buf, Buffer.alloc(this.buf.length)])
    d.copy(this.buf, this.length++ * 32)
  }

  get(i: number): Buffer | null {
    return i < this.length ? this.buf.subarray(i * 32, i * 32 + 32) : null
  }
}

/** Splits a stream of chunks into lines (objects.jsonl), holding one partial line at most. */
async function* lines(chunks: AsyncIterable<Buffer>, onChunk: (c: Buffer) => void): AsyncGenerator<string> {
  let rest = ''
  for await (const c of chunks) {
    onChunk(c)
    const parts = (rest + c.toString('utf8')).split('\n')
    rest = parts.pop()!
    yield* parts
  }
  if (rest) yield rest
}

const open = (path: string) => createReadStream(path, { highWaterMark: 1 << 20 })

/** Reads the whole archive and checks it; changes nothing. Throws RestoreRefused saying why. */
export async function verifyBackup(
  path: string,
  passphrase: string,
  release = { version: VERSION, schema: SCHEMA_VERSION },
): Promise<VerifiedBackup> {
  let sealed: Buffer | null = null
  let manifestText: string | null = null
  let before = ''
  const digests: Record<string, string> = {}
  const objectDigests = new Digests()
  let objects = 0
  let objectBytes = 0
  try {
    for await (const e of readTar(open(path))) {
      if (manifestText !== null) throw new ArchiveError(`${e.name} follows manifest.json`)
      if (e.name === PART.manifest) {
        before = e.archiveBefore
        const chunks: Buffer[] = []
        for await (const c of e.body) chunks.push(c)
        manifestText = Buffer.concat(chunks).toString('utf8')
        continue
      }
      const hash = createHash('sha256')
      if (e.name === PART.index) {
        // Each line names the SHA-256 of the object in that place: the objects' own check.
        let i = 0
        for await (const line of lines(e.body, (c) => hash.update(c))) {
          const listed = (JSON.parse(line) as IndexLine).sha256
          if (objectDigests.get(i++)?.toString('hex') !== listed)
            throw new ArchiveError(`object ${i} does not match its SHA-256 in objects.jsonl`)
        }
        if (i !== objectDigests.length)
          throw new ArchiveError(`objects.jsonl lists ${i} objects where the archive holds ${objectDigests.length}`)
        digests[e.name] = hash.digest('hex')
        continue
      }
      const keep: Buffer[] = []
      for await (const c of e.body) {
        hash.update(c)
        if (e.name === PART.configuration) keep.push(c)
      }
      if (e.name === PART.configuration) sealed = Buffer.concat(keep)
      if (e.name.startsWith(PART.objects)) {
        objects++
        objectBytes += e.size
        objectDigests.push(hash.digest())
      } else if (e.name === PART.configuration || e.name === PART.database) digests[e.name] = hash.digest('hex')
      else throw new ArchiveError(`it holds ${e.name}, which an Atrium site backup does not`)
    }
  } catch (err) {
    if (err instanceof ArchiveError || err instanceof SyntaxError)
      throw new RestoreRefused(`${path} is damaged: ${err.message}. Nothing was changed.`)
    if ((err as NodeJS.ErrnoException).code)
      throw new RestoreRefused(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code}`)
    throw err
  }
  if (manifestText === null)
    throw new RestoreRefused(`${path} has no manifest.json: it is not a whole Atrium site backup. Nothing was changed.`)
  const parsed = parseManifest(manifestText)
  if ('problem' in parsed) throw new RestoreRefused(`${path}: ${parsed.problem}. Nothing was changed.`)
  const m = parsed.manifest
  const damaged = (what: string) =>
    new RestoreRefused(`${path} is damaged: ${what} does not match its SHA-256 in the manifest. Nothing was changed.`)
  if (before !== m.archive.sha256) throw damaged('the archive')
  if (digests[PART.configuration] !== m.configuration.sha256 || !sealed) throw damaged('the configuration')
  if (digests[PART.database] !== m.database.sha256) throw damaged('the database dump')
  if (digests[PART.index] !== m.objects.indexSha256) throw damaged('the object index')
  if (objects !== m.objects.count || objectBytes !== m.objects.bytes) throw damaged('the objects')
  const badParams = paramsProblem(m.configuration.encryption ?? {})
  if (badParams) throw new RestoreRefused(`${path} is damaged: ${badParams}. Nothing was changed.`)
  const keys = deriveKeys(passphrase, m.configuration.encryption)
  const plain = unseal(sealed, keys, m.configuration.encryption)
  if (!plain)
    throw new RestoreRefused(
      'the passphrase is wrong: it does not open the backup’s configuration. Nothing was changed.',
    )
  if (!sameMac(macOf(keys, macText(m)), m.mac))
    throw new RestoreRefused(
      `${path}'s manifest was changed after the backup was made (its MAC does not match). Nothing was changed.`,
    )
  const newer = versionProblem(m, release)
  if (newer) throw new RestoreRefused(`${newer}. Nothing was changed.`)
  return {
    manifest: m,
    configuration: (JSON.parse(plain.toString('utf8')) as { files: Record<string, string> }).files,
    objectDigests,
  }
}

/** Whether the database holds anything of its own (a table, view or sequence in public). */
async function databaseInUse(db: DatabaseAccess): Promise<number> {
  return Number(
    await pgValue(
      db,
      "select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'S')",
    ),
  )
}

async function* keysOf(client: Client, bucket: string): AsyncGenerator<string> {
  for await (const o of client.listObjectsV2(bucket, '', true) as AsyncIterable<{ name?: string }>)
    if (o.name !== undefined) yield o.name
}

/** Whether the bucket has an object (a missing one has none: the restore makes it). */
async function storeInUse(client: Client, store: Store): Promise<boolean> {
  try {
    if (!(await client.bucketExists(store.bucket))) return false
    for await (const _ of keysOf(client, store.bucket)) return true
    return false
  } catch (err) {
    throw new SiteDataError(
      `cannot use the bucket ${store.bucket} at ${store.endpoint}: ${(err as { code?: string }).code ?? (err as Error).message}`,
    )
  }
}

async function emptyStore(client: Client, store: Store): Promise<void> {
  let batch: string[] = []
  for await (const key of keysOf(client, store.bucket)) {
    batch.push(key)
    if (batch.length === 1000) {
      await client.removeObjects(store.bucket, batch)
      batch = []
    }
  }
  if (batch.length) await client.removeObjects(store.bucket, batch)
}

/** The chunks as they come, then an error instead of the end when their SHA-256 is not the one expected. */
async function* checked(
  body: AsyncIterable<Buffer>,
  matches: (digest: Buffer) => boolean,
  error: () => Error,
): AsyncGenerator<Buffer> {
  const hash = createHash('sha256')
  for await (const c of body) {
    hash.update(c)
    yield c
  }
  if (!matches(hash.digest())) throw error()
}

/** The chunks one behind: the last is given only once the whole is known to match `sha256`. */
async function* heldBack(body: AsyncIterable<Buffer>, sha256: string, error: () => Error): AsyncGenerator<Buffer> {
  const hash = createHash('sha256')
  let last: Buffer | null = null
  for await (const c of body) {
    hash.update(c)
    if (last) yield last
    last = Buffer.from(c) // the reader's chunk may be a view of a buffer it reuses
  }
  if (hash.digest('hex') !== sha256) throw error()
  if (last) yield last
}

/** The roles the schema grants to (migration 0001 makes them); a new PostgreSQL server has neither. */
const ROLES_SQL = `do $$ begin
  if not exists (select from pg_roles where rolname = 'atrium_app') then create role atrium_app nologin; end if;
  if not exists (select from pg_roles where rolname = 'atrium_system') then create role atrium_system nologin; end if;
end $$; grant atrium_app, atrium_system to current_user; select 1`

export interface RestoreOptions {
  passphrase: string
  /** Empty a target that is not empty (its data is lost). */
  force?: boolean
  release?: { version: string; schema: number }
  onProgress?: (p: { objects: number; objectBytes: number; phase: 'objects' | 'database' | 'done' }) => void
}

/** A backup verified and a target found fit for it: what applyRestore needs. */
export interface PreparedRestore extends VerifiedBackup {
  /** What the target holds (relations in public; buckets with objects), which --force deletes. */
  inUse: { relations: number; stores: string[] }
}

/**
 * Everything a restore checks, before anything changes: the archive (verifyBackup), the tools, the target. Throws
 * RestoreRefused.
 */
export async function prepareRestore(site: SiteServices, path: string, o: RestoreOptions): Promise<PreparedRestore> {
  const verified = await verifyBackup(path, o.passphrase, o.release)
  const m = verified.manifest
  const db = site.database
  const names = new Set(site.stores.map((s) => s.name))
  const missing = m.objects.stores.filter((s) => s.count > 0 && !names.has(s.name)).map((s) => s.name)
  if (missing.length)
    throw new RestoreRefused(
      `the backup holds objects of ${missing.join(', ')}, a store this site does not configure (REGION_STORES): add it first. Nothing was changed.`,
    )
  const restoreTool = await toolMajor(db, 'pg_restore')
  const dumpMajor = parseVersion(m.database.dumpedWith)?.[0] ?? 0
  if (restoreTool.major < dumpMajor)
    throw new RestoreRefused(
      `the dump was made by ${m.database.dumpedWith}; pg_restore ${restoreTool.major} cannot read it: install PostgreSQL ${dumpMajor}'s client tools. Nothing was changed.`,
    )
  const server = Number(await pgValue(db, "select current_setting('server_version_num')"))
  if (Math.floor(server / 10_000) < Math.floor(m.database.serverVersion / 10_000))
    throw new RestoreRefused(
      `the backup is of PostgreSQL ${Math.floor(m.database.serverVersion / 10_000)} and ${db.where} runs PostgreSQL ${Math.floor(server / 10_000)}: restore into PostgreSQL ${Math.floor(m.database.serverVersion / 10_000)} or newer. Nothing was changed.`,
    )
  const relations = await databaseInUse(db)
  const used: string[] = []
  for (const s of site.stores) if (await storeInUse(s3Of(s), s)) used.push(s.name)
  if ((relations || used.length) && !o.force) {
    const buckets = site.stores.filter((s) => used.includes(s.name)).map((s) => s.bucket)
    const what = [
      relations ? `the database ${db.where} has ${relations} tables, views or sequences` : '',
      used.length ? `the bucket ${buckets.join(', ')} has objects` : '',
    ]
      .filter(Boolean)
      .join(' and ')
    throw new RestoreRefused(
      `the target is not empty: ${what}. Restore into an empty site, or pass --force to delete what is there first. Nothing was changed.`,
    )
  }
  return { ...verified, inUse: { relations, stores: used } }
}

/** Verifies, checks the target, then restores; see the file's comment. */
export async function restoreBackup(site: SiteServices, path: string, o: RestoreOptions): Promise<PreparedRestore> {
  const prepared = await prepareRestore(site, path, o)
  await applyRestore(site, path, prepared, o)
  return prepared
}

/** Empties what --force allowed, then puts the archive's objects and database in place. */
export async function applyRestore(
  site: SiteServices,
  path: string,
  prepared: PreparedRestore,
  o: Pick<RestoreOptions, 'onProgress'> = {},
): Promise<void> {
  const db = site.database
  const stores = new Map(site.stores.map((s) => [s.name, s]))
  const clients = new Map(site.stores.map((s) => [s.name, s3Of(s)]))
  // A new database's public schema, as PostgreSQL 15 makes it: everyone may use it (the dump
  // leaves that default out, and atrium_app must reach its tables).
  if (prepared.inUse.relations)
    await pgValue(
      db,
      'drop schema public cascade; create schema public; grant usage on schema public to public; select 1',
    )
  for (const name of prepared.inUse.stores) await emptyStore(clients.get(name)!, stores.get(name)!)
  const progress = { objects: 0, objectBytes: 0, phase: 'objects' as 'objects' | 'database' | 'done' }
  const m = prepared.manifest
  // The archive is read again, so every byte is checked again as it goes (the file may have changed
  // since the first read): an object before its upload completes, the dump before pg_restore gets
  // its last chunk (without which it commits nothing).
  const wrong = (what: string) =>
    new SiteDataError(`${path} changed after it was verified: ${what} differs from the first read`)
  try {
    for (const s of site.stores)
      if (!(await clients.get(s.name)!.bucketExists(s.bucket)))
        await clients.get(s.name)!.makeBucket(s.bucket, s.region)
    await pgValue(db, ROLES_SQL)
    let index = 0
    for await (const e of readTar(open(path))) {
      if (e.name.startsWith(PART.objects)) {
        const rest = e.name.slice(PART.objects.length)
        const store = rest.slice(0, rest.indexOf('/'))
        const key = rest.slice(store.length + 1)
        const target = stores.get(store)!
        const expected = prepared.objectDigests.get(index++)
        await putStream(
          clients.get(store)!,
          target.bucket,
          key,
          checked(
            e.body,
            (d) => d.equals(expected ?? Buffer.alloc(0)),
            () => wrong(`the object ${key}`),
          ),
          e.attributes['user.mime_type'] ?? 'application/octet-stream',
        )
        progress.objects++
        progress.objectBytes += e.size
        o.onProgress?.(progress)
      } else if (e.name === PART.database) {
        progress.phase = 'database'
        o.onProgress?.(progress)
        const c = db.command('pg_restore', [
          '--single-transaction',
          '--exit-on-error',
          '--no-owner',
          '--enable-row-security',
          '--no-password',
        ])
        const restore = runStreaming(c.file, c.args, { env: c.env, stdin: true })
        const fed = await pipeline(
          Readable.from(heldBack(e.body, m.database.sha256, () => wrong('the database dump'))),
          restore.stdin!,
        ).catch((err: Error) => err)
        if (fed instanceof SiteDataError) restore.kill() // its transaction is never committed
        const ended = await restore.done
        if (fed instanceof SiteDataError) throw fed
        if (ended.exitCode !== 0 || fed)
          throw new SiteDataError(
            `pg_restore failed on ${db.where}: ${ended.stderr || fed?.message || `exit ${ended.exitCode}`}`,
          )
      } else if (e.name === PART.manifest && e.archiveBefore !== m.archive.sha256) throw wrong('the archive')
    }
  } catch (err) {
    // The target was empty before this restore (or emptied by --force): leave it so, not half-filled.
    for (const s of site.stores) await emptyStore(clients.get(s.name)!, s).catch(() => {})
    await pgValue(
      db,
      'drop schema public cascade; create schema public; grant usage on schema public to public; select 1',
    ).catch(() => {})
    throw err
  }
  progress.phase = 'done'
  o.onProgress?.(progress)
}
