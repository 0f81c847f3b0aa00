// npm run bench: in one run, the bare Fastify baseline and Atrium's authenticated, rate-limited
// GET /api/v1/projects/:id on real PostgreSQL and Redis, once with an API key and once with a JWT
// access token, each under autocannon with 64 connections.
// Prints req/s, their ratio, p99 latency and the server's peak RSS.
// Then webhooks: how fast a server delivers a backlog of committed events as signed deliveries to a
// loopback receiver, against the rate at which this process alone can POST to that receiver.
// Then the job runner, agent runs, chat streams and the chat export (jobs.ts, agents.ts, chat.ts,
// chat-export.ts), a large tenant's export and restore (portability.ts), the installer's site
// backup and restore (site-backup.ts), and the client library's cost per call (client.ts); stack.ts sets Atrium
// against the same stack without its safety; replicas.ts, one to three replicas behind HAProxy; tracing.ts, the
// read by id with tracing off and on at sampling 1.0, 0.1 and 0.
// BENCH_ONLY=chat (or http, stack, replicas, tracing, jobs, agents, export, portability, site-backup, client; several
// with commas) runs only those.
// Services: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; a fresh database
// is made and dropped) and BENCH_REDIS_URL (default redis://127.0.0.1:6379). BENCH_SECONDS: 10.
import { createServer, request, Agent } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import postgres from 'postgres'
import { benchAgents, printAgents } from './agents.js'
import { benchChatExport, printChatExport } from './chat-export.js'
import { benchClient, printClient } from './client.js'
import { benchStack, printStack } from './stack.js'
import { benchReplicas, printReplicas } from './replicas.js'
import { benchJobs, printJobs } from './jobs.js'
import { benchChat, printChat } from './chat.js'
import { benchPortability, printPortability } from './portability.js'
import { benchSiteBackup, printSiteBackup } from './site-backup.js'
import { benchTracing, printTracing } from './tracing.js'
import { createTenant, peakRssMb, pool, printTable, start, stop } from './lib.js'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = 64
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const only = process.env.BENCH_ONLY?.split(',')
const runs = (bench: string) => !only || only.includes(bench)

const WEBHOOK_EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 2000)
/** The server's default WEBHOOK_DELIVERY_CONCURRENCY, used for the baseline's parallelism too. */
const DELIVERY_CONCURRENCY = Number(process.env.BENCH_DELIVERY_CONCURRENCY ?? 8)

/** A receiver on loopback answering 204; `arrived` resolves when `n` requests have come. */
async function receiver() {
  let count = 0
  let waiting: { n: number; resolve: () => void } | null = null
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(204).end()
      count++
      if (waiting && count >= waiting.n) waiting.resolve()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrived: (n: number) => new Promise<void>((resolve) => (count >= n ? resolve() : (waiting = { n, resolve }))),
    reset: () => {
      count = 0
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

/** Baseline: this process POSTing JSON bodies straight to the receiver, keep-alive, as many at once as the worker. */
async function rawPosts(url: string, n: number): Promise<number> {
  const agent = new Agent({ keepAlive: true })
  const body = JSON.stringify({ id: 'x', type: 'project.created', data: { name: 'bench' } })
  const started = performance.now()
  await pool(
    n,
    DELIVERY_CONCURRENCY,
    () =>
      new Promise<void>((resolve, reject) => {
        const req = request(
          url,
          {
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.resume()
            res.on('end', resolve)
          },
        )
        req.on('error', reject)
        req.end(body)
      }),
  )
  agent.destroy()
  return n / ((performance.now() - started) / 1000)
}

async function load(url: string, headers: Record<string, string> = {}) {
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers }) // warm-up: JIT, pools
  const r = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS, headers })
  const bad = r.non2xx + r.errors + r.timeouts
  if (bad) throw new Error(`${url}: ${bad} of ${r.requests.total} requests failed`)
  return { rps: r.requests.average, p99: r.latency.p99, total: r.requests.total }
}

