// What tracing costs on the read path: GET /api/v1/projects/:id (API key, rate limit, PostgreSQL,
// Redis) on four compiled servers over the same database and tenant, tracing off, and on with
// TRACING_SAMPLE_RATIO 1, 0.1 and 0, in alternating rounds. The traced servers send their spans
// to a sink on loopback that reads each OTLP export whole and acknowledges it as a collector does
// (a collector's own work would share the two cores with the server under test).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  alternating,
  buildOnce,
  CONNECTIONS,
  cpuSeconds,
  createTenant,
  printTable,
  ROUNDS,
  SECONDS,
  start,
  stop,
  type Started,
} from './lib.js'

/** An OTLP/HTTP endpoint that takes every export: 200 with an empty ExportTraceServiceResponse. */
async function sink() {
  const got = { exports: 0, bytes: 0 }
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (got.bytes += c.length))
    req.on('end', () => {
      got.exports++
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    got,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  }
}

const VARIANTS: [string, Record<string, string>][] = [
  ['off', {}],
  ['on, sampling 1.0', { TRACING_SAMPLE_RATIO: '1' }],
  ['on, sampling 0.1', { TRACING_SAMPLE_RATIO: '0.1' }],
  // What being on costs before any span is kept: the sampling decision, the wrapped pools.
  ['on, sampling 0', { TRACING_SAMPLE_RATIO: '0' }],
]

export async function benchTracing(env: Record<string, string>) {
  await buildOnce()
  const rx = await sink()
  const servers: Started[] = []
  try {
    for (const [, settings] of VARIANTS)
      servers.push(
        await start('server/main.ts', {
          ...env,
          ...(settings.TRACING_SAMPLE_RATIO ? { TRACING_OTLP_ENDPOINT: rx.endpoint } : {}),
          ...settings,
        }),
      )
    const { apiKey } = await createTenant(env)
    const auth = { authorization: `Bearer ${apiKey}` }
    const created = await fetch(`${servers[0]!.base}/api/v1/projects`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'traced', description: 'benchmark project', language: 'typescript' }),
    })
    const id = ((await created.json()) as { data: { id: string } }).data.id
    const cpu = servers.map((s) => cpuSeconds(s.child.pid!))
    // A traced server sends what it buffered (every second) after its load: not during the next one's.
    const results = await alternating(
      servers.map((s) => ({ url: `${s.base}/api/v1/projects/${id}`, headers: auth })),
      { pauseMs: 2000 },
    )
    return {
      results: VARIANTS.map(([name], i) => ({
        name,
        ...results[i]!,
        // Its sending included: the pause after each run is counted too.
        cpuUs: ((cpuSeconds(servers[i]!.child.pid!) - cpu[i]!) * 1e6) / results[i]!.requests,
      })),
      ...rx.got,
    }
  } finally {
    for (const s of servers) await stop(s)
    await rx.close()
  }
}

export function printTracing(r: Awaited<ReturnType<typeof benchTracing>>) {
  const off = r.results[0]!
  console.log(
    `\ntracing on GET /api/v1/projects/:id (API key, rate limit, PostgreSQL, Redis), ${CONNECTIONS} connections, ${SECONDS} s each in ${ROUNDS} alternating rounds (medians); spans to a sink on loopback`,
  )
  printTable([
    ['server', 'req/s', 'p50/p99 ms', 'ratio to off', 'p99 ratio', 'CPU µs/request', 'CPU ratio'],
    ...r.results.map((m) => [
      m.name,
      m.rps.toFixed(0),
      `${m.p50}/${m.p99}`,
      (m.rps / off.rps).toFixed(2),
      (m.p99 / Math.max(1, off.p99)).toFixed(2),
      m.cpuUs.toFixed(0),
      (m.cpuUs / off.cpuUs).toFixed(2),
    ]),
  ])
  console.log(`the sink took ${r.exports} exports, ${(r.bytes / 1024 / 1024).toFixed(1)} MB of spans`)
}
