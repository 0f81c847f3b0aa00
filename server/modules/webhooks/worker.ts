// The delivery worker. Every replica runs one; PostgreSQL shares the work out (SKIP LOCKED), so an
// event is fanned out once and each delivery is attempted by one worker at a time.
//
// A cycle: fan out new events to deliveries, then claim due deliveries: enough for every free slot
// and one more per slot, so that a slot starts its next attempt the moment one ends. A cycle runs
// when an event commits (LISTEN, on PostgreSQL), when this replica queues a delivery, when an
// attempt ends, and every poll interval (retries fall due).
//
// Slots are shared between tenants (fairness.ts): the claim reads each endpoint's next due
// deliveries, ranks them against what this replica holds, and leases them in that order; a freed
// slot starts the fairest of those claimed. One tenant's backlog or hanging receivers cannot take
// every slot from the others.
import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import type { Clock } from '../../clock.js'
import { newId } from '../../../common/ids.js'
import type { Db, TxSql } from '../../platform/db.js'
import { outboundFetch, refusalIn, type CompiledPolicy } from '../../platform/outbound.js'
import type { Secrets } from '../../platform/secrets.js'
import { audit } from '../audit/service.js'
import { EVENTS_CHANNEL } from '../outbox/service.js'
import { fairLimits, nextFair, rankFair, type Share } from '../../platform/fairness.js'
import { listenFor, workLoop } from '../../platform/jobs.js'
import { workerMetrics } from './metrics.js'
import { nextAttemptAt, parseRetryAfter, RETRY_SCHEDULE_SECONDS } from './schedule.js'
import { secretContext } from './service.js'
import { sign, signingKey } from './signing.js'
import * as store from './store.js'
import type { ClaimedDelivery } from './store.js'

/** Connect to last byte of the answer. */
export const ATTEMPT_TIMEOUT_MS = 15_000
/** An endpoint whose every attempt has failed for this long is disabled. */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 3600_000
/** How much of a response body an attempt keeps. */
export const EXCERPT_BYTES = 1024
/** How long events are kept once nothing waits to deliver them. */
export const EVENT_RETENTION_MS = 30 * 24 * 3600_000
const DISPATCH_BATCH = 200
const KEY_CACHE_SIZE = 1000

export interface WorkerOptions {
  db: Db
  secrets: Secrets
  /** The deployment's outbound policy: every connection is judged when it is made. */
  policy: CompiledPolicy
  log: Logger
  /** Deliveries in flight at once (WEBHOOK_DELIVERY_CONCURRENCY). */
  concurrency: number
  userAgent: string
  now?: Clock
  /** Seconds to wait after each failed attempt (tests shorten it). */
  schedule?: readonly number[]
  pollMs?: number
  /** Connect to last byte of an answer (tests shorten it). */
  attemptTimeoutMs?: number
  /** How long a claimed delivery is this worker's; must exceed the attempt timeout. */
  leaseMs?: number
  /** Where the worker's metrics go (the app's /metrics); none when absent. */
  registry?: Registry
}

export interface Worker {
  /** Runs a cycle soon (something is due). */
  kick(): void
  /** Stops claiming, lets attempts in flight finish. */
  stop(): Promise<void>
}

