// A backup written where the disk fills: on a 1 MB tmpfs, against the real PostgreSQL (pg_dump) and
// MinIO. The failure is said as the disk's (where, how much is free, how much the backup had
// written), never blamed on pg_dump or the store, and nothing is left behind.
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { SiteDataError, writeBackup, writeFailure } from '../../../installer/backup/backup.js'
import { freshBucket, freshDatabase, s3Client, services, tempDir } from '../../helpers/platform.js'
import { directSite } from '../../helpers/site-data.js'

const PASSPHRASE = 'correct horse battery staple'

/** Why a tmpfs cannot be mounted here (not root, or no right to mount in this container), or false. */
function mountProblem(): false | string {
  if (process.getuid?.() !== 0) return 'needs root to mount a small tmpfs'
  const dir = join(tempDir(t), 'probe')
  execFileSync('mkdir', [dir])
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { encoding: 'utf8' })
  if (r.status !== 0) return `cannot mount a tmpfs here: ${r.stderr.trim() || `mount exit ${r.status}`}`
  spawnSync('umount', [dir])
  return false
}

const skip =
  (!(services.databaseUrl && services.s3Endpoint) &&
    'needs TEST_DATABASE_URL and TEST_S3_ENDPOINT (a real PostgreSQL and S3)') ||
  mountProblem()

/** A folder on a tmpfs of `size` bytes, unmounted when the test ends. */
function smallDisk(t: Test, size: number): string {
  const dir = join(tempDir(t), 'disk')
  execFileSync('mkdir', [dir])
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir])
  t.teardown(() => void spawnSync('umount', [dir]))
  return dir
}

/** A database of `bytes` of random (incompressible) data, and a bucket holding `objectBytes` of random object. */
async function site(t: Test, bytes: number, objectBytes: number) {
  const databaseUrl = await freshDatabase(t)
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  await sql`create table filler (data bytea)`
  if (bytes) await sql`insert into filler values (${randomBytes(bytes)})`
  await sql.end()
  const bucket = await freshBucket(t)
  await s3Client().makeBucket(bucket, 'us-east-1')
  if (objectBytes) await s3Client().putObject(bucket, 'big.bin', randomBytes(objectBytes))
  return directSite(databaseUrl, bucket)
}

const backupTo = (dir: string, s: Awaited<ReturnType<typeof site>>) =>
  writeBackup(s, { output: join(dir, 'site.tar'), passphrase: PASSPHRASE, configuration: {}, target: 'compose' })

const FULL =
  /^the disk is full at (\S+): (\d+\.\d) MB free there \(the backup's partial files removed\), and the backup needs up to (\d+\.\d) MB: the objects \((\d+\.\d) MB\) and twice the database's dump while it is copied into the archive \(the tables take (\d+\.\d) MB in PostgreSQL/

/** The error said as a full disk at `disk` (1 MB), needing what the objects and twice the database take. */
function fullDisk(t: Test, err: unknown, disk: string, objects: number) {
  t.type(err, SiteDataError)
  const m = FULL.exec((err as Error).message)
  t.ok(m, (err as Error).message)
  const [, dir, free, needed, listed, database] = m ?? []
  t.equal(dir, disk, 'the folder the backup was written to')
  t.ok(Number(free) <= 1, `free ${free} MB of the 1 MB disk`)
  t.equal(listed, (objects / 1_048_576).toFixed(1), 'the objects as listed')
  // Each number is rounded to 0.1 MB on its own.
  t.ok(
    Math.abs(Number(needed) - (Number(listed) + 2 * Number(database))) <= 0.15,
    `needed ${needed} MB: the objects and twice the tables`,
  )
  t.ok(Number(needed) > Number(free), 'more than the disk has')
  t.same(readdirSync(disk), [], 'no partial archive, dump or index left')
}

t.test(
  'a disk that fills during the database dump is said as the disk (where, how much is free and needed), not pg_dump, and nothing is left',
  { skip },
  async (t) => {
    const s = await site(t, 3 * 1_048_576, 0)
    const room = await backupTo(tempDir(t), s)
    t.ok(room.bytes > 3 * 1_048_576, 'where there is room, the same backup is written whole')

    const disk = smallDisk(t, 1_048_576)
    const err = await backupTo(disk, s).catch((e: unknown) => e)
    fullDisk(t, err, disk, 0)
    t.notMatch((err as Error).message, /pg_dump/, 'not blamed on pg_dump')
  },
)

t.test('a disk that fills while the objects are copied is said as the disk, not the store', { skip }, async (t) => {
  const s = await site(t, 0, 3 * 1_048_576)
  const disk = smallDisk(t, 1_048_576)
  fullDisk(t, await backupTo(disk, s).catch((e: unknown) => e), disk, 3 * 1_048_576)
})

t.test(
  'other write errors name the folder and the system error; errors of the services are left as they are',
  async (t) => {
    const dir = '/srv/backups'
    const needed = { databaseBytes: 10, objects: { bytes: 10, complete: true } }
    const readOnly = Object.assign(new Error("EROFS: read-only file system, open '/srv/backups/x.partial'"), {
      code: 'EROFS',
      syscall: 'open',
    })
    t.equal(
      writeFailure(readOnly, dir, needed)?.message,
      "cannot write the backup in /srv/backups: EROFS: read-only file system, open '/srv/backups/x.partial'",
    )
    t.equal(writeFailure(Object.assign(new Error('reset'), { code: 'ECONNRESET', syscall: 'read' }), dir, needed), null)
    t.equal(writeFailure(Object.assign(new Error('gone'), { code: 'NoSuchBucket' }), dir, needed), null)
    t.equal(writeFailure(new SiteDataError('pg_dump failed'), dir, needed), null)
  },
)
