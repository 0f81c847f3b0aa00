// Replicas behind a load balancer (HAProxy, as test/helpers/haproxy.ts configures it and
// docs/operations.md describes): GET by id through it with one, two and three Atrium server
// processes, and the same with the bare stack (bench/raw.ts) as the baseline, in one run on the
// same database. Prints req/s, the ratio to the baseline, how much each replica adds, and the CPU
// each request cost the servers (their user and system time over the requests: what a replica's
// share of the machine buys).
import { readFileSync } from 'node:fs'
import autocannon from 'autocannon'
import { startHaproxy } from '../test/helpers/haproxy.js'
import { freePort } from '../test/helpers/platform.js'
import { buildOnce, createTenant, printTable, start, stop, type Started } from './lib.js'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = 64
const REPLICAS = [1, 2, 3]

/** User and system CPU seconds a process has used (/proc/<pid>/stat, fields 14 and 15, in clock ticks of 1/100 s). */
const cpuSeconds = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

interface Measured {
  rps: number
  p99: number
  /** Servers' CPU milliseconds per request. */
  cpuMs: number
}

async function measure(
  servers: Started[],
  port: number,
  path: string,
  headers: Record<string, string>,
  httpCheck: string | null,
): Promise<Measured> {
  const lb = await startHaproxy(
    port,
    servers.map((s) => Number(new URL(s.base).port)),
    httpCheck,
  )
  try {
    const url = `http://127.0.0.1:${port}${path}`
    await autocannon({ url, connections: CONNECTIONS, duration: 2, headers }) // warm-up: JIT, pools, the balancer's checks
    const before = servers.reduce((sum, s) => sum + cpuSeconds(s.child.pid!), 0)
    const r = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS, headers })
    const cpu = servers.reduce((sum, s) => sum + cpuSeconds(s.child.pid!), 0) - before
    if (r.non2xx || r.errors)
      throw new Error(
        `${path}: ${r.non2xx} non-2xx (${JSON.stringify(r.statusCodeStats)}), ${r.errors} errors through the balancer`,
      )
    return { rps: r.requests.average, p99: r.latency.p99, cpuMs: (cpu * 1000) / r.requests.total }
  } finally {
    await lb.stop()
  }
}

export async function benchReplicas(env: Record<string, string>) {
  await buildOnce()
  const seed = await start('server/main.ts', { ...env, PORT: '0' })
  const { tenantId, apiKey } = await createTenant(env)
  const auth = { authorization: `Bearer ${apiKey}` }
  const created = await fetch(`${seed.base}/api/v1/projects`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'replicas' }),
  })
  const projectId = ((await created.json()) as { data: { id: string } }).data.id
  await stop(seed)
  const rows: { replicas: number; bare: Measured; atrium: Measured }[] = []
  for (const n of REPLICAS) {
    const ports = await Promise.all(Array.from({ length: n }, () => freePort()))
    const atrium = await Promise.all(ports.map((port) => start('server/main.ts', { ...env, PORT: String(port) })))
    const raw = await Promise.all(
      ports.map(async () => start('bench/raw.ts', { DATABASE_URL: env.DATABASE_URL!, RAW_TENANT_ID: tenantId })),
    )
    try {
      // The bare stack has no /readyz: a TCP connect is its check.
      const bare = await measure(raw, await freePort(), `/projects/${projectId}`, {}, null)
      const measured = await measure(atrium, await freePort(), `/api/v1/projects/${projectId}`, auth, '/readyz')
      rows.push({ replicas: n, bare, atrium: measured })
    } finally {
      await Promise.all([...atrium, ...raw].map(stop))
    }
  }
  return rows
}

export function printReplicas(rows: Awaited<ReturnType<typeof benchReplicas>>) {
  console.log(
    `\nReplicas behind HAProxy (round robin, health-checked), GET by id, ${CONNECTIONS} connections, ${SECONDS} s; baseline: the bare stack with as many replicas`,
  )
  const one = rows[0]!
  printTable([
    [
      'replicas',
      'bare req/s',
      'Atrium req/s',
      'ratio',
      'Atrium vs 1 replica',
      'Atrium p99 ms',
      'bare CPU ms/req',
      'Atrium CPU ms/req',
    ],
    ...rows.map((r) => [
      String(r.replicas),
      r.bare.rps.toFixed(0),
      r.atrium.rps.toFixed(0),
      (r.atrium.rps / r.bare.rps).toFixed(2),
      (r.atrium.rps / one.atrium.rps).toFixed(2),
      String(r.atrium.p99),
      r.bare.cpuMs.toFixed(3),
      r.atrium.cpuMs.toFixed(3),
    ]),
  ])
}
