// The one job runner: all background work (agent runs, chat replies, exports, restores, automatic
// backups, retention sweeps; webhook deliveries run on its work loop) is durable work in PostgreSQL
// that every replica helps with. Which queues exist, with their handlers and schedules, is listed in
// one place: server/jobs.ts.
//
// - Jobs live in the `jobs` table (migration 0006). `enqueueJob(sql, ...)` inserts in the caller's
//   transaction: a job exists only if the change that asked for it committed, and its NOTIFY is sent
//   at that commit.
// - Each named queue has a handler and a per-replica concurrency. A replica claims due jobs with
//   FOR UPDATE SKIP LOCKED under a lease that it renews while the handler runs; a job whose worker
//   died is taken again once its lease has run out. Only the holder of the lease records an outcome.
// - Claims are fair between tenants (fairness.ts): the claim steps through the parties (tenants, and
//   the platform) with due jobs, reads a few of each, and ranks them against what this replica holds.
//   One tenant's thousand jobs do not starve another's one.
// - Failures are retried with backoff up to the queue's maximum; a job can be cancelled, queued or
//   running (its handler's signal aborts).
// - Wake-up: LISTEN/NOTIFY on PostgreSQL, polling always (the embedded database has one session, so
//   no LISTEN there; due retries and run-outs are found by the poll).
// - Schedules: cron expressions (node-cron's syntax: five fields, or six with seconds) or fixed
//   intervals. Each slot runs once across all replicas (the schedule row is locked while a slot is
//   enqueued, and the job carries a unique key per schedule and slot); after a time when no replica
//   ran, the latest missed slot runs once.
// - Drain: stop() stops claiming, hands back jobs claimed but not started, lets running handlers
//   finish within a grace period, then aborts the rest and hands them back.
//
// pg-boss and graphile-worker were weighed and not used; docs/architecture.md says why.
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { context, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api'
import { Cron } from 'croner'
import type { Logger } from 'pino'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { Clock } from '../clock.js'
import { newId } from '../../common/ids.js'
import type { Db, TxSql } from './db.js'
import { fairLimits, nextFair, rankFair, type Share } from './fairness.js'
import { named } from './metrics.js'
import { activeTraceparent, errorCode, failSpan, linkTo, type Tracing } from './tracing.js'

export const JOBS_CHANNEL = 'atrium_jobs'
const CANCEL_PREFIX = 'cancel:'
/** How long finished jobs are kept for inspection. */
const KEEP_COMPLETED_MS = 7 * 24 * 3600_000
const KEEP_FAILED_MS = 30 * 24 * 3600_000
const ERROR_CHARS = 2000
/** How far a schedule with no next slot (or one that cannot be read) is put off. */
const PARK_MS = 365 * 24 * 3600_000
// Renewals also carry a cancel to the embedded database's runner, which hears no NOTIFY.
const RENEW_MAX_MS = 5000

// ---- the work loop: what every kind of background work runs on -----------------------------------

export interface LoopSource<T> {
  /** Claims up to `want` units of due work for this replica, in the order to start them. */
  claim(want: number, held: readonly T[]): Promise<T[]>
  /** Hands back work claimed but not started (the loop is stopping). */
  release(items: T[]): Promise<void>
  /** Does one unit of work; never throws (the source records outcomes itself). */
  run(item: T): Promise<void>
  /** Runs first in a cycle after a wake-up or poll (new work may have arrived); true when more may wait. */
  prepare?(): Promise<boolean>
  /** Which of the claimed units to start next, given what runs. */
  next?(ready: readonly T[], running: readonly T[]): number
}

export interface LoopOptions<T> {
  /** For log lines. */
  name: string
  /** Units in flight at once on this replica. */
  concurrency: number
  pollMs: number
  log: Logger
  source: LoopSource<T>
  /**
   * Claims wait until at least this many can be taken (default 1: every freed slot claims its
   * next). Jobs claim in batches: a claim costs a transaction, as much as a short job itself.
   */
  minClaim?: number
}

export interface WorkLoop<T> {
  /** Runs a cycle soon; `external`: new work may have arrived (NOTIFY, enqueue), not only freed slots. */
  kick(external?: boolean): void
  /** What runs now. */
  running(): T[]
  /** Stops claiming, hands back claimed work not started; resolves when what runs has finished. */
  stop(): Promise<void>
}

/**
 * A cycle: prepare (after a wake-up), then claim enough for every free slot and one more per slot,
 * so that a slot starts its next unit the moment one ends. A cycle runs on kick, when a unit ends,
 * and every poll interval; after a failure (the database is away) the wait grows to half a minute.
 */
export function workLoop<T>(o: LoopOptions<T>): WorkLoop<T> {
  const { source } = o
  const running = new Map<Promise<void>, T>()
  const ready: T[] = []
  let stopped = false
  let cycle: Promise<void> | null = null
  let again = false
  let timer: NodeJS.Timeout | undefined
  let failures = 0
  let external = true
  const minClaim = o.minClaim ?? 1

  const kick = (wake = false) => {
    if (wake) external = true
    if (stopped) return
    if (cycle) {
      again = true
      return
    }
    clearTimeout(timer)
    cycle = runCycle().finally(() => {
      cycle = null
      if (again) {
        again = false
        kick()
      } else if (!stopped) {
        timer = setTimeout(() => kick(true), failures ? Math.min(o.pollMs * 2 ** failures, 30_000) : o.pollMs)
        timer.unref()
      }
    })
  }

  async function runCycle(): Promise<void> {
    try {
      for (;;) {
        let more = false
        const wake = external
        external = false
        if (wake && source.prepare) {
          try {
            more = await source.prepare()
          } catch (err) {
            external = true // prepared again on the next try
            throw err
          }
        }
        const want = 2 * o.concurrency - running.size - ready.length
        // A wake-up claims whatever it can; a freed slot waits for a batch's worth, or an idle loop.
        if (want > 0 && !stopped && (wake || want >= minClaim || ready.length === 0)) {
          ready.push(...(await source.claim(want, [...running.values(), ...ready])))
          startUnits()
        }
        if (!more) break
        external = true
      }
      failures = 0
    } catch (err) {
      failures = Math.min(failures + 1, 10)
      if (!stopped) o.log.warn({ err, loop: o.name }, 'background work cycle failed; trying again shortly')
    }
  }

  function startUnits() {
    while (!stopped && running.size < o.concurrency && ready.length) {
      const i = source.next ? source.next(ready, [...running.values()]) : 0
      const [item] = ready.splice(i, 1)
      const p = source.run(item!)
      running.set(p, item!)
      void p.finally(() => {
        running.delete(p)
        startUnits()
        kick() // claim what the slot will need next
      })
    }
  }

  kick(true)
  return {
    kick,
    running: () => [...running.values()],
    async stop() {
      stopped = true
      clearTimeout(timer)
      await cycle
      const unstarted = ready.splice(0)
      if (unstarted.length) {
        await source
          .release(unstarted)
          .catch((err: unknown) =>
            o.log.warn({ err, loop: o.name }, 'could not hand back claimed work; its leases will run out'),
          )
      }
      await Promise.all([...running.keys()])
    },
  }
}

/**
 * Hears a channel's NOTIFY on PostgreSQL until closed; nothing on the embedded database (one
 * session, no LISTEN: the loops poll). A LISTEN that fails leaves polling alone, and says so.
 */
export function listenFor(
  db: Db,
  channel: string,
  onMessage: (payload: string) => void,
  log: Logger,
): { close(): Promise<void> } {
  if (db.mode !== 'postgres') return { close: async () => {} }
  let closed = false
  const listening = db.sql.listen(channel, onMessage).catch((err: unknown) => {
    log.warn({ err, channel }, 'cannot LISTEN; polling only')
    return null
  })
  return {
    async close() {
      if (closed) return
      closed = true
      await (await listening)?.unlisten().catch(() => {})
    },
  }
}

// ---- jobs --------------------------------------------------------------------------------------

export interface Job<P = Record<string, unknown>> {
  id: string
  queue: string
  /** Whose work this is; null for the platform's own. */
  tenantId: string | null
  payload: P
  /** This attempt's number, from 1. */
  attempt: number
  maxAttempts: number
  /** When the job was due (for a schedule's job: its slot). */
  runAt: Date
  /** Aborted when the job is cancelled, or when the replica stops before the handler finished. */
  signal: AbortSignal
  log: Logger
}

export interface QueueDefinition<P = Record<string, unknown>> {
  name: string
  handler: (job: Job<P>) => Promise<void>
  /** Jobs of this queue in flight at once on one replica (default 1). */
  concurrency?: number
  /** Attempts before a job is failed, unless its enqueue said otherwise (default 5). */
  maxAttempts?: number
  /** How long before the next attempt, after attempt `attempt` failed (default 5 s doubling to 1 h, with jitter). */
  backoffMs?: (attempt: number) => number
  /** How long a claim is this replica's; renewed every third of it while the handler runs (default 60 s). */
  leaseMs?: number
  /**
   * How often to look for due work without being woken (the runner's pollMs by default). Queues fed
   * only by schedules can wait long: the replica that enqueues a slot wakes its own queue.
   */
  pollMs?: number
}

/** Thrown by a handler: `retry: false` fails the job at once; `retryInMs` sets the next attempt. */
export class JobFailure extends Error {
  override name = 'JobFailure'
  constructor(
    message: string,
    readonly opts: { retry?: boolean; retryInMs?: number } = {},
  ) {
    super(message)
  }
}

/** The reason a cancelled job's signal carries. */
export class JobCancelled extends JobFailure {
  override name = 'JobCancelled'
  constructor() {
    super('the job was cancelled', { retry: false })
  }
}

export interface EnqueueOptions {
  tenantId?: string | null
  /** When it is due (default now). */
  runAt?: Date
  maxAttempts?: number
  /** At most one job per queue and key: a second enqueue with the same key is a no-op (returns null). */
  uniqueKey?: string
}

/**
 * Exponential backoff: `firstMs` after the first failed attempt, doubling up to `capMs`. With jitter each wait is
 * within 10% either side, so that jobs which failed together do not all come back at once.
 */
export const exponentialBackoff =
  (o: { firstMs: number; capMs: number; jitter: boolean }) =>
  (attempt: number): number => {
    const ms = Math.min(o.firstMs * 2 ** (attempt - 1), o.capMs)
    return o.jitter ? ms * (0.9 + Math.random() * 0.2) : ms
  }

export const defaultBackoffMs = exponentialBackoff({ firstMs: 5000, capMs: 3600_000, jitter: true })

/**
 * Queues a job in the caller's transaction; its id, or null when a job with the same unique key
 * exists. Workers hear of it when the transaction commits. Queued inside a sampled span (a traced
 * request), the job keeps its traceparent: the job's trace links to that span.
 */
export async function enqueueJob(
  sql: TxSql,
  queue: string,
  payload: Record<string, unknown>,
  o: EnqueueOptions = {},
): Promise<string | null> {
  const id = newId()
  const rows = await sql<{ id: string }[]>`
    with inserted as (
      insert into jobs (id, queue, tenant_id, payload, run_at, max_attempts, unique_key, created_at, traceparent)
      values (${id}, ${queue}, ${o.tenantId ?? null}, ${sql.json(payload as never)}, coalesce(${o.runAt ?? null}::timestamptz, now()),
        ${o.maxAttempts ?? null}, ${o.uniqueKey ?? null}, now(), ${activeTraceparent()})
      on conflict (queue, unique_key) where unique_key is not null do nothing
      returning id
    )
    select id, pg_notify(${JOBS_CHANNEL}, ${queue}) from inserted`
  return rows[0]?.id ?? null
}

/**
 * Cancels a job: a queued one at once ('cancelled'); a running one is asked to stop ('requested':
 * its handler's signal aborts, and it ends cancelled). null when it is finished or unknown.
 */
export async function cancelJob(sql: TxSql, id: string): Promise<'cancelled' | 'requested' | null> {
  const [row] = await sql<{ status: string }[]>`
    update jobs set
      status = case when status = 'queued' then 'cancelled' else status end,
      finished_at = case when status = 'queued' then now() else finished_at end,
      cancel_requested = true
    where id = ${id} and status in ('queued', 'running')
    returning status`
  if (!row) return null
  if (row.status === 'running') await sql`select pg_notify(${JOBS_CHANNEL}, ${CANCEL_PREFIX + id})`
  return row.status === 'cancelled' ? 'cancelled' : 'requested'
}

export interface JobRecord {
  id: string
  queue: string
  tenantId: string | null
  status: 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'
  attempts: number
  /** null: the queue's own maximum. */
  maxAttempts: number | null
  runAt: Date
  lastError: string | null
  createdAt: Date
  startedAt: Date | null
  finishedAt: Date | null
}

export async function getJob(sql: TxSql, id: string): Promise<JobRecord | null> {
  const [r] = await sql<JobRow[]>`select * from jobs where id = ${id}`
  return r ? toRecord(r) : null
}

interface JobRow {
  id: string
  queue: string
  tenant_id: string | null
  party: string
  payload: Record<string, unknown>
  status: JobRecord['status']
  run_at: Date
  attempts: number
  /** null: the queue's own maximum. */
  max_attempts: number | null
  lease_token: string | null
  lease_until: Date | null
  cancel_requested: boolean
  last_error: string | null
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  /** The W3C traceparent of the traced request that queued it. */
  traceparent: string | null
}

const toRecord = (r: JobRow): JobRecord => ({
  id: r.id,
  queue: r.queue,
  tenantId: r.tenant_id,
  status: r.status,
  attempts: r.attempts,
  maxAttempts: r.max_attempts,
  runAt: r.run_at,
  lastError: r.last_error,
  createdAt: r.created_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
})

// ---- schedules ---------------------------------------------------------------------------------

export interface ScheduleDefinition {
  /** Unique across the deployment, e.g. 'audit.retention' or 'export:<tenant>:<id>'. */
  name: string
  queue: string
  /** node-cron's syntax: "m h dom mon dow", or with seconds first; day of month AND day of week must match. */
  cron?: string
  /** A fixed interval instead (at least a second): slots are multiples of it since the epoch, UTC. */
  everyMs?: number
  /** For cron: an IANA time zone (default UTC). */
  timezone?: string
  tenantId?: string | null
  payload?: Record<string, unknown>
  /** Whether a schedule seen for the first time runs its latest slot at once (default: from its next slot). */
  immediately?: boolean
}

/** Slot arithmetic for one schedule: the latest slot at or before a time, and the first after. */
export function slots(def: Pick<ScheduleDefinition, 'cron' | 'everyMs' | 'timezone'>): {
  latest(at: Date): Date | null
  after(at: Date): Date | null
} {
  if (def.everyMs !== undefined && def.everyMs !== null) {
    const every = Number(def.everyMs)
    if (!Number.isInteger(every) || every < 1000)
      throw new RangeError('a schedule interval is a whole number of milliseconds, at least 1000')
    return {
      latest: (at) => new Date(Math.floor(at.getTime() / every) * every),
      after: (at) => new Date((Math.floor(at.getTime() / every) + 1) * every),
    }
  }
  if (!def.cron) throw new RangeError('a schedule has a cron expression or an interval')
  const cron = new Cron(def.cron, {
    paused: true,
    mode: '5-or-6-parts',
    domAndDow: true,
    timezone: def.timezone ?? 'UTC',
  })
  return {
    // previousRuns includes a run in the same second as the reference: ask from just after `at`.
    latest: (at) => cron.previousRuns(1, new Date(at.getTime() + 1))[0] ?? null,
    after: (at) => cron.nextRun(at),
  }
}

/** Creates or updates a schedule in the caller's transaction (a tenant's scheduled export, say). */
export async function upsertSchedule(sql: TxSql, def: ScheduleDefinition, now: Date): Promise<void> {
  const s = slots(def) // refuses a bad expression before anything is written
  const first = def.immediately ? s.latest(now) : s.after(now)
  if (!first) throw new RangeError(`schedule ${def.name} has no slot`)
  await sql`
    insert into job_schedules (name, queue, tenant_id, payload, cron, every_ms, timezone, next_at, updated_at)
    values (${def.name}, ${def.queue}, ${def.tenantId ?? null}, ${sql.json((def.payload ?? {}) as never)}, ${def.cron ?? null},
      ${def.everyMs ?? null}, ${def.timezone ?? 'UTC'}, ${first}, ${now})
    on conflict (name) do update set
      queue = excluded.queue, tenant_id = excluded.tenant_id, payload = excluded.payload, updated_at = excluded.updated_at,
      -- A changed timing starts from its next slot; an unchanged one keeps its place.
      next_at = case
        when (job_schedules.cron, job_schedules.every_ms, job_schedules.timezone) is distinct from (excluded.cron, excluded.every_ms, excluded.timezone)
        then ${s.after(now) ?? first} else job_schedules.next_at end,
      cron = excluded.cron, every_ms = excluded.every_ms, timezone = excluded.timezone`
}

export async function removeSchedule(sql: TxSql, name: string): Promise<boolean> {
  return (await sql`delete from job_schedules where name = ${name}`).count > 0
}

interface ScheduleRow {
  name: string
  queue: string
  tenant_id: string | null
  payload: Record<string, unknown>
  cron: string | null
  every_ms: string | null
  timezone: string
  last_slot: Date | null
  next_at: Date
}

/**
 * Enqueues every due slot's job (each once, whichever replica gets there first) and moves the
 * schedules on; the queue of each job it enqueued.
 */
export async function runDueSchedules(db: Db, now: Date, log: Logger): Promise<string[]> {
  return db.system(async (sql) => {
    const due = await sql<
      ScheduleRow[]
    >`select * from job_schedules where next_at <= ${now} order by next_at limit 100 for update skip locked`
    const enqueued: string[] = []
    for (const row of due) {
      let s: ReturnType<typeof slots>
      try {
        s = slots({
          cron: row.cron ?? undefined,
          everyMs: row.every_ms === null ? undefined : Number(row.every_ms),
          timezone: row.timezone,
        })
      } catch (err) {
        // Written by an older release or by hand: park it rather than fail every tick.
        log.error({ err, schedule: row.name }, 'schedule cannot be read; it is parked for a year')
        await sql`update job_schedules set next_at = ${new Date(now.getTime() + PARK_MS)} where name = ${row.name}`
        continue
      }
      const slot = s.latest(now)
      if (slot && (!row.last_slot || slot > row.last_slot)) {
        const id = await enqueueJob(sql, row.queue, row.payload, {
          tenantId: row.tenant_id,
          runAt: slot,
          uniqueKey: `${row.name}@${slot.toISOString()}`,
        })
        if (id) enqueued.push(row.queue)
      }
      const next = s.after(now) ?? new Date(now.getTime() + PARK_MS)
      await sql`update job_schedules set last_slot = greatest(last_slot, ${slot}), next_at = ${next} where name = ${row.name}`
    }
    return enqueued
  })
}

// ---- the runner --------------------------------------------------------------------------------

export interface JobRunnerOptions {
  db: Db
  log: Logger
  /** Where the runner's metrics go (the app's /metrics); none when absent. */
  registry?: Registry
  /**
   * The clock of due times and schedules (tests move it); leases run on the database's clock, shared by every replica.
   */
  now?: Clock
  /** How often each queue looks for due work without a NOTIFY (default 1 s). */
  pollMs?: number
  /** How often schedules are looked at (default 1 s). */
  scheduleTickMs?: number
  /** Each attempt is a span (a trace of its own, linked to the request that queued the job); none when off. */
  tracing?: Tracing
}

export interface JobRunner {
  /** Declares a queue and its handler; before start(). */
  define<P extends Record<string, unknown>>(def: QueueDefinition<P>): void
  /** Declares a schedule the code needs (created or updated at start). */
  schedule(def: ScheduleDefinition): void
  start(): Promise<void>
  /**
   * Drains: stops claiming, lets running handlers finish for up to `graceMs` (default 10 s), aborts and hands back the
   * rest.
   */
  stop(opts?: { graceMs?: number }): Promise<void>
  /** Looks for due work on a queue now (or on every queue). */
  kick(queue?: string): void
  /** Enqueues the due slots now (the scheduler's tick; tests call it with a moved clock). */
  tickSchedules(): Promise<number>
  readonly queues: readonly string[]
}

interface Claimed {
  row: JobRow
  token: string
  share: Share
  controller: AbortController
}

export function createJobRunner(o: JobRunnerOptions): JobRunner {
  const clock = o.now ?? Date.now
  const pollMs = o.pollMs ?? 1000
  const defs = new Map<string, Required<Omit<QueueDefinition, 'handler'>> & { handler: QueueDefinition['handler'] }>()
  const schedules = new Map<string, ScheduleDefinition>()
  const loops = new Map<string, WorkLoop<Claimed>>()
  const runningById = new Map<string, Claimed>()
  let started = false
  let stopping = false
  let listener: { close(): Promise<void> } | null = null
  let scheduleTimer: NodeJS.Timeout | undefined
  let scheduling: Promise<unknown> | null = null
  const metrics = o.registry ? jobMetrics(o.registry, o.db, clock) : null

  const at = () => new Date(clock())
  // Completions are written together: while one write is on its way, those that finish meanwhile
  // wait for the next. A lone completion goes at once; a busy runner commits once for many.
  const complete = batched(async (done: { id: string; token: string; at: Date }[]) => {
    const rows = await o.db.system(
      (sql) => sql<{ id: string }[]>`
      update jobs j set status = 'completed', finished_at = d.at, lease_token = null, lease_until = null, last_error = null
      from unnest(${done.map((d) => d.id)}::uuid[], ${done.map((d) => d.token)}::uuid[], ${done.map((d) => d.at.toISOString())}::timestamptz[]) as d(id, token, at)
      where j.id = d.id and j.lease_token = d.token and j.status = 'running'
      returning j.id`,
    )
    return new Set(rows.map((r) => r.id))
  })

  function source(q: string): LoopSource<Claimed> {
    const def = defs.get(q)!
    const limits = fairLimits(def.concurrency)
    let cursor = ''
    return {
      // Leases that ran out (their worker died or lost the database): due again, or failed when
      // that was the last attempt.
      async prepare() {
        await o.db.system(
          (sql) => sql`
          update jobs set
            status = case when cancel_requested then 'cancelled' when attempts >= coalesce(max_attempts, ${def.maxAttempts}) then 'failed' else 'queued' end,
            finished_at = case when cancel_requested or attempts >= coalesce(max_attempts, ${def.maxAttempts}) then ${at()}::timestamptz end,
            last_error = 'the worker holding it stopped before it finished (its lease ran out)',
            lease_token = null, lease_until = null
          where queue = ${q} and status = 'running' and lease_until < now()`,
        )
        return false
      },
      async claim(want, held) {
        const now = at()
        const claimed = await o.db.system(async (sql) => {
          const heads = await dueHeads(sql, q, now, cursor, 64, want)
          if (!heads.length) return []
          cursor = heads[heads.length - 1]!.party
          const ranked = rankFair(
            heads.map((h) => ({ id: h.id, tenant: h.party, key: h.party, healthy: true, dueAt: h.run_at })),
            held.map((c) => c.share),
            limits,
            want,
          )
          const token = randomUUID()
          const rows = await sql<JobRow[]>`
            update jobs j set status = 'running', attempts = j.attempts + 1, lease_token = ${token},
              lease_until = now() + ${def.leaseMs} * interval '1 millisecond', started_at = coalesce(j.started_at, ${now})
            from (select id from jobs where id = any(${ranked.map((r) => r.id)}::uuid[]) and status = 'queued' for update skip locked) c
            where j.id = c.id
            returning j.*`
          const order = new Map(ranked.map((r, i) => [r.id, i]))
          rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!)
          return rows.map((row): Claimed => ({
            row,
            token,
            share: { tenant: row.party, key: row.party, healthy: true },
            controller: new AbortController(),
          }))
        })
        if (claimed.length < want) cursor = '' // the end of the parties was reached: start over next time
        return claimed
      },
      async release(items) {
        await o.db.system(
          (sql) => sql`
          update jobs set status = 'queued', attempts = attempts - 1, lease_token = null, lease_until = null
          where id = any(${items.map((c) => c.row.id)}::uuid[]) and status = 'running' and lease_token = any(${[...new Set(items.map((c) => c.token))]}::uuid[])`,
        )
      },
      next: (ready, running) =>
        nextFair(
          ready.map((c) => c.share),
          running.map((c) => c.share),
        ),
      run: (c) => runJob(def, c),
    }
  }

  async function runJob(
    def: QueueDefinition & { leaseMs: number; maxAttempts: number; backoffMs: (n: number) => number },
    c: Claimed,
  ): Promise<void> {
    const { row, token, controller } = c
    // A trace of its own (a job outlives the request that queued it), linked to that request's span.
    const span = o.tracing?.enabled
      ? o.tracing.tracer.startSpan(`job ${row.queue}`, {
          kind: SpanKind.CONSUMER,
          root: true,
          links: linkTo(row.traceparent),
          attributes: { 'atrium.job.queue': row.queue, 'atrium.job.id': row.id, 'atrium.job.attempt': row.attempts },
        })
      : null
    const log = o.log.child({
      jobId: row.id,
      queue: row.queue,
      ...(span?.isRecording() ? { trace_id: span.spanContext().traceId } : {}),
    })
    runningById.set(row.id, c)
    if (row.cancel_requested) controller.abort(new JobCancelled())
    // The lease is renewed while the handler runs; a renewal that finds the job no longer ours (a
    // lease that ran out while the database was away) or asked to cancel aborts the handler.
    const renew = setInterval(
      () => {
        o.db
          .system(
            (sql) => sql<{ cancel_requested: boolean }[]>`
        update jobs set lease_until = now() + ${def.leaseMs} * interval '1 millisecond' where id = ${row.id} and lease_token = ${token} and status = 'running'
        returning cancel_requested`,
          )
          .then(
            (rows) => {
              if (!rows.length) controller.abort(new Error('lease lost'))
              else if (rows[0]!.cancel_requested) controller.abort(new JobCancelled())
            },
            (err: unknown) => log.warn({ err }, 'could not renew a job lease; trying again'),
          )
      },
      Math.max(Math.min(def.leaseMs / 3, RENEW_MAX_MS), 100),
    )
    renew.unref()
    const t0 = performance.now()
    let error: unknown = null
    try {
      if (!controller.signal.aborted) {
        const job = {
          id: row.id,
          queue: row.queue,
          tenantId: row.tenant_id,
          payload: row.payload,
          attempt: row.attempts,
          maxAttempts: row.max_attempts ?? def.maxAttempts,
          runAt: row.run_at,
          signal: controller.signal,
          log,
        }
        await (span ? context.with(trace.setSpan(ROOT_CONTEXT, span), () => def.handler(job)) : def.handler(job))
      }
    } catch (err) {
      error = err
    } finally {
      clearInterval(renew)
      runningById.delete(row.id)
      if (span) {
        if (error) failSpan(span, errorCode(error))
        span.end()
      }
    }
    const ms = Math.round(performance.now() - t0)
    try {
      await recordOutcome(def, c, error)
    } catch (err) {
      // The work happened but its outcome could not be written: the lease runs out and the job is
      // taken again. Handlers are written to be run twice safely.
      log.error({ err }, 'could not record a job outcome; it will be taken again when its lease runs out')
      return
    }
    if (error) log.warn({ err: error, attempt: row.attempts, ms }, 'job attempt failed')
    else log.debug({ attempt: row.attempts, ms }, 'job completed')
  }

  async function recordOutcome(
    def: QueueDefinition & { maxAttempts: number; backoffMs: (n: number) => number },
    c: Claimed,
    error: unknown,
  ): Promise<void> {
    const { row, token, controller } = c
    const now = at()
    if (!error) {
      if ((await complete({ id: row.id, token, at: now })).has(row.id)) metrics?.finished(row.queue, 'completed')
      return
    }
    if (stopping && controller.signal.aborted && !(controller.signal.reason instanceof JobCancelled)) {
      // Aborted by the drain: handed back, as if never started.
      await o.db.system(
        (sql) => sql`
        update jobs set status = 'queued', attempts = attempts - 1, lease_token = null, lease_until = null, run_at = ${now}
        where id = ${row.id} and lease_token = ${token} and status = 'running'`,
      )
      return
    }
    const failure = error instanceof JobFailure ? error : null
    const cancelled = controller.signal.reason instanceof JobCancelled
    const retry = !cancelled && failure?.opts.retry !== false && row.attempts < (row.max_attempts ?? def.maxAttempts)
    const status = cancelled ? 'cancelled' : retry ? 'queued' : 'failed'
    const runAt = retry
      ? new Date(now.getTime() + (failure?.opts.retryInMs ?? def.backoffMs(row.attempts)))
      : row.run_at
    const message = describeError(error)
    const r = await o.db.system(
      (sql) => sql`
      update jobs set status = ${status}, run_at = ${runAt}, last_error = ${message}, lease_token = null, lease_until = null,
        finished_at = ${retry ? null : now}
      where id = ${row.id} and lease_token = ${token} and status = 'running'`,
    )
    if (r.count) metrics?.finished(row.queue, status === 'queued' ? 'retried' : status)
  }

  const tickSchedules = async () => {
    const queues = await runDueSchedules(o.db, at(), o.log)
    for (const q of queues) loops.get(q)?.kick(true)
    return queues.length
  }

  // The code's schedules are written at start; a database that cannot take them yet (its schema
  // not migrated, or away) gets them on a later tick, and the app starts meanwhile.
  let declared = false
  const declareSchedules = async () => {
    if (declared || !schedules.size) return
    await o.db.system(async (sql) => {
      for (const def of schedules.values()) await upsertSchedule(sql, def, at())
    })
    declared = true
  }

  function scheduleLoop() {
    if (stopping) return
    scheduling = declareSchedules()
      .then(tickSchedules)
      .catch((err: unknown) => o.log.warn({ err }, 'schedules could not be looked at; trying again shortly'))
      .finally(() => {
        scheduling = null
        if (!stopping) {
          scheduleTimer = setTimeout(scheduleLoop, o.scheduleTickMs ?? 1000)
          scheduleTimer.unref()
        }
      })
  }

  return {
    get queues() {
      return [...defs.keys()]
    },
    define(def) {
      if (started) throw new Error(`job queue ${def.name} defined after the runner started`)
      if (defs.has(def.name)) throw new Error(`job queue ${def.name} is defined twice`)
      defs.set(def.name, {
        name: def.name,
        handler: def.handler as QueueDefinition['handler'],
        concurrency: def.concurrency ?? 1,
        maxAttempts: def.maxAttempts ?? 5,
        backoffMs: def.backoffMs ?? defaultBackoffMs,
        leaseMs: def.leaseMs ?? 60_000,
        pollMs: def.pollMs ?? pollMs,
      })
      metrics?.defined(def.name)
    },
    schedule(def) {
      slots(def) // a bad expression fails at declaration, not at the first tick
      schedules.set(def.name, def)
    },
    async start() {
      if (started) return
      started = true
      await declareSchedules().catch((err: unknown) =>
        o.log.warn({ err }, 'schedules could not be written yet; trying again shortly'),
      )
      for (const [q, d] of defs) {
        // Claims of half a queue's concurrency: a claim overlaps the jobs still waiting to start.
        loops.set(
          q,
          workLoop({
            name: `jobs:${q}`,
            concurrency: d.concurrency,
            minClaim: Math.ceil(d.concurrency / 2),
            pollMs: d.pollMs,
            log: o.log,
            source: source(q),
          }),
        )
      }
      metrics?.watch(() => [...runningById.values()].map((c) => c.row.queue))
      listener = listenFor(
        o.db,
        JOBS_CHANNEL,
        (payload) => {
          if (payload.startsWith(CANCEL_PREFIX))
            runningById.get(payload.slice(CANCEL_PREFIX.length))?.controller.abort(new JobCancelled())
          else loops.get(payload)?.kick(true)
        },
        o.log,
      )
      scheduleLoop()
    },
    async stop({ graceMs = 10_000 } = {}) {
      stopping = true
      clearTimeout(scheduleTimer)
      await listener?.close()
      await scheduling
      const drained = Promise.all([...loops.values()].map((l) => l.stop()))
      let timer: NodeJS.Timeout | undefined
      const late = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(true), graceMs)
        }),
      ])
      clearTimeout(timer)
      if (late) {
        // Handlers still running past the grace: aborted; their outcome hands their jobs back.
        for (const c of runningById.values()) c.controller.abort(new Error('the replica is stopping'))
        await Promise.race([drained, new Promise((r) => setTimeout(r, 2000).unref())])
      }
    },
    kick(queue) {
      if (queue) loops.get(queue)?.kick(true)
      else for (const l of loops.values()) l.kick(true)
    },
    tickSchedules,
  }
}

