// What a restore refuses, each before anything changes: a damaged or truncated archive, a wrong
// passphrase, an edited manifest, an archive from a newer release or schema, a target that is not
// empty; and what --force does. On the real PostgreSQL and MinIO, with a small site of its own.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { VERSION } from '../../../common/version.js'
import { writeBackup, type BackupOptions } from '../../../installer/backup/backup.js'
import { applyRestore, prepareRestore, restoreBackup, verifyBackup } from '../../../installer/backup/restore.js'
import { freshBucket, freshDatabase, s3Client, services, tempDir } from '../../helpers/platform.js'
import type { SiteServices } from '../../../installer/backup/site.js'
import { directSite, snapshot } from '../../helpers/site-data.js'

const PASSPHRASE = 'a passphrase of some length'
const real = Boolean(services.databaseUrl && services.s3Endpoint)

/**
 * A small site: two tables (one with row-level security forced, as Atrium's are), the migrations table, three objects.
 */
async function smallSite(t: Test) {
  const databaseUrl = await freshDatabase(t)
  const bucket = await freshBucket(t)
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  await sql.unsafe(`
    create table atrium_migrations (version integer primary key, name text not null, checksum text not null, applied_at timestamptz not null default now());
    insert into atrium_migrations (version, name, checksum) select v, 'm' || v, 'c' from generate_series(1, 15) v;
    create table notes (id serial primary key, body text, at timestamptz default now());
    insert into notes (body) select 'note ' || i from generate_series(1, 500) i;
    create table secrets (id int primary key, tenant text, value bytea);
    alter table secrets enable row level security; alter table secrets force row level security;
    insert into secrets values (1, 'a', '\\x00ff'), (2, 'b', '\\xdead');`)
  await sql.end()
  const s3 = s3Client()
  await s3.makeBucket(bucket)
  for (const [k, v] of [
    ['tenants/a/one.zip', 'one'],
    ['tenants/b/ünï code.txt', 'two'],
    ['x/'.repeat(60) + 'deep', 'three'],
  ] as const)
    await s3.putObject(bucket, k, Buffer.from(v))
  return { databaseUrl, bucket, site: directSite(databaseUrl, bucket) }
}

/** A backup of `site` at `output`, with PASSPHRASE; a Compose site's unless `over` says otherwise. */
const backupOf = (site: SiteServices, output: string, over: Partial<BackupOptions> = {}) =>
  writeBackup(site, { output, passphrase: PASSPHRASE, configuration: { '.env': 'X=1\n' }, target: 'compose', ...over })

/** A new site's empty database and bucket. */
const emptyTarget = async (t: Test) => {
  const databaseUrl = await freshDatabase(t)
  const bucket = await freshBucket(t)
  await s3Client().makeBucket(bucket)
  return { databaseUrl, bucket, site: directSite(databaseUrl, bucket) }
}

