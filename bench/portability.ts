// Export and restore of a large tenant on the real server (PostgreSQL, Redis, and the S3 store of
// BENCH_S3_ENDPOINT, or the local store under DATA_DIR when it is unset): BENCH_PORTABILITY_MB of
// file bytes (default 1024) in files of 8 MiB spread over 4 projects, put through the API.
// - Export: POST .../export to the job's completion, against the baseline: the same bytes read from
//   the store and written back to it as one object, by this process through the same store client.
// - Restore: the archive uploaded (timed apart), then POST .../restore (merge=false into an empty
//   tenant) to the job's completion, against the baseline: the archive's bytes copied to a new
//   object the same way.
// Reported: seconds, MB/s, the ratio to the baseline (goal 0.8 or more), the server's peak RSS
// (goal under 256 MB).
import { randomBytes } from 'node:crypto'
import { PassThrough, Readable } from 'node:stream'
import { join } from 'node:path'
import postgres from 'postgres'
import { openLocalBlobs, openS3Blobs, type Blobs } from '../server/platform/blobs.js'
import { apiCaller, createTenant, peakRssMb, printTable, start, stop } from './lib.js'

const MB = 1024 * 1024
const TOTAL_MB = Number(process.env.BENCH_PORTABILITY_MB ?? 1024)
const FILE_MB = 8
const PROJECTS = 4

export interface PortabilityBench {
  store: 's3' | 'local'
  bytes: number
  files: number
  export: { seconds: number; archiveBytes: number; baselineSeconds: number }
  upload: { seconds: number }
  restore: { seconds: number; baselineSeconds: number }
  idleRssMb: number
  /** The server's peak RSS after the export, after the upload, and at the end (after the restore). */
  exportRssMb: number
  uploadRssMb: number
  peakRssMb: number
}

/** The store the server uses, opened by this process for the baselines. */
async function storeOf(env: Record<string, string>): Promise<Blobs> {
  if (env.R2_ENDPOINT) {
    return openS3Blobs({
      endpoint: env.R2_ENDPOINT,
      bucket: env.R2_BUCKET!,
      accessKey: env.R2_ACCESS_KEY_ID!,
      secretKey: env.R2_SECRET_ACCESS_KEY!,
      region: 'us-east-1',
    })
  }
  return openLocalBlobs({
    dir: join(env.DATA_DIR!, 'blobs'),
    publicUrl: 'http://127.0.0.1',
    signingKey: randomBytes(32),
  })
}

/** Baseline: objects read one after another and written as one object to the same store. */
async function rawCopy(blobs: Blobs, keys: string[], to: string): Promise<number> {
  const t0 = performance.now()
  const body = new PassThrough({ highWaterMark: 4 * MB })
  const put = blobs.put(to, body, 'application/octet-stream')
  for (const key of keys) {
    for await (const chunk of await blobs.get(key))
      if (!body.write(chunk)) await new Promise((r) => body.once('drain', r))
  }
  body.end()
  await put
  const seconds = (performance.now() - t0) / 1000
  await blobs.remove(to)
  return seconds
}

