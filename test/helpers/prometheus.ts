// A real Prometheus (and its promtool) for the tests of what operators watch: the dashboards' queries, and
// whatever else must hold against Prometheus's own PromQL engine rather than a reading of /metrics. Built from
// source by .ci/run (`go install`, like MinIO and Helm); without it the tests skip and say why, except in CI.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { freePort } from './platform.js'
import { findTool, needs } from './tools.js'

export const findPrometheus = (): string | null => findTool('prometheus')
export const findPromtool = (): string | null => findTool('promtool')
/** tap's skip option for a test that runs Prometheus. */
export const needsPrometheus = (): false | string => needs('prometheus')
/** tap's skip option for a test that runs promtool (rules, metrics lint). */
export const needsPromtool = (): false | string => needs('promtool')

export interface ScrapeTarget {
  /** host:port */
  target: string
  /** /metrics unless given */
  metricsPath?: string
  /** The `job` label; targets of one job share its metrics path. 'atrium' unless given. */
  job?: string
}

export type Labels = Record<string, string>
/** An instant vector's element: its labels and [unix seconds, value as Prometheus prints it]. */
export interface Sample {
  metric: Labels
  value: [number, string]
}
/** A range vector's element (matrix): its labels and every [unix seconds, value]. */
export interface Series {
  metric: Labels
  values: [number, string][]
}
export type QueryData =
  | { resultType: 'vector'; result: Sample[] }
  | { resultType: 'matrix'; result: Series[] }
  | { resultType: 'scalar' | 'string'; result: [number, string] }

/** An answer of the HTTP API with status "error": an expression that does not parse, a bad parameter. */
export class PrometheusError extends Error {
  constructor(
    readonly errorType: string,
    message: string,
  ) {
    super(`${errorType}: ${message}`)
  }
}

export interface Prometheus {
  /** http://127.0.0.1:port */
  url: string
  dir: string
  /** An instant query (/api/v1/query), at `time` (unix seconds) or now. */
  query(expr: string, time?: number): Promise<QueryData>
  /** A range query (/api/v1/query_range), as a Grafana time series panel asks: a matrix, one point a `step`. */
  queryRange(expr: string, o: { start: number; end: number; step: number }): Promise<Series[]>
  /** Polls an instant query until its result is not empty; rejects after `timeoutMs` with the last answer. */
  until(expr: string, o?: { timeoutMs?: number }): Promise<Sample[]>
  /** A GET of the HTTP API (/api/v1/<path>): its data, or PrometheusError. */
  api<T = unknown>(path: string, params?: Record<string, string | string[]>): Promise<T>
  stop(): Promise<void>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Prometheus on a free loopback port, its configuration and TSDB in a temporary folder, scraping `targets` every
 * `scrapeIntervalSeconds` (1 by default: a test waits seconds, not minutes, for its samples). Resolves once it is
 * ready (/-/ready); stopped and its folder removed when the test ends.
 */
export async function startPrometheus(
  t: Test,
  o: { targets: (string | ScrapeTarget)[]; scrapeIntervalSeconds?: number; ruleFiles?: string[] },
): Promise<Prometheus> {
  const binary = findPrometheus()
  if (!binary) throw new Error('prometheus is not installed (.ci/run builds it)')
  const interval = `${o.scrapeIntervalSeconds ?? 1}s`
  const jobs = new Map<string, { path: string; targets: string[] }>()
  for (const target of o.targets.map((x) => (typeof x === 'string' ? { target: x } : x))) {
    const name = target.job ?? 'atrium'
    const path = target.metricsPath ?? '/metrics'
    const job = jobs.get(name) ?? { path, targets: [] }
    if (job.path !== path) throw new Error(`job ${name}: one metrics path per job (${job.path}, ${path})`)
    job.targets.push(target.target)
    jobs.set(name, job)
  }
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    rule_files: o.ruleFiles ?? [],
    scrape_configs: [...jobs].map(([name, job]) => ({
      job_name: name,
      metrics_path: job.path,
      static_configs: [{ targets: job.targets }],
    })),
  }
  const dir = mkdtempSync(join(tmpdir(), 'atrium-prometheus-'))
  // JSON is YAML: the configuration as Prometheus reads it, with no second serializer to trust.
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config, null, 2))
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = spawn(
    binary,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      // Targets are applied on this tick (5 s by default): the first scrape comes that much sooner.
      '--scrape.discovery-reload-interval=200ms',
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-8000)))
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const killed = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(killed)
    }
    rmSync(dir, { recursive: true, force: true })
  }
  t.teardown(stop)

  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${stderr}`)
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ready) break
    if (i > 300) throw new Error(`prometheus was not ready within 30 s:\n${stderr}`)
    await sleep(100)
  }

  async function call<T>(path: string, params: Record<string, string | string[]>, method: 'GET' | 'POST') {
    const form = new URLSearchParams()
    for (const [k, v] of Object.entries(params)) for (const one of [v].flat()) form.append(k, one)
    // POST for queries: a dashboard's expression may be longer than a URL should be.
    const r =
      method === 'POST'
        ? await fetch(`${url}/api/v1/${path}`, { method, body: form })
        : await fetch(`${url}/api/v1/${path}?${form}`)
    const body = (await r.json()) as { status: string; data?: T; errorType?: string; error?: string }
    if (body.status !== 'success') throw new PrometheusError(body.errorType ?? String(r.status), body.error ?? '')
    return body.data as T
  }
  const query = (expr: string, time?: number) =>
    call<QueryData>('query', { query: expr, ...(time === undefined ? {} : { time: String(time) }) }, 'POST')
  return {
    url,
    dir,
    query,
    queryRange: async (expr, r) =>
      (
        await call<{ result: Series[] }>(
          'query_range',
          { query: expr, start: String(r.start), end: String(r.end), step: String(r.step) },
          'POST',
        )
      ).result,
    async until(expr, w = {}) {
      const deadline = Date.now() + (w.timeoutMs ?? 30_000)
      let last: unknown = 'no answer yet'
      for (;;) {
        try {
          const data = await query(expr)
          if (data.resultType === 'vector' && data.result.length) return data.result
          last = data
        } catch (err) {
          last = (err as Error).message
        }
        if (Date.now() > deadline)
          throw new Error(`prometheus: ${expr} had no result within the time: ${JSON.stringify(last)}`)
        await sleep(250)
      }
    },
    api: (path, params = {}) => call(path, params, 'GET'),
    stop,
  }
}
