// What the benchmarks share: starting a server script as its own process, stopping it, its peak
// RSS, and a pool of concurrent jobs.
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../', import.meta.url))

export interface Started {
  child: ChildProcess
  base: string
}

/** Starts a script under tsx and resolves once it logs the address it listens on. */
export function start(script: string, env: Record<string, string>): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
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
export async function createTenant(env: Record<string, string>, args: string[] = []): Promise<{ tenantId: string; apiKey: string }> {
  const cli = spawn(process.execPath, ['--import', 'tsx', 'server/cli.ts', 'create-tenant', '--name', 'Bench', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } })
  let out = ''
  cli.stdout.on('data', (c: Buffer) => (out += c.toString()))
  await new Promise((r) => cli.once('exit', r))
  return JSON.parse(out) as { tenantId: string; apiKey: string }
}
