// Atrium against the same stack without its safety (bench/raw.ts: Fastify + postgres.js as the
// database owner, no auth, no rate limit, no RLS), in one run on the same database: GET by id, the
// first page of the list (50), POST (project, version and outbox event in one transaction), and a
// file PUT (the bytes to the same store, then the file, a version, its manifest and the event).
// Also the compiled server's start-up to /readyz and its idle and peak RSS.
import { readFileSync } from 'node:fs'
import {
  alternating,
  buildOnce,
  CONNECTIONS,
  createTenant,
  peakRssMb,
  printTable,
  ROUNDS,
  SECONDS,
  start,
  stop,
  type Measured,
  type Target,
} from './lib.js'

/** The bare stack and Atrium on the same work, alternating (see alternating()). */
const compare = (bare: Target, atrium: Target) => alternating([bare, atrium]) as Promise<[Measured, Measured]>

const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Math.round(Number(m[1]) / 1024) : NaN
}

export async function benchStack(env: Record<string, string>) {
  await buildOnce() // the compiled server in dist/, before the clock starts
  const t0 = performance.now()
  const atrium = await start('server/main.ts', env)
  for (;;) {
    const r = await fetch(`${atrium.base}/readyz`).catch(() => null)
    if (r?.ok) break
    await new Promise((res) => setTimeout(res, 20))
  }
  const startupMs = performance.now() - t0
  const idleRss = rssMb(atrium.child.pid!)
  let raw: Awaited<ReturnType<typeof start>> | null = null
  try {
    const { tenantId, apiKey } = await createTenant(env)
    const auth = { authorization: `Bearer ${apiKey}` }
    let projectId = ''
    for (let i = 0; i < 60; i++) {
      const r = await fetch(`${atrium.base}/api/v1/projects`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `seed ${i}` }),
      })
      projectId = ((await r.json()) as { data: { id: string } }).data.id
    }
    // The bare stack copies files to the store Atrium uses: its S3 store, or its local folder's own layout.
    raw = await start('bench/raw.ts', {
      DATABASE_URL: env.DATABASE_URL!,
      RAW_TENANT_ID: tenantId,
      ...(env.R2_ENDPOINT
        ? {
            R2_ENDPOINT: env.R2_ENDPOINT,
            R2_BUCKET: env.R2_BUCKET!,
            R2_ACCESS_KEY_ID: env.R2_ACCESS_KEY_ID!,
            R2_SECRET_ACCESS_KEY: env.R2_SECRET_ACCESS_KEY!,
          }
        : { RAW_BLOB_DIR: `${env.DATA_DIR}/raw-blobs` }),
    })
    const body = JSON.stringify({ name: 'bench', description: 'benchmark project', language: 'typescript' })
    const rows = {
      get: await compare(
        { url: `${raw.base}/projects/${projectId}` },
        { url: `${atrium.base}/api/v1/projects/${projectId}`, headers: auth },
      ),
      list: await compare({ url: `${raw.base}/projects` }, { url: `${atrium.base}/api/v1/projects`, headers: auth }),
    }
    const readRss = peakRssMb(atrium.child.pid!)
    const post = await compare(
      { url: `${raw.base}/projects`, method: 'POST', body },
      { url: `${atrium.base}/api/v1/projects`, method: 'POST', body, headers: auth },
    )
    // A 16 KiB file written again and again to one path, its content new each time: each PUT is a
    // new object and a new version.
    const bytes = Buffer.alloc(16 * 1024, 'f')
    const octets = { 'content-type': 'application/octet-stream' }
    const put = await compare(
      {
        url: `${raw.base}/projects/${projectId}/files/bench/data.bin`,
        method: 'PUT',
        body: bytes,
        headers: octets,
        varied: true,
      },
      {
        url: `${atrium.base}/api/v1/projects/${projectId}/files/bench/data.bin`,
        method: 'PUT',
        body: bytes,
        headers: { ...auth, ...octets },
        varied: true,
      },
    )
    return { startupMs, idleRss, readRss, peakRss: peakRssMb(atrium.child.pid!), results: { ...rows, post, put } }
  } finally {
    if (raw) await stop(raw)
    await stop(atrium)
  }
}

export function printStack(r: Awaited<ReturnType<typeof benchStack>>) {
  const names = {
    get: 'GET by id',
    list: 'GET list, first page of 50',
    post: 'POST project (+ version, outbox event)',
    put: 'PUT a 16 KiB file (store + file, version, manifest, event)',
  }
  console.log(
    `\nAtrium against the bare stack (Fastify + postgres.js as the owner: no auth, rate limit or RLS), ${CONNECTIONS} connections, ${SECONDS} s each in ${ROUNDS} alternating rounds (medians)`,
  )
  printTable([
    ['route', 'bare req/s', 'bare p50/p99 ms', 'Atrium req/s', 'Atrium p50/p99 ms', 'ratio', 'p99 ratio'],
    ...Object.entries(r.results).map(([k, [bare, atrium]]) => [
      names[k as keyof typeof names],
      bare!.rps.toFixed(0),
      `${bare!.p50}/${bare!.p99}`,
      atrium!.rps.toFixed(0),
      `${atrium!.p50}/${atrium!.p99}`,
      (atrium!.rps / bare!.rps).toFixed(2),
      (atrium!.p99 / Math.max(1, bare!.p99)).toFixed(2),
    ]),
  ])
  console.log(
    `compiled server: start-up to /readyz ${Math.round(r.startupMs)} ms; RSS idle ${r.idleRss} MB, peak under the read load ${r.readRss} MB, peak after the writes ${r.peakRss} MB`,
  )
}
