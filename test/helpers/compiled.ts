// The server as production runs it: bundled (server/build.ts) and started with the image's Node
// flags and environment, as its own process whose resident memory a test can watch. For what one
// tenant can do to the process every tenant shares.
import { spawn } from 'node:child_process'
import { readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { NODE_ENVIRONMENT, NODE_FLAGS } from '../../config/bundles.js'
import { buildServer } from '../../server/build.js'
import { finished, ROOT, serverProcessOf, type Ran, type ServerProcess } from './cli.js'
import { tempDir } from './platform.js'

/** Builds the server into a folder of the test's (removed when it ends). */
export async function builtServer(t: Test): Promise<string> {
  const dist = tempDir(t, 'atrium-dist-')
  await buildServer(dist)
  symlinkSync(join(ROOT, 'node_modules'), join(dist, 'node_modules'))
  return dist
}

const withNode = (env: Record<string, string>) => ({
  ...env,
  ...NODE_ENVIRONMENT,
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
})

/** Starts the built server on `env`; killed (SIGKILL) when the test ends. */
export function compiledServer(t: Test, dist: string, env: Record<string, string>): Promise<ServerProcess> {
  return serverProcessOf(
    t,
    spawn(process.execPath, [...NODE_FLAGS, join(dist, 'server/main.js')], {
      cwd: dist,
      env: withNode(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )
}

/** The built admin CLI, as an operator runs it. */
export const compiledAdmin = (dist: string, args: string[], env: Record<string, string>): Promise<Ran> =>
  finished(
    spawn(process.execPath, [...NODE_FLAGS, join(dist, 'server/cli.js'), ...args], {
      cwd: dist,
      env: withNode(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )

/** A process's resident memory now, in bytes (Linux: /proc/<pid>/status). */
export function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) * 1024 : 0
}

/**
 * Samples a process's resident memory every `everyMs` until stopped; the peak it saw, and the peak of each minute (a
 * growth that does not level off shows there).
 */
export function watchRss(pid: number, everyMs = 50) {
  let peak = 0
  let samples = 0
  const started = Date.now()
  const perMinute: number[] = []
  const sample = () => {
    try {
      const rss = rssOf(pid)
      peak = Math.max(peak, rss)
      const minute = Math.floor((Date.now() - started) / 60_000)
      perMinute[minute] = Math.max(perMinute[minute] ?? 0, rss)
      samples++
    } catch {
      // the process has gone: the test finds out by other means
    }
  }
  sample()
  const timer = setInterval(sample, everyMs)
  return {
    get peak() {
      return peak
    },
    get samples() {
      return samples
    },
    /** The peak of each minute so far, in MB. */
    get minutes() {
      return perMinute.map((b) => Math.round(b / MB))
    },
    stop() {
      clearInterval(timer)
      sample()
      return peak
    },
  }
}

export const MB = 1024 * 1024