const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} })
const dbName = `atrium_bench_${randomBytes(4).toString('hex')}`
await admin.unsafe(`create database ${dbName}`)
const dataDir = mkdtempSync(join(tmpdir(), 'atrium-bench-'))
try {
  const url = new URL(databaseUrl)
  url.pathname = `/${dbName}`
  const env = {
    DATABASE_URL: url.toString(),
    REDIS_URL: redisUrl,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    ENCRYPTION_MASTER_KEY: randomBytes(32).toString('base64'),
    // High enough that the benchmark is never refused, while every request still takes the Redis round trip.
    RATE_LIMIT_MAX: '1000000',
    // The webhook receiver is on loopback, over http.
    OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_DELIVERY_CONCURRENCY: '0',
  }
  if (runs('http')) {
    const hello = await start('bench/hello.ts', {})
    const base = await load(`${hello.base}/`)
    const baseRss = peakRssMb(hello.child.pid!)
    await stop(hello)

    const atrium = await start('server/main.ts', env)
    const { apiKey } = await createTenant(env, ['--email', 'bench@example.com', '--password', 'bench password 1'])
    const headers = { authorization: `Bearer ${apiKey}` }
    const created = await fetch(`${atrium.base}/api/v1/projects`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', description: 'benchmark project', language: 'typescript' }),
    })
    const projectId = ((await created.json()) as { data: { id: string } }).data.id
    const api = await load(`${atrium.base}/api/v1/projects/${projectId}`, headers)
    const post = (path: string, body: unknown) =>
      fetch(`${atrium.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ data: Record<string, string> }>)
    const session = (await post('/api/v1/auth/login', { email: 'bench@example.com', password: 'bench password 1' }))
      .data.token
    const accessToken = (await post('/api/v1/auth/exchange', { token: session })).data.accessToken
    const jwt = await load(`${atrium.base}/api/v1/projects/${projectId}`, { authorization: `Bearer ${accessToken}` })
    const apiRss = peakRssMb(atrium.child.pid!)

    // Webhooks. This server delivers nothing (WEBHOOK_DELIVERY_CONCURRENCY=0), so the projects created
    // here leave a backlog of committed events; a second server then delivers it, as a replica does
    // when it catches up after an outage. Measured: its deliveries per second, from start to the last.
    const rx = await receiver()
    const raw = await rawPosts(rx.url, WEBHOOK_EVENTS)
    rx.reset()
    const hook = await fetch(`${atrium.base}/api/v1/webhooks`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['project.created'], secret: randomBytes(24).toString('base64url') }),
    })
    if (hook.status !== 201) throw new Error(`webhook registration: ${hook.status} ${await hook.text()}`)
    const t0 = performance.now()
    await pool(WEBHOOK_EVENTS, 16, async (i) => {
      const r = await fetch(`${atrium.base}/api/v1/projects`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `bench ${i}` }),
      })
      if (r.status !== 201) throw new Error(`create project: ${r.status}`)
      await r.arrayBuffer()
    })
    const createRate = WEBHOOK_EVENTS / ((performance.now() - t0) / 1000)
    await stop(atrium)
    const delivered = rx.arrived(WEBHOOK_EVENTS)
    const worker = await start('server/main.ts', { ...env, WEBHOOK_DELIVERY_CONCURRENCY: String(DELIVERY_CONCURRENCY) })
    const t1 = performance.now()
    await delivered
    const drainRate = WEBHOOK_EVENTS / ((performance.now() - t1) / 1000)
    await stop(worker)
    await rx.close()

    const ratio = api.rps / base.rps
    const rows = [
      ['target', 'req/s', 'p99 ms', 'peak RSS MB', 'requests'],
      ['fastify hello-world (baseline)', base.rps.toFixed(0), String(base.p99), String(baseRss), String(base.total)],
      [
        'GET /api/v1/projects/:id, API key (rate limit, PostgreSQL, Redis)',
        api.rps.toFixed(0),
        String(api.p99),
        String(apiRss),
        String(api.total),
      ],
      ['GET /api/v1/projects/:id, JWT access token', jwt.rps.toFixed(0), String(jwt.p99), '', String(jwt.total)],
    ]
    printTable(rows)
    console.log(
      `\nratio: ${(ratio * 100).toFixed(1)}% of the baseline's req/s (target 40% or more); p99 ${api.p99} ms (target under 25 ms)`,
    )
    console.log(
      `JWT ratio: ${((jwt.rps / base.rps) * 100).toFixed(1)}% of the baseline; ${((jwt.rps / api.rps) * 100).toFixed(1)}% of the API-key rate`,
    )
    console.log(
      `${CONNECTIONS} connections, ${SECONDS} s per target after a 2 s warm-up, ${process.env.BENCH_LOG_LEVEL ?? 'warn'} log level`,
    )

    console.log(
      `\nwebhooks: ${WEBHOOK_EVENTS} projects created (16 at a time) at ${createRate.toFixed(0)}/s, each event written to the outbox in its transaction`,
    )
    console.log(
      `  baseline, plain POSTs from this process to the receiver (${DELIVERY_CONCURRENCY} at a time): ${raw.toFixed(0)}/s`,
    )
    console.log(
      `  Atrium delivering that backlog (fan-out, claim, sign, POST, record; ${DELIVERY_CONCURRENCY} at a time): ${drainRate.toFixed(0)} deliveries/s = ${((drainRate / raw) * 100).toFixed(1)}% of the baseline`,
    )
  }
  if (runs('jobs')) printJobs(await benchJobs(databaseUrl))
  if (runs('agents')) printAgents(await benchAgents(env))
  if (runs('chat')) printChat(await benchChat(env))
  if (runs('export')) printChatExport(await benchChatExport(env))
  if (runs('portability')) printPortability(await benchPortability(env))
  if (runs('site-backup')) printSiteBackup(await benchSiteBackup(env))
  if (runs('stack')) printStack(await benchStack(env))
  if (runs('replicas')) printReplicas(await benchReplicas(env))
  if (runs('tracing')) printTracing(await benchTracing(env))
  if (runs('client')) printClient(await benchClient(env))
} finally {
  await admin.unsafe(`drop database if exists ${dbName} with (force)`)
  await admin.end()
  rmSync(dataDir, { recursive: true, force: true })
}
