// The installer's site backup and restore (installer/backup/) on the real PostgreSQL and S3 store:
// BENCH_SITE_ROWS rows (default 1,000,000) and BENCH_SITE_MB of objects (default 1024, in objects
// of 8 MiB, random so nothing compresses them). Each side runs in its own process
// (bench/site-backup-worker.ts), which reports its time and peak RSS:
// - backup: `installer backup`'s code, against the baseline: pg_dump -Fc to a file, then a plain
//   copy of every object to a folder (the same S3 client, the same 4 requests ahead);
// - restore into an empty database and bucket: `installer restore`'s code (which reads the archive
//   twice: it verifies every byte before it changes anything), against the baseline: pg_restore
//   of that dump, then a plain upload of those files.
// Goals: within 1.5x of the baselines' time, peak RSS under 256 MB.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { s3Of } from '../installer/backup/backup.js'
import { printTable, ROOT } from './lib.js'

const MB = 1024 * 1024
const ROWS = Number(process.env.BENCH_SITE_ROWS ?? 1_000_000)
const OBJECT_MB = Number(process.env.BENCH_SITE_MB ?? 1024)
const OBJECT_SIZE = 8 * MB

export interface SiteBackupBench {
  rows: number
  objectBytes: number
  archiveBytes: number
  backup: Measured
  baselineBackup: Measured
  restore: Measured
  baselineRestore: Measured
}

export interface Measured {
  seconds: number
  rssMb: number
}

export interface SiteTarget {
  databaseUrl: string
  endpoint: string
  bucket: string
  accessKey: string
  secretKey: string
}

/** One side in a process of its own: its time and its peak RSS, as the worker reports them. */
function worker(task: string, target: SiteTarget, path: string): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'bench/site-backup-worker.ts'), task, JSON.stringify(target), path],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.on('close', (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim().split('\n').at(-1)!) as Measured)
        : reject(new Error(`${task} exited ${code}`)),
    )
  })
}

export async function benchSiteBackup(env: Record<string, string>): Promise<SiteBackupBench> {
  const endpoint = process.env.BENCH_S3_ENDPOINT ?? env.R2_ENDPOINT ?? 'http://127.0.0.1:9000'
  const accessKey = process.env.BENCH_S3_ACCESS_KEY ?? env.R2_ACCESS_KEY_ID ?? 'dev'
  const secretKey = process.env.BENCH_S3_SECRET_KEY ?? env.R2_SECRET_ACCESS_KEY ?? 'devdevdevdev'
  const admin = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  const s3 = s3Of({ name: 'default', endpoint, bucket: '', accessKey, secretKey, region: 'us-east-1' })
  const suffix = randomBytes(4).toString('hex')
  const dbUrl = (name: string) => Object.assign(new URL(env.DATABASE_URL!), { pathname: `/${name}` }).toString()
  const names = ['source', 'restored', 'baseline'].map((n) => `bench_site_${n}_${suffix}`)
  const buckets = names.map((n) => n.replace(/_/g, '-'))
  const targets = names.map((n, i): SiteTarget => ({
    databaseUrl: dbUrl(n),
    endpoint,
    bucket: buckets[i]!,
    accessKey,
    secretKey,
  }))
  const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-site-'))
  try {
    for (const [i, n] of names.entries()) {
      await admin.unsafe(`create database ${n}`)
      await s3.makeBucket(buckets[i]!)
    }
    const source = postgres(targets[0]!.databaseUrl, { max: 1, onnotice: () => {} })
    await source.unsafe(`create table events (id bigserial primary key, tenant_id uuid not null, kind text not null, payload jsonb not null, created_at timestamptz not null default now());
      insert into events (tenant_id, kind, payload) select md5((i % 50)::text)::uuid, 'project.updated', jsonb_build_object('project', md5(i::text), 'n', i, 'note', repeat('x', 40)) from generate_series(1, ${ROWS}) i;
      create index on events (tenant_id, created_at);`)
    await source.end()
    const body = randomBytes(OBJECT_SIZE)
    const objects = Math.max(1, Math.round(OBJECT_MB / 8))
    for (let i = 0; i < objects; i++) {
      body.writeUInt32BE(i, 0) // each object its own bytes
      await s3.putObject(buckets[0]!, `tenants/t${i % 4}/backups/${i}.bin`, body, body.length)
    }
    const archive = join(dir, 'site.tar')
    const backup = await worker('backup', targets[0]!, archive)
    const baselineBackup = await worker('baseline-backup', targets[0]!, join(dir, 'baseline'))
    const restore = await worker('restore', targets[1]!, archive)
    const baselineRestore = await worker('baseline-restore', targets[2]!, join(dir, 'baseline'))
    return {
      rows: ROWS,
      objectBytes: objects * OBJECT_SIZE,
      archiveBytes: statSync(archive).size,
      backup,
      baselineBackup,
      restore,
      baselineRestore,
    }
  } finally {
    for (const n of names) await admin.unsafe(`drop database if exists ${n} with (force)`)
    await admin.end()
    for (const b of buckets) {
      if (!(await s3.bucketExists(b))) continue
      const keys: string[] = []
      for await (const o of s3.listObjectsV2(b, '', true) as AsyncIterable<{ name: string }>) keys.push(o.name)
      for (let i = 0; i < keys.length; i += 1000) await s3.removeObjects(b, keys.slice(i, i + 1000))
      await s3.removeBucket(b)
    }
    rmSync(dir, { recursive: true, force: true })
  }
}

export function printSiteBackup(b: SiteBackupBench): void {
  const row = (what: string, m: Measured, base?: Measured) => [
    what,
    m.seconds.toFixed(1),
    base ? `${(m.seconds / base.seconds).toFixed(2)}x` : '',
    String(m.rssMb),
  ]
  console.log(
    `\nsite backup and restore (installer): ${b.rows.toLocaleString('en')} rows, ${(b.objectBytes / MB).toFixed(0)} MB of objects; archive ${(b.archiveBytes / MB).toFixed(0)} MB`,
  )
  printTable([
    ['', 'seconds', 'vs baseline', 'peak RSS MB'],
    row('baseline backup: pg_dump -Fc + plain copy of the bucket', b.baselineBackup),
    row('installer backup', b.backup, b.baselineBackup),
    row('baseline restore: pg_restore + plain upload', b.baselineRestore),
    row('installer restore (verify, then restore)', b.restore, b.baselineRestore),
  ])
  console.log('goals: within 1.5x of the baseline, peak RSS under 256 MB')
}
