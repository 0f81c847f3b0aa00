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
import { parseVersion } from '../../common/versions.js'
import { putStream } from '../../common/s3-upload.js'
import { runStreaming } from '../deploy/run.js'
import { SiteDataError, pgValue, s3Of, toolMajor } from './backup.js'
import { PART, macText, parseManifest, versionProblem, type BackupManifest } from './manifest.js'
import { deriveKeys, macOf, sameMac, unseal } from './seal.js'
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
}

const open = (path: string) => createReadStream(path, { highWaterMark: 1 << 20 })

/** Reads the whole archive and checks it; changes nothing. Throws RestoreRefused saying why. */
export async function verifyBackup(path: string, passphrase: string, release = { version: VERSION, schema: SCHEMA_VERSION }): Promise<VerifiedBackup> {
  let sealed: Buffer | null = null
  let manifestText: string | null = null
  let before = ''
  const digests: Record<string, string> = {}
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
      const keep: Buffer[] = []
      for await (const c of e.body) {
        hash.update(c)
        if (e.name === PART.configuration) keep.push(c)
      }
      if (e.name === PART.configuration) sealed = Buffer.concat(keep)
      if (e.name.startsWith(PART.objects)) {
        objects++
        objectBytes += e.size
      } else if (e.name === PART.configuration || e.name === PART.database || e.name === PART.index) digests[e.name] = hash.digest('hex')
      else throw new ArchiveError(`it holds ${e.name}, which an Atrium site backup does not`)
    }
  } catch (err) {
    if (err instanceof ArchiveError) throw new RestoreRefused(`${path} is damaged: ${err.message}. Nothing was changed.`)
    if ((err as NodeJS.ErrnoException).code) throw new RestoreRefused(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code}`)
    throw err
  }
  if (manifestText === null) throw new RestoreRefused(`${path} has no manifest.json: it is not a whole Atrium site backup. Nothing was changed.`)
  const parsed = parseManifest(manifestText)
  if ('problem' in parsed) throw new RestoreRefused(`${path}: ${parsed.problem}. Nothing was changed.`)
  const m = parsed.manifest
  const damaged = (what: string) => new RestoreRefused(`${path} is damaged: ${what} does not match its SHA-256 in the manifest. Nothing was changed.`)
  if (before !== m.archive.sha256) throw damaged('the archive')
  if (digests[PART.configuration] !== m.configuration.sha256 || !sealed) throw damaged('the configuration')
  if (digests[PART.database] !== m.database.sha256) throw damaged('the database dump')
  if (digests[PART.index] !== m.objects.indexSha256) throw damaged('the object index')
  if (objects !== m.objects.count || objectBytes !== m.objects.bytes) throw damaged('the objects')
  const keys = deriveKeys(passphrase, m.configuration.encryption)
  const plain = unseal(sealed, keys, m.configuration.encryption)
  if (!plain) throw new RestoreRefused('the passphrase is wrong: it does not open the backup’s configuration. Nothing was changed.')
  if (!sameMac(macOf(keys, macText(m)), m.mac)) throw new RestoreRefused(`${path}'s manifest was changed after the backup was made (its MAC does not match). Nothing was changed.`)
  const newer = versionProblem(m, release)
  if (newer) throw new RestoreRefused(`${newer}. Nothing was changed.`)
  return { manifest: m, configuration: (JSON.parse(plain.toString('utf8')) as { files: Record<string, string> }).files }
}

/** Whether the database holds anything of its own (a table, view or sequence in public). */
async function databaseInUse(db: DatabaseAccess): Promise<number> {
  return Number(await pgValue(db, "select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'S')"))
}

async function* keysOf(client: Client, bucket: string): AsyncGenerator<string> {
  for await (const o of client.listObjectsV2(bucket, '', true) as AsyncIterable<{ name?: string }>) if (o.name !== undefined) yield o.name
}