export function startWebhookWorker(o: WorkerOptions): Worker {
  const clock = o.now ?? Date.now
  const schedule = o.schedule ?? RETRY_SCHEDULE_SECONDS
  const pollMs = o.pollMs ?? 1000
  const attemptTimeoutMs = o.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS
  const leaseMs = o.leaseMs ?? 4 * attemptTimeoutMs
  // A lease that ends while its attempt may still run would let a second worker send it again.
  if (leaseMs <= attemptTimeoutMs)
    throw new Error(
      `webhook worker: leaseMs (${leaseMs}) must be longer than the attempt timeout (${attemptTimeoutMs})`,
    )
  const fetchOut = outboundFetch(o.policy, {
    timeoutMs: attemptTimeoutMs,
    maxResponseBytes: EXCERPT_BYTES,
    truncateResponse: true,
  })
  const limits = fairLimits(o.concurrency)
  // A claimed delivery passed over for fairer ones long enough goes first, while its lease still
  // covers a whole attempt: run past the lease, it could be sent by another worker at the same time.
  const claimedAt = new WeakMap<ClaimedDelivery, number>()
  const overdueAfterMs = (leaseMs - attemptTimeoutMs) / 2

  // Delivery runs on the job runner's work loop (platform/jobs.ts): its cycle, claim-ahead, drain
  // and back-off are the runner's; what is webhook-specific is where the work comes from (events
  // fanned out to deliveries, then due deliveries ranked fairly) and the attempt itself.
  const loop = workLoop<ClaimedDelivery>({
    name: 'webhooks',
    concurrency: o.concurrency,
    pollMs,
    log: o.log,
    source: {
      // New events (at start, on NOTIFY, on each poll) become deliveries; a whole batch means more may wait.
      async prepare() {
        const { events } = await o.db.system((sql) => store.dispatchEvents(sql, DISPATCH_BATCH, new Date(clock())))
        return events === DISPATCH_BATCH
      },
      async claim(want, held) {
        const claimed = await o.db.system((sql) => claim(sql, want, held))
        const at = performance.now()
        for (const d of claimed) claimedAt.set(d, at)
        return claimed
      },
      release: (unstarted) => o.db.system((sql) => store.releaseClaims(sql, unstarted)),
      // The longest kept waiting when overdue, else the fairest.
      next(ready, running) {
        const now = performance.now()
        const overdue = ready.findIndex((d) => now - claimedAt.get(d)! >= overdueAfterMs)
        return overdue >= 0 ? overdue : nextFair(ready.map(shareOf), running.map(shareOf))
      },
      run: (d) => attempt(d),
    },
  })
  let stopped = false

  /**
   * Up to `want` due deliveries, the fairest first. Twice as many are ranked as wanted: what another
   * replica takes meanwhile is passed over for the next in line, still within the limits.
   */
  async function claim(sql: TxSql, want: number, held: readonly ClaimedDelivery[]): Promise<ClaimedDelivery[]> {
    const at = new Date(clock())
    const due = await store.dueDeliveries(sql, at, want)
    if (!due.length) return []
    const ranked = rankFair(
      due.map((d) => ({
        id: d.id,
        tenant: d.tenant_id,
        key: d.webhook_id,
        healthy: d.healthy,
        dueAt: d.next_attempt_at,
      })),
      held.map(shareOf),
      limits,
      2 * want,
    )
    return ranked.length
      ? store.leaseDeliveries(
          sql,
          ranked.map((c) => c.id),
          want,
          at,
          leaseMs,
        )
      : []
  }

  const metrics = o.registry
    ? workerMetrics(o.registry, {
        inFlight: () => loop.running().length,
        oldestDueSeconds: () =>
          stopped
            ? Promise.reject(new Error('stopped'))
            : o.db.system((sql) => store.oldestDueSeconds(sql, new Date(clock()))),
      })
    : null

  async function attempt(d: ClaimedDelivery): Promise<void> {
    const number = d.attempts + 1
    const startedAt = new Date(clock())
    const t0 = performance.now()
    let statusCode: number | null = null
    let error: string | null = null
    let excerpt = ''
    let retryAfter: number | null = null
    try {
      const body = JSON.stringify({
        id: d.event_id,
        type: d.event_type,
        timestamp: d.event_created_at.toISOString(),
        tenantId: d.event_tenant_id,
        data: d.data,
      })
      const timestamp = Math.floor(clock() / 1000)
      const res = await fetchOut(d.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': o.userAgent,
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': sign(keysOf(d, startedAt), d.event_id, timestamp, body),
        },
        body,
      })
      statusCode = res.status
      excerpt = Buffer.from(await res.arrayBuffer())
        .toString('utf8')
        .replace(/\uFFFD$/, '')
      retryAfter = parseRetryAfter(res.headers.get('retry-after'), clock())
    } catch (err) {
      error = describe(err)
    }
    const durationMs = Math.round(performance.now() - t0)
    const ok = statusCode !== null && statusCode >= 200 && statusCode < 300
    const gone = statusCode === 410
    if (!ok && statusCode !== null)
      error = `the endpoint answered ${statusCode}${gone ? ' (Gone): the endpoint is disabled' : ''}`
    let disabled: store.DisabledReason | null = null
    let outcome: store.AttemptOutcome = 'failed'
    try {
      await o.db.system(async (sql) => {
        const at = new Date(clock())
        // The endpoint first, then the delivery: the lock order of disabling an endpoint.
        let w: store.EndpointState | null = null
        if (!ok) w = (await store.noteFailure(sql, d.webhook_id, at)) ?? null
        if (ok || w) {
          const off = w !== null && w.status !== 'enabled' // disabled while this attempt ran: no retry
          const retryAt =
            ok || gone || off ? null : nextAttemptAt(number, clock(), { schedule, retryAfterSeconds: retryAfter })
          outcome = ok ? 'succeeded' : retryAt === null ? 'failed' : 'retrying'
          // A success's note on the endpoint goes out in the same write as the record (postgres.js
          // sends what is issued in one tick together); PostgreSQL runs them in order, endpoint first.
          const noted = ok ? store.noteSuccess(sql, d.webhook_id, at) : null
          const [, recorded] = await Promise.all([
            noted,
            store.recordAttempt(
              sql,
              newId(),
              {
                deliveryId: d.id,
                attempt: number,
                startedAt,
                durationMs,
                statusCode,
                excerpt: printable(excerpt),
                error:
                  error === null
                    ? null
                    : printable(off && !ok ? `${error}; the endpoint was disabled meanwhile` : error),
                outcome,
                nextAttemptAt: retryAt === null ? null : new Date(retryAt),
              },
              d.leased_until,
            ),
          ])
          if (recorded && w && !off) {
            if (gone) {
              disabled = await disable(
                sql,
                d,
                'gone',
                `The endpoint answered 410 Gone on ${at.toISOString()}: its owner says it no longer exists`,
                at,
              )
            } else if (w.failing_since && at.getTime() - w.failing_since.getTime() >= DISABLE_AFTER_FAILING_MS) {
              disabled = await disable(
                sql,
                d,
                'failing',
                `Every delivery attempt failed from ${w.failing_since.toISOString()} to ${at.toISOString()} (last: ${error})`,
                at,
              )
            }
          }
        } // else: the endpoint was deleted meanwhile, and its deliveries with it
      })
    } catch (err) {
      // The attempt happened but could not be written down: the lease runs out and it is tried
      // again, with the same webhook-id, so a receiver that deduplicates sees it once.
      o.log.error({ err, deliveryId: d.id }, 'could not record a webhook delivery attempt')
      return
    }
    metrics?.attempted(outcome)
    o.log.info(
      {
        deliveryId: d.id,
        webhookId: d.webhook_id,
        eventId: d.event_id,
        attempt: number,
        statusCode,
        outcome,
        ms: durationMs,
        ...(error ? { error } : {}),
      },
      'webhook delivery attempt',
    )
    if (disabled)
      o.log.warn(
        { webhookId: d.webhook_id, tenantId: d.webhook_tenant_id, reason: disabled },
        'webhook endpoint disabled',
      )
  }

  /**
   * Stops the endpoint (its row is already locked by this transaction); the reason when it was this call that stopped
   * it.
   */
  async function disable(
    sql: TxSql,
    d: ClaimedDelivery,
    reason: store.DisabledReason,
    message: string,
    at: Date,
  ): Promise<store.DisabledReason | null> {
    if (!(await store.disableWebhook(sql, d.webhook_id, reason, message, at))) return null
    await store.failPendingDeliveries(sql, d.webhook_id, at)
    // The tenant's admins see why in the endpoint itself and in their audit log.
    if (d.webhook_tenant_id) {
      await audit(sql, {
        tenantId: d.webhook_tenant_id,
        actor: { type: 'system', id: null },
        action: 'webhook.disabled',
        target: { type: 'webhook', id: d.webhook_id },
        details: { reason, message: printable(message) },
      })
    }
    return reason
  }

  // Signing keys by sealed value: an endpoint's every delivery would otherwise unseal the same
  // secret again. A rotation seals a new value, so an entry never goes stale; the bound keeps
  // endpoints long gone from piling up.
  const keys = new Map<string, Buffer>()
  const keyOf = (sealed: string, d: ClaimedDelivery, field: 'secret' | 'previous_secret') => {
    let key = keys.get(sealed)
    if (!key) {
      if (keys.size >= KEY_CACHE_SIZE) keys.clear()
      key = signingKey(o.secrets.decrypt(sealed, secretContext(d.webhook_tenant_id, d.webhook_id, field)))
      keys.set(sealed, key)
    }
    return key
  }

  /** The current secret, and the previous one while its overlap lasts. */
  function keysOf(d: ClaimedDelivery, at: Date): Buffer[] {
    const current = [keyOf(d.secret_sealed, d, 'secret')]
    if (d.previous_secret_sealed && d.previous_secret_expires_at && d.previous_secret_expires_at > at) {
      current.push(keyOf(d.previous_secret_sealed, d, 'previous_secret'))
    }
    return current
  }

  const listener = listenFor(o.db, EVENTS_CHANNEL, () => loop.kick(true), o.log)

  return {
    kick: () => loop.kick(),
    async stop() {
      stopped = true
      await listener.close()
      await loop.stop()
      fetchOut.close()
    },
  }
}

