// Readiness: what /readyz answers and what the readiness gauges report on each scrape, from one
// set of probes, so an alert on atrium_ready fires exactly when the orchestrator takes a replica
// out of rotation.
import type { Logger } from 'pino'
import { Gauge, type Registry } from 'prom-client'
import { AppError } from '../../domain/errors.js'
import type { Platform } from '../../platform/index.js'
import { named, perScrape } from '../../platform/metrics.js'
import { loadMigrations, pendingMigrations } from '../../platform/migrate.js'

/** Where a failed check's cause goes (the request's log, or the app's for a scrape). */
type Log = Pick<Logger, 'warn'>

const CHECK_TIMEOUT_MS = 2000
const TIMED_OUT = `no answer in ${CHECK_TIMEOUT_MS} ms`

export interface Check {
  status: 'pass' | 'fail'
  mode: string
  latencyMs: number
  error?: string
}

export interface Readiness {
  checks: {
    db: Check
    schema: { status: 'pass' | 'fail'; version: number; pending: number[] }
    cache: Check
    blobs: Check
  }
  /** Why /readyz answers 503, or null when it answers 200 (ready, or degraded without ?strict). */
  refusal(strict: boolean): AppError | null
}

/** One dependency check. Why it failed goes to the log, not to anonymous callers (host names, users). */
async function probe(name: string, mode: string, fn: () => Promise<void>, log: Log): Promise<Check> {
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(TIMED_OUT)), CHECK_TIMEOUT_MS)
      }),
    ])
    return { status: 'pass', mode, latencyMs: Math.round(performance.now() - started) }
  } catch (err) {
    log.warn({ check: name, err }, 'readiness check failed')
    const error = (err as Error).message === TIMED_OUT ? TIMED_OUT : 'failed (the server log says why)'
    return { status: 'fail', mode, latencyMs: Math.round(performance.now() - started), error }
  } finally {
    clearTimeout(timer)
  }
}

export function readinessService(platform: Platform, isDraining: () => boolean) {
  const migrations = loadMigrations()
  const version = migrations.at(-1)?.version ?? 0
  // Once the database has every migration this server needs it keeps them: asked again only after
  // a failure, so a ready server's probe costs no more than before.
  let schemaCurrent = false
  const schemaCheck = async (log: Log) => {
    if (schemaCurrent) return { status: 'pass' as const, version, pending: [] }
    try {
      const pending = await pendingMigrations(platform.db.sql, migrations)
      schemaCurrent = pending.length === 0
      return { status: schemaCurrent ? ('pass' as const) : ('fail' as const), version, pending }
    } catch (err) {
      log.warn({ check: 'schema', err }, 'readiness check failed')
      return { status: 'fail' as const, version, pending: [] as number[] }
    }
  }

  return async function readiness(log: Log): Promise<Readiness> {
    const [db, schema, cache, blobs] = await Promise.all([
      probe('db', platform.db.mode, () => platform.db.ping(), log),
      schemaCheck(log),
      probe('cache', platform.cache.redis ? 'redis' : 'in-process', () => platform.cache.ping(), log),
      // The platform's own store, not a tenant's (storage.forTenant): a customer's store being
      // away says nothing about whether this replica can serve.
      probe('blobs', platform.blobs.kind, () => platform.blobs.ping(), log),
    ])
    const checks = { db, schema, cache, blobs }
    const failing = Object.entries(checks)
      .filter(([, c]) => c.status === 'fail')
      .map(([name]) => name)
    return {
      checks,
      refusal(strict) {
        if (isDraining()) return new AppError('SERVICE_UNAVAILABLE', 'Shutting down', { draining: true, checks })
        if (schema.pending.length)
          return new AppError(
            'SERVICE_UNAVAILABLE',
            `Not ready: the database lacks migrations ${schema.pending.join(', ')}; run \`migrate\``,
            { checks },
          )
        if (db.status === 'fail' || schema.status === 'fail' || (strict && failing.length))
          return new AppError('SERVICE_UNAVAILABLE', `Not ready: ${failing.join(', ')} failing`, { checks })
        return null
      },
    }
  }
}

/**
 * atrium_ready and atrium_dependency_up, probed when Prometheus scrapes: the probes of /readyz, run
 * once for both gauges (a scrape collects them together).
 */
export function readinessMetrics(registry: Registry, readiness: ReturnType<typeof readinessService>, log: Log): void {
  const once = perScrape(() => readiness(log))
  new Gauge({
    ...named('atrium_ready', registry),
    help: 'Whether /readyz answers 200: 1 ready (or degraded), 0 not ready or draining',
    async collect() {
      this.set((await once()).refusal(false) ? 0 : 1)
    },
  })
  new Gauge({
    ...named('atrium_dependency_up', registry),
    help: "Whether each dependency answered /readyz's probe: database, cache (Redis or in-process), blobs (the platform's store)",
    labelNames: ['dependency'] as const,
    async collect() {
      const { checks } = await once()
      this.set({ dependency: 'database' }, checks.db.status === 'pass' ? 1 : 0)
      this.set({ dependency: 'cache' }, checks.cache.status === 'pass' ? 1 : 0)
      this.set({ dependency: 'blobs' }, checks.blobs.status === 'pass' ? 1 : 0)
    },
  })
}