/** Whether the bucket has an object; a missing bucket is made (and then empty). */
async function storeInUse(client: Client, store: Store): Promise<boolean> {
  try {
    if (!(await client.bucketExists(store.bucket))) {
      await client.makeBucket(store.bucket, store.region)
      return false
    }
    for await (const _ of keysOf(client, store.bucket)) return true
    return false
  } catch (err) {
    throw new SiteDataError(`cannot use the bucket ${store.bucket} at ${store.endpoint}: ${(err as { code?: string }).code ?? (err as Error).message}`)
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

/** Everything a restore checks, before anything changes: the archive (verifyBackup), the tools, the target. Throws RestoreRefused. */
export async function prepareRestore(site: SiteServices, path: string, o: RestoreOptions): Promise<PreparedRestore> {
  const verified = await verifyBackup(path, o.passphrase, o.release)
  const m = verified.manifest
  const db = site.database
  const names = new Set(site.stores.map((s) => s.name))
  const missing = m.objects.stores.filter((s) => s.count > 0 && !names.has(s.name)).map((s) => s.name)
  if (missing.length) throw new RestoreRefused(`the backup holds objects of ${missing.join(', ')}, a store this site does not configure (REGION_STORES): add it first. Nothing was changed.`)
  const restoreTool = await toolMajor(db, 'pg_restore')
  const dumpMajor = parseVersion(m.database.dumpedWith)?.[0] ?? 0
  if (restoreTool.major < dumpMajor)
    throw new RestoreRefused(`the dump was made by ${m.database.dumpedWith}; pg_restore ${restoreTool.major} cannot read it: install PostgreSQL ${dumpMajor}'s client tools. Nothing was changed.`)
  const relations = await databaseInUse(db)
  const used: string[] = []
  for (const s of site.stores) if (await storeInUse(s3Of(s), s)) used.push(s.name)
  if ((relations || used.length) && !o.force) {
    const buckets = site.stores.filter((s) => used.includes(s.name)).map((s) => s.bucket)
    const what = [relations ? `the database ${db.where} has ${relations} tables, views or sequences` : '', used.length ? `the bucket ${buckets.join(', ')} has objects` : '']
      .filter(Boolean)
      .join(' and ')
    throw new RestoreRefused(`the target is not empty: ${what}. Restore into an empty site, or pass --force to delete what is there first. Nothing was changed.`)
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
export async function applyRestore(site: SiteServices, path: string, prepared: PreparedRestore, o: Pick<RestoreOptions, 'onProgress'> = {}): Promise<void> {
  const db = site.database
  const stores = new Map(site.stores.map((s) => [s.name, s]))
  const clients = new Map(site.stores.map((s) => [s.name, s3Of(s)]))
  // A new database's public schema, as PostgreSQL 15 makes it: everyone may use it (the dump
  // leaves that default out, and atrium_app must reach its tables).
  if (prepared.inUse.relations) await pgValue(db, 'drop schema public cascade; create schema public; grant usage on schema public to public; select 1')
  for (const name of prepared.inUse.stores) await emptyStore(clients.get(name)!, stores.get(name)!)
  await pgValue(db, ROLES_SQL)
  const progress = { objects: 0, objectBytes: 0, phase: 'objects' as 'objects' | 'database' | 'done' }
  try {
    for await (const e of readTar(open(path))) {
      if (e.name.startsWith(PART.objects)) {
        const rest = e.name.slice(PART.objects.length)
        const store = rest.slice(0, rest.indexOf('/'))
        const key = rest.slice(store.length + 1)
        const target = stores.get(store)!
        await putStream(clients.get(store)!, target.bucket, key, e.body, e.attributes['user.mime_type'] ?? 'application/octet-stream')
        progress.objects++
        progress.objectBytes += e.size
        o.onProgress?.(progress)
      } else if (e.name === PART.database) {
        progress.phase = 'database'
        o.onProgress?.(progress)
        const c = db.command('pg_restore', ['--single-transaction', '--exit-on-error', '--no-owner', '--enable-row-security', '--no-password'])
        const restore = runStreaming(c.file, c.args, { env: c.env, stdin: true })
        const fed = await pipeline(Readable.from(e.body), restore.stdin!).catch((err: Error) => err)
        const ended = await restore.done
        if (ended.exitCode !== 0) throw new SiteDataError(`pg_restore failed on ${db.where}; the database is unchanged (one transaction): ${ended.stderr || fed?.message || `exit ${ended.exitCode}`}`)
      }
    }
  } catch (err) {
    // The target was empty before this restore (or emptied by --force): leave it so, not half-filled.
    for (const s of site.stores) await emptyStore(clients.get(s.name)!, s).catch(() => {})
    throw err
  }
  progress.phase = 'done'
  o.onProgress?.(progress)
}
