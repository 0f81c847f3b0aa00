// What the benchmarks share: starting a server script as its own process, stopping it, its peak
// RSS, and a pool of concurrent jobs.
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
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
