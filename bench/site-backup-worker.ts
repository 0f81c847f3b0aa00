// One side of bench/site-backup.ts in a process of its own, so that its peak RSS is its own:
//   site-backup-worker.ts backup|restore|baseline-backup|baseline-restore '<target JSON>' <path>
// Prints {"seconds","rssMb"} as its last line.
import { createReadStream, createWriteStream, mkdirSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { spawnSync } from 'node:child_process'
import { putStream } from '../common/s3-upload.js'
import { s3Of, writeBackup } from '../installer/backup/backup.js'
import { restoreBackup } from '../installer/backup/restore.js'
import { directDatabase, libpqEnv, type SiteServices } from '../installer/backup/site.js'
import type { SiteTarget } from './site-backup.js'

const [task, json, path] = process.argv.slice(2) as [string, string, string]
const target = JSON.parse(json) as SiteTarget
const PASSPHRASE = 'the benchmark passphrase'
const site: SiteServices = {
  database: directDatabase(target.databaseUrl),
  stores: [
    {
      name: 'default',
      endpoint: target.endpoint,
      bucket: target.bucket,
      accessKey: target.accessKey,
      secretKey: target.secretKey,
      region: 'us-east-1',
    },
  ],
}
const s3 = s3Of(site.stores[0]!)

function pg(tool: string, args: string[]) {
  const r = spawnSync(tool, args, {
    env: { ...process.env, ...libpqEnv(target.databaseUrl) },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  if (r.status !== 0) throw new Error(`${tool} exited ${r.status}`)
}

const t0 = performance.now()
if (task === 'backup')
  await writeBackup(site, {
    output: path,
    passphrase: PASSPHRASE,
    configuration: { '.env': 'ENCRYPTION_MASTER_KEY=x\n' },
    target: 'compose',
  })
else if (task === 'restore') await restoreBackup(site, path, { passphrase: PASSPHRASE })
else if (task === 'baseline-backup') {
  mkdirSync(join(path, 'objects'), { recursive: true })
  pg('pg_dump', ['--format=custom', '--file', join(path, 'database.dump')])
  // A plain copy: each object to a file, four requests ahead as the backup has.
  const keys: string[] = []
  for await (const o of s3.listObjectsV2(target.bucket, '', true) as AsyncIterable<{ name: string }>) keys.push(o.name)
  let next = 0
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < keys.length) {
        const key = keys[next++]!
        await pipeline(
          await s3.getObject(target.bucket, key),
          createWriteStream(join(path, 'objects', encodeURIComponent(key))),
        )
      }
    }),
  )
} else if (task === 'baseline-restore') {
  pg('pg_restore', [
    '--dbname',
    libpqEnv(target.databaseUrl).PGDATABASE!,
    '--single-transaction',
    '--no-owner',
    join(path, 'database.dump'),
  ])
  for (const name of readdirSync(join(path, 'objects'))) {
    const file = join(path, 'objects', name)
    if (statSync(file).isFile())
      await putStream(
        s3,
        target.bucket,
        decodeURIComponent(name),
        createReadStream(file, { highWaterMark: 1 << 20 }),
        'application/octet-stream',
      )
  }
} else throw new Error(`unknown task ${task}`)
const seconds = (performance.now() - t0) / 1000
console.log(JSON.stringify({ seconds, rssMb: Math.round(process.resourceUsage().maxRSS / 1024) }))