t.test(
  'refusals on real services',
  { skip: !real && 'needs TEST_DATABASE_URL and TEST_S3_ENDPOINT (a real PostgreSQL and S3)' },
  async (t) => {
    const source = await smallSite(t)
    const dir = tempDir(t)
    const path = join(dir, 'site.tar')
    await backupOf(source.site, path)
    const whole = readFileSync(path)
    const target = await emptyTarget(t)
    const pristine = await snapshot(target.databaseUrl, target.bucket)
    t.same(pristine, { tables: {}, objects: {} })
    const refused = async (
      name: string,
      archive: Buffer | string,
      pattern: RegExp,
      o: Partial<Parameters<typeof restoreBackup>[2]> = {},
    ) => {
      const file = typeof archive === 'string' ? archive : join(dir, `${name}.tar`)
      if (typeof archive !== 'string') writeFileSync(file, archive)
      await t.rejects(
        restoreBackup(target.site, file, { passphrase: PASSPHRASE, ...o }),
        { name: 'RestoreRefused', message: pattern },
        name,
      )
      t.same(await snapshot(target.databaseUrl, target.bucket), pristine, `${name}: nothing changed`)
    }

    for (const at of [600, Math.floor(whole.length / 2), whole.length - 3000]) {
      const damaged = Buffer.from(whole)
      damaged[at]! ^= 0x20
      await refused(`one byte changed at ${at}`, damaged, /damaged/)
    }
    await refused('truncated', whole.subarray(0, whole.length - 5000), /damaged: .*truncated/)
    await refused('a wrong passphrase', path, /passphrase is wrong/, { passphrase: 'not the passphrase at all' })
    const text = whole.toString('latin1')
    const edited = Buffer.from(
      text.replace('"target":"compose"', '"target":"c0mpose"').replace('"target": "compose"', '"target": "c0mpose"'),
      'latin1',
    )
    t.not(edited.toString('latin1'), text)
    await refused('an edited manifest', edited, /manifest was changed/)
    await refused('a newer Atrium', path, /from Atrium .* newer than this installer's 0\.0\.1/, {
      release: { version: '0.0.1', schema: 99 },
    })
    await refused('a newer schema', path, /schema is version 15, newer than this release's 14/, {
      release: { version: VERSION, schema: 14 },
    })
    const sourceBefore = await snapshot(source.databaseUrl, source.bucket)
    await t.rejects(restoreBackup(source.site, path, { passphrase: PASSPHRASE }), {
      name: 'RestoreRefused',
      message:
        /the target is not empty: the database .* has \d+ tables, views or sequences and the bucket .* has objects\. .*--force/,
    })
    t.same(await snapshot(source.databaseUrl, source.bucket), sourceBefore, 'a non-empty target: nothing changed')

    // A good restore into the empty target, then --force over a site that changed since.
    await restoreBackup(target.site, path, { passphrase: PASSPHRASE })
    t.same(await snapshot(target.databaseUrl, target.bucket), sourceBefore)
    const sql = postgres(target.databaseUrl, { max: 1, onnotice: () => {} })
    await sql.unsafe(`insert into notes (body) values ('written after the backup'); create table extra (x int)`)
    await sql.end()
    await s3Client().putObject(target.bucket, 'written-after', Buffer.from('late'))
    const forced = await restoreBackup(target.site, path, { passphrase: PASSPHRASE, force: true })
    t.ok(forced.inUse.relations > 0)
    t.same(
      await snapshot(target.databaseUrl, target.bucket),
      sourceBefore,
      '--force: the target is exactly the backup again',
    )
    t.ok(await verifyBackup(path, PASSPHRASE), 'the archive itself still verifies')

    // An archive that changes after it was verified (another backup written over it) is caught in
    // the second read, and the target is left empty rather than half-restored.
    const other = await smallSite(t)
    await s3Client().putObject(other.bucket, 'tenants/a/one.zip', Buffer.from('ONE')) // same size, other bytes
    const swapped = join(dir, 'swapped.tar')
    await backupOf(other.site, swapped)
    const fresh = await emptyTarget(t)
    const prepared = await prepareRestore(fresh.site, path, { passphrase: PASSPHRASE })
    writeFileSync(path, readFileSync(swapped))
    await t.rejects(applyRestore(fresh.site, path, prepared), {
      name: 'SiteDataError',
      message: /changed after it was verified: the object tenants\/a\/one\.zip differs/,
    })
    t.same(await snapshot(fresh.databaseUrl, fresh.bucket), { tables: {}, objects: {} }, 'left empty')
  },
)

t.test(
  'the backup records the version the site runs, which that release restores',
  { skip: !real && 'needs TEST_DATABASE_URL and TEST_S3_ENDPOINT (a real PostgreSQL and S3)' },
  async (t) => {
    const source = await smallSite(t)
    const path = join(tempDir(t), 'site.tar')
    const made = await backupOf(source.site, path, { configuration: {}, target: 'helm', version: '0.0.9' })
    t.equal(made.manifest.atriumVersion, '0.0.9')
    t.equal(
      (await verifyBackup(path, PASSPHRASE, { version: '0.0.9', schema: 15 })).manifest.atriumVersion,
      '0.0.9',
      "the 0.0.9 installer takes its site's backup",
    )
    await t.rejects(verifyBackup(path, PASSPHRASE, { version: '0.0.8', schema: 15 }), { name: 'RestoreRefused' })
  },
)