/**
 * Calls of `write` with everything asked for while the previous call was on its way; each caller gets its call's
 * result.
 */
function batched<T, R>(write: (items: T[]) => Promise<R>, max = 500): (item: T) => Promise<R> {
  const waiting: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = []
  let writing = false
  const flush = async () => {
    writing = true
    while (waiting.length) {
      const batch = waiting.splice(0, max)
      try {
        const r = await write(batch.map((b) => b.item))
        for (const b of batch) b.resolve(r)
      } catch (err) {
        for (const b of batch) b.reject(err)
      }
    }
    writing = false
  }
  return (item) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ item, resolve, reject })
      if (!writing) void flush()
    })
}

/**
 * Up to `maxParties` parties with due jobs on a queue, from `after` on (wrapping round to the
 * start), and the first `perParty` due jobs of each: a skip scan over the queued index, so a party
 * with a long backlog costs one probe, not its whole backlog. Starting after the last party served
 * last time lets every party have its turn when there are more than `maxParties`.
 */
async function dueHeads(sql: TxSql, queue: string, now: Date, after: string, maxParties: number, perParty: number) {
  const scan = (from: string, inclusive: boolean) => sql<{ id: string; party: string; run_at: Date }[]>`
    with recursive parties(party) as (
      (select party from jobs where queue = ${queue} and status = 'queued' and run_at <= ${now}
         and (party > ${from} or (${inclusive} and party = ${from})) order by party limit 1)
      union all
      select (select j.party from jobs j where j.queue = ${queue} and j.status = 'queued' and j.run_at <= ${now} and j.party > p.party order by j.party limit 1)
      from parties p where p.party is not null
    )
    select h.id, h.party, h.run_at
    from (select party from parties where party is not null limit ${maxParties}) p
    cross join lateral (
      select id, party, run_at from jobs
      where queue = ${queue} and status = 'queued' and party = p.party and run_at <= ${now}
      order by run_at, id limit ${perParty}
    ) h`
  const first = await scan(after, after === '')
  const seen = new Set(first.map((h) => h.party))
  if (after === '' || seen.size >= maxParties) return first
  return [...first, ...(await scan('', true)).filter((h) => !seen.has(h.party))]
}

