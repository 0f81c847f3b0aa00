// What the benchmarks share: starting a server script as its own process, stopping it, its peak
// RSS, a pool of concurrent jobs, and HTTP loads on several targets in alternating rounds.
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { NODE_ENVIRONMENT, NODE_FLAGS } from '../config/bundles.js'
import { buildServer, OUT } from '../server/build.js'

export const ROOT = fileURLToPath(new URL('../', import.meta.url))

export interface Started {
  child: ChildProcess
  base: string
}

/**
 * How a script runs: the server's (server/*.ts) compiled, as production runs them (dist/, built
 * once per run, with production's Node flags); the baselines under tsx (their RSS is not reported).
 */
const runArgs = (script: string) =>
  script.startsWith('server/')
    ? [...NODE_FLAGS, join(OUT, script.replace(/\.ts$/, '.js'))]
    : ['--import', 'tsx', script]

let built: Promise<unknown> | null = null
/** dist/ from the sources of this checkout, once per run. */
export const buildOnce = () => (built ??= buildServer())

/** Starts a script and resolves once it logs the address it listens on. */
export async function start(script: string, env: Record<string, string>): Promise<Started> {
  await buildOnce()
  // BENCH_NODE_ARGS go to the servers' node, e.g. --cpu-prof --cpu-prof-dir=/tmp/prof to see where their time goes.
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []), ...runArgs(script)],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...(script.startsWith('server/') ? NODE_ENVIRONMENT : {}), ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  let err = ''
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString()
      if (process.env.BENCH_ECHO) process.stderr.write(c)
      const m = /listening on (http:\/\/[\d.]+:\d+)/i.exec(err)
      if (m) resolve({ child, base: m[1]! })
    })
    child.on('exit', (code) => reject(new Error(`${script} exited (${code}):\n${err}`)))
  })
}

export async function stop(s: Started) {
  s.child.kill('SIGTERM')
  await new Promise((r) => s.child.once('exit', r))
}

/**
 * CPU seconds a process has used (user and system, /proc/<pid>/stat in clock ticks, 100 a second on
 * Linux): on a machine that other work shares, the CPU a server spends per request moves less than
 * its throughput.
 */
export const cpuSeconds = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

export const peakRssMb = (pid: number) => {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Math.round(Number(m[1]) / 1024) : NaN
}

/** `n` jobs, `parallel` at a time. */
export async function pool(n: number, parallel: number, job: (i: number) => Promise<void>) {
  let next = 0
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) await job(next++)
    }),
  )
}

/** A tenant made with the admin CLI, as an operator would: its all-permissions API key. */
export async function createTenant(
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ tenantId: string; apiKey: string }> {
  await buildOnce()
  const cli = spawn(process.execPath, [...runArgs('server/cli.ts'), 'create-tenant', '--name', 'Bench', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
  })
  let out = ''
  cli.stdout.on('data', (c: Buffer) => (out += c.toString()))
  await new Promise((r) => cli.once('exit', r))
  return JSON.parse(out) as { tenantId: string; apiKey: string }
}

/** A caller of the API with a tenant's API key: the envelope's data, or an error naming the status. */
export function apiCaller(base: string, apiKey: string) {
  return async <T = { id: string }>(method: string, path: string, body?: unknown): Promise<T> => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    })
    const json = (await r.json()) as { data: T }
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`)
    return json.data
  }
}

/** Points the tenant's model at the fake provider at `url` (the suite's instant OpenAI-compatible one). */
export function useFakeLlm(call: ReturnType<typeof apiCaller>, url: string) {
  return call('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'openai-compatible',
    baseUrl: url,
    model: 'bench',
    apiKey: 'sk-bench-0000000000',
  })
}

/** The `q` quantile (0 to 1) of the numbers, nearest rank. */
export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN
}

/** Rows of cells as columns: the first left-aligned, the others right-aligned. */
export function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  for (const r of rows) console.log(r.map((c, i) => (i ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  '))
}

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
export const CONNECTIONS = 64
export const ROUNDS = 3

export interface Measured {
  rps: number
  p50: number
  p99: number
  /** Requests answered in all, warm-up included. */
  requests: number
}

export type Target = {
  url: string
  headers?: Record<string, string>
  method?: 'GET' | 'POST' | 'PUT'
  body?: string | Buffer
  varied?: boolean
}

/**
 * A body whose first bytes count the requests: each one different (new content, a new object), at no cost worth
 * measuring.
 */
function varied(body: Buffer) {
  let n = 0
  return (request: autocannon.Request) => {
    const copy = Buffer.from(body)
    copy.writeUInt32BE(n++ >>> 0, 0)
    return { ...request, body: copy }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function run(t: Target, duration: number) {
  const r = await autocannon({
    url: t.url,
    connections: CONNECTIONS,
    headers: { ...(t.body ? { 'content-type': 'application/json' } : {}), ...t.headers },
    method: t.method ?? 'GET',
    ...(t.body ? { body: t.body } : {}),
    ...(t.varied && Buffer.isBuffer(t.body) ? { requests: [{ setupRequest: varied(t.body) }] } : {}),
    duration,
  })
  const bad = r.non2xx + r.errors + r.timeouts
  if (bad) throw new Error(`${t.method ?? 'GET'} ${t.url}: ${bad} of ${r.requests.total} requests failed`)
  return r
}

/**
 * The same work on each target in alternating rounds (first, second, ..., first, ...) after a 2 s
 * warm-up each, the median of each target's rounds: a machine that is busier for a while slows
 * every target, not the one that happened to run then. `pauseMs` between two runs: for servers
 * that go on working after their load (sending what they buffered), so the next one has the CPU.
 */
export async function alternating(targets: Target[], o: { pauseMs?: number } = {}): Promise<Measured[]> {
  const pause = () => new Promise((r) => setTimeout(r, o.pauseMs ?? 0))
  const requests = targets.map(() => 0)
  for (const [side, t] of targets.entries()) {
    requests[side]! += (await run(t, 2)).requests.total // warm-up: JIT, pools, caches
    await pause()
  }
  const rounds: Omit<Measured, 'requests'>[][] = targets.map(() => [])
  for (let i = 0; i < ROUNDS; i++) {
    for (const [side, t] of targets.entries()) {
      const r = await run(t, Math.max(1, Math.round(SECONDS / ROUNDS)))
      await pause()
      requests[side]! += r.requests.total
      rounds[side]!.push({ rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99 })
    }
  }
  return rounds.map((ms, side) => ({
    rps: median(ms.map((m) => m.rps)),
    p50: median(ms.map((m) => m.p50)),
    p99: median(ms.map((m) => m.p99)),
    requests: requests[side]!,
  }))
}