async function until<T>(what: string, probe: () => Promise<T | null>): Promise<T> {
  for (;;) {
    const v = await probe()
    if (v !== null) return v
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(what)
}

export async function benchPortability(base: Record<string, string>): Promise<PortabilityBench> {
  const env = { ...base }
  const s3 = process.env.BENCH_S3_ENDPOINT
  if (s3) {
    Object.assign(env, {
      R2_ENDPOINT: s3,
      R2_BUCKET: `atrium-bench-${randomBytes(4).toString('hex')}`,
      R2_ACCESS_KEY_ID: process.env.BENCH_S3_ACCESS_KEY ?? 'minioadmin',
      R2_SECRET_ACCESS_KEY: process.env.BENCH_S3_SECRET_KEY ?? 'minioadmin',
    })
  }
  const serverEnv = { ...env, RESTORE_MAX_UPLOAD_BYTES: String(4 * TOTAL_MB * MB) }
  // One server puts the files (each upload is held whole in memory), another, fresh, exports and
  // restores: its peak RSS is theirs.
  const seeder = await start('server/main.ts', serverEnv)
  const blobs = await storeOf(env)
  const owner = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  let server = seeder
  try {
    const source = await createTenant(env, ['--plan', 'enterprise'])
    let call = apiCaller(server.base, source.apiKey)
    const files = Math.ceil(TOTAL_MB / FILE_MB)
    for (let p = 0; p < PROJECTS; p++) {
      const { id } = await call('POST', '/api/v1/projects', { name: `Bench ${p}` })
      for (let f = p; f < files; f += PROJECTS) {
        const r = await fetch(`${server.base}/api/v1/projects/${id}/files/data/file-${f}.bin`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${source.apiKey}`, 'content-type': 'application/octet-stream' },
          body: randomBytes(FILE_MB * MB),
        })
        if (r.status !== 201) throw new Error(`file: ${r.status} ${await r.text()}`)
      }
    }
    const keys = (
      await owner<
        { blob_key: string }[]
      >`select blob_key from project_files where tenant_id = ${source.tenantId} order by project_id, path`
    ).map((r) => r.blob_key)
    const bytes = files * FILE_MB * MB
    await stop(seeder)
    server = await start('server/main.ts', serverEnv)
    call = apiCaller(server.base, source.apiKey)
    const idleRssMb = peakRssMb(server.child.pid!)

    // Export.
    const exports = `/api/v1/platform/tenants/${source.tenantId}/export`
    const t0 = performance.now()
    const asked = await call<{ exportId: string }>('POST', exports, { format: 'zip' })
    const done = await until('export', async () => {
      const j = await call<{ status: string; size: number; downloadUrl: string }>('GET', `${exports}/${asked.exportId}`)
      if (j.status === 'failed') throw new Error(`export failed: ${JSON.stringify(j)}`)
      return j.status === 'completed' ? j : null
    })
    const exportSeconds = (performance.now() - t0) / 1000
    const exportRssMb = peakRssMb(server.child.pid!)
    const exportBaseline = await rawCopy(blobs, keys, `bench/copy-${randomBytes(4).toString('hex')}`)
    const [row] = await owner<
      { object_key: string }[]
    >`select object_key from tenant_exports where id = ${asked.exportId}`

    // Restore: the archive uploaded into an empty tenant, then restored.
    const target = await createTenant(env, ['--plan', 'enterprise'])
    const boundary = `----atrium-bench-${randomBytes(6).toString('hex')}`
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="options"\r\n\r\n{"merge":false}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="export.zip"\r\nContent-Type: application/zip\r\n\r\n`,
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    const archive = await blobs.get(row!.object_key)
    const form = Readable.from(
      (async function* () {
        yield head
        yield* archive
        yield tail
      })(),
    )
    const t1 = performance.now()
    const upload = await fetch(`${server.base}/api/v1/platform/tenants/${target.tenantId}/restore`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${target.apiKey}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
      },
      body: form as unknown as BodyInit,
      duplex: 'half',
    } as RequestInit)
    const uploaded = (await upload.json()) as { data: { restoreId: string } }
    if (upload.status !== 202) throw new Error(`restore: ${upload.status} ${JSON.stringify(uploaded)}`)
    const t2 = performance.now()
    const uploadRssMb = peakRssMb(server.child.pid!)
    const restored = await until('restore', async () => {
      const j = await apiCaller(server.base, target.apiKey)<{ status: string; error: unknown }>(
        'GET',
        `/api/v1/platform/tenants/${target.tenantId}/restore/${uploaded.data.restoreId}`,
      )
      if (j.status === 'failed') throw new Error(`restore failed: ${JSON.stringify(j.error)}`)
      return j.status === 'completed' ? j : null
    })
    void restored
    const restoreSeconds = (performance.now() - t2) / 1000
    const restoreBaseline = await rawCopy(blobs, [row!.object_key], `bench/copy-${randomBytes(4).toString('hex')}`)
    const [check] = await owner<
      { n: number }[]
    >`select count(*)::int as n from project_files where tenant_id = ${target.tenantId}`
    if (check!.n !== files) throw new Error(`restore: ${check!.n} files restored, not ${files}`)
    return {
      store: env.R2_ENDPOINT ? 's3' : 'local',
      bytes,
      files,
      export: { seconds: exportSeconds, archiveBytes: done.size, baselineSeconds: exportBaseline },
      upload: { seconds: (t2 - t1) / 1000 },
      restore: { seconds: restoreSeconds, baselineSeconds: restoreBaseline },
      idleRssMb,
      exportRssMb,
      uploadRssMb,
      peakRssMb: peakRssMb(server.child.pid!),
    }
  } finally {
    await owner.end()
    await stop(server)
  }
}

export function printPortability(r: PortabilityBench): void {
  const mbps = (s: number, bytes = r.bytes) => `${(bytes / MB / s).toFixed(0)} MB/s`
  console.log(
    `\nexport and restore: ${(r.bytes / MB).toFixed(0)} MB of file bytes in ${r.files} files, ${r.store} store`,
  )
  printTable([
    ['', 'Atrium', 'raw copy', 'ratio (goal 0.8)'],
    [
      'export (request to completed)',
      `${r.export.seconds.toFixed(1)} s, ${mbps(r.export.seconds)}`,
      `${r.export.baselineSeconds.toFixed(1)} s`,
      (r.export.baselineSeconds / r.export.seconds).toFixed(2),
    ],
    [
      'restore (after the upload)',
      `${r.restore.seconds.toFixed(1)} s, ${mbps(r.restore.seconds)}`,
      `${r.restore.baselineSeconds.toFixed(1)} s`,
      (r.restore.baselineSeconds / r.restore.seconds).toFixed(2),
    ],
  ])
  console.log(
    `  archive ${(r.export.archiveBytes / MB).toFixed(0)} MB; its upload ${r.upload.seconds.toFixed(1)} s (${mbps(r.upload.seconds, r.export.archiveBytes)})`,
  )
  console.log(
    `  server peak RSS: ${r.idleRssMb} MB started, ${r.exportRssMb} MB through the export, ${r.uploadRssMb} MB through the upload, ${r.peakRssMb} MB through the restore (goal under 256 MB)`,
  )
}