function describeError(err: unknown): string {
  const text = err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err)
  return text.replaceAll('\u0000', '\uFFFD').slice(0, ERROR_CHARS)
}

// ---- metrics -----------------------------------------------------------------------------------

const JOB_OUTCOMES = ['completed', 'retried', 'failed', 'cancelled'] as const

function jobMetrics(registry: Registry, db: Db, clock: Clock) {
  // A runner started again on the same registry (tests) replaces the one before (named).
  let runningHere: () => string[] = () => []
  let lastCounts: { queue: string; status: string; n: number }[] = []
  new Gauge({
    ...named('atrium_jobs', registry),
    help: 'Jobs in the database by queue and state (queued, running, failed in the last 30 days)',
    labelNames: ['queue', 'state'] as const,
    async collect() {
      // The database away: the last values stand (the scrape still answers).
      lastCounts = await db
        .system(
          (sql) => sql<{ queue: string; status: string; n: number }[]>`
        select queue, status, count(*)::int as n from jobs where status in ('queued', 'running', 'failed') group by queue, status`,
        )
        .catch(() => lastCounts)
      this.reset()
      for (const c of lastCounts) this.set({ queue: c.queue, state: c.status }, c.n)
    },
  })
  new Gauge({
    ...named('atrium_jobs_running_here', registry),
    help: 'Jobs this replica is running, by queue',
    labelNames: ['queue'] as const,
    collect() {
      this.reset()
      const counts = new Map<string, number>()
      for (const q of runningHere()) counts.set(q, (counts.get(q) ?? 0) + 1)
      for (const [queue, n] of counts) this.set({ queue }, n)
    },
  })
  const finished = new Counter({
    ...named('atrium_jobs_finished_total', registry),
    help: 'Job attempts this replica finished, by queue and outcome (completed, retried, failed, cancelled)',
    labelNames: ['queue', 'outcome'] as const,
  })
  let lastOldest: { queue: string; s: number }[] = []
  new Gauge({
    ...named('atrium_jobs_oldest_waiting_seconds', registry),
    help: 'How long the oldest due job of each queue has waited (absent: none waits)',
    labelNames: ['queue'] as const,
    async collect() {
      lastOldest = await db
        .system(
          (sql) => sql<{ queue: string; s: number }[]>`
        select queue, extract(epoch from (${new Date(clock())}::timestamptz - min(run_at)))::float8 as s
        from jobs where status = 'queued' and run_at <= ${new Date(clock())} group by queue`,
        )
        .catch(() => lastOldest)
      this.reset()
      for (const r of lastOldest) this.set({ queue: r.queue }, Math.max(0, r.s))
    },
  })
  return {
    finished: (queue: string, outcome: string) => finished.inc({ queue, outcome }),
    /**
     * A queue's outcomes exported at 0 from its definition: a counter that first appears at 1 has no
     * increase to alert on (AtriumJobsFailing).
     */
    defined: (queue: string) => {
      for (const outcome of JOB_OUTCOMES) finished.inc({ queue, outcome }, 0)
    },
    watch: (fn: () => string[]) => {
      runningHere = fn
    },
  }
}

/**
 * The runner's own upkeep (queue 'jobs.sweep', server/jobs.ts): finished jobs are kept a while for
 * inspection, then removed.
 */
export const jobUpkeep =
  (db: Db, clock: Clock = Date.now) =>
  async (): Promise<void> => {
    const now = clock()
    await db.system(
      (sql) => sql`
      delete from jobs where finished_at is not null and (
        (status = 'completed' and finished_at < ${new Date(now - KEEP_COMPLETED_MS)}) or
        (status in ('failed', 'cancelled') and finished_at < ${new Date(now - KEEP_FAILED_MS)}))`,
    )
  }