/** What a claimed delivery holds of this replica's share. */
const shareOf = (d: ClaimedDelivery): Share => ({ tenant: d.webhook_tenant_id, key: d.webhook_id, healthy: d.healthy })

/** Text PostgreSQL stores: no NUL (a receiver's body or a peer's error message may hold one). */
const printable = (text: string) => text.replaceAll('\u0000', '\uFFFD')

/** What went wrong, for the endpoint's owner: the policy's refusal, a timeout, or the network error. */
export function describe(err: unknown): string {
  const refused = refusalIn(err)
  // The address a name resolved to is not shown: the endpoint's owner must not map the internal network through it.
  if (refused) return `refused by the outbound policy: ${refused.reason} (${refused.host})`
  const cause = (err as { cause?: NodeJS.ErrnoException }).cause ?? (err as NodeJS.ErrnoException)
  switch (cause?.code) {
    case 'ETIMEDOUT':
      return `no complete response within ${ATTEMPT_TIMEOUT_MS / 1000} s`
    case 'ECONNREFUSED':
      return 'the connection was refused'
    case 'ECONNRESET':
      return 'the connection was reset'
    case 'ENOTFOUND':
      return 'the host name does not resolve'
    case 'EAI_AGAIN':
      return 'the host name could not be resolved (DNS did not answer)'
    default:
      return `${cause?.code ? `${cause.code}: ` : ''}${cause?.message ?? String(err)}`.slice(0, 500)
  }
}

/**
 * Events nothing waits to deliver any more are removed after EVENT_RETENTION_MS (queue 'webhooks.events-retention',
 * server/jobs.ts).
 */
export const eventsRetention = (deps: { db: Db; log: Logger; now?: Clock }) => async (): Promise<void> => {
  const swept = await deps.db.system((sql) =>
    store.sweepEvents(sql, new Date((deps.now ?? Date.now)() - EVENT_RETENTION_MS)),
  )
  if (swept) deps.log.info({ swept }, 'old webhook events removed')
}
