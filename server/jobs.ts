// Every queue of the job runner (platform/jobs.ts), in one list: its name, the payload its jobs
// carry, its handler, how many run at once on a replica, how long a claim lasts, how it retries,
// and the schedule that feeds it when it is recurring work. Modules export handlers only; each
// entry takes its handler from the services (services.ts) it is given, and initJobs defines every
// queue and schedule on the runner from this list (app.ts calls it). docs/architecture.md's table of
// queues is checked against it (test/server/jobs.test.ts). A new queue: the module's handler, its
// payload and entry here, and its row in the docs' table.
import type { Config } from './config.js'
import { replyGenerator } from './modules/chat/replies.js'
import { automaticBackups } from './modules/exports/backups.js'
import { DATA_ATTEMPTS } from './modules/exports/limits.js'
import { auditRetention } from './modules/audit/service.js'
import { collectFileObjects } from './modules/projects/collector.js'
import { sweepExpiredBackups } from './modules/projects/service.js'
import { eventsRetention } from './modules/webhooks/worker.js'
import { exponentialBackoff, jobUpkeep, type Job, type JobRunner, type QueueDefinition } from './platform/jobs.js'
import { clockCheck } from './platform/trusted-time.js'
import type { Services } from './services.js'

/** What a recurring queue's jobs carry: nothing (its schedule enqueues `{}`). */
type Recurring = Record<string, never>

/** The payload of each queue's jobs, as enqueueJob is given it. */
export interface JobPayloads {
  /** An agent run's next steps (modules/agents/runner.ts). */
  'agents.run': { runId: string }
  /** A chat reply generated from the model (modules/chat/replies.ts). */
  'chat.reply': { sessionId: string; replyId: string }
  /** A tenant export written to its store or its destination (modules/exports/service.ts). */
  'exports.run': { exportId: string }
  /** A slot of a tenant's export schedule (modules/exports/schedules.ts); the tenants' own schedules feed it. */
  'exports.scheduled': { scheduleId: string }
  /** A tenant archive restored (modules/restores/service.ts). */
  'restores.run': { restoreId: string }
  /** The plans' automatic backups and the archives' retention (modules/exports/backups.ts). */
  'exports.backups': Recurring
  /** Project backups past their plan's keeping (modules/projects/service.ts). */
  'projects.backup-retention': Recurring
  /** Project file objects nothing points at (modules/projects/collector.ts). */
  'projects.collect-objects': Recurring
  /** Audit events past their tenant's retention (modules/audit/service.ts). */
  'audit.retention': Recurring
  /** Webhook events nothing waits to deliver any more (modules/webhooks/worker.ts). */
  'webhooks.events-retention': Recurring
  /** The trusted time's clocks read again (platform/trusted-time.ts). */
  'license.clock': Recurring
  /** Finished jobs removed after their keeping (platform/jobs.ts). */
  'jobs.sweep': Recurring
}

export type QueueName = keyof JobPayloads

/** A queue's handler. */
export type JobHandler<Q extends QueueName> = (job: Job<JobPayloads[Q]>) => Promise<void>

/** One handler per queue. */
export type JobHandlers = { [Q in QueueName]: JobHandler<Q> }

/** What tests change of the queues' numbers (AppOptions); the registry's values otherwise. */
export interface QueueOptions {
  /** Agent runs in flight at once on one replica (default AGENT_RUNS_PER_REPLICA). */
  agentRunConcurrency?: number
  /**
   * How long a replica's claim on a run lasts without renewal: how soon another takes over a dead one (default 15 s).
   */
  agentRunLeaseMs?: number
  /** Replies generated at once on one replica (default AGENT_RUNS_PER_REPLICA: both mostly wait on the model). */
  chatReplyConcurrency?: number
  /**
   * How long a replica's claim on an export lasts without renewal: how soon another takes over a dead one (default 15
   * s).
   */
  exportLeaseMs?: number
  /**
   * How long a replica's claim on a restore lasts without renewal: how soon another takes over a dead one (default 15
   * s).
   */
  restoreLeaseMs?: number
}

export interface QueueEntry<Q extends QueueName = QueueName> {
  /** The module's handler, made from the services. */
  handler: (s: Services) => JobHandler<Q>
  /** Jobs in flight at once on one replica: a number, or the setting that says it (default 1). */
  concurrency?: number | 'AGENT_RUNS_PER_REPLICA'
  /** How long a claim lasts without renewal: how soon another replica takes over a dead one's job (default 60 s). */
  leaseMs?: number
  /** Attempts before a job is failed, unless its enqueue said otherwise (default 5). */
  maxAttempts?: number
  /** The wait before the next attempt (default 5 s doubling to 1 h, with jitter). */
  backoffMs?: (attempt: number) => number
  /** How often to look for due work without being woken (the runner's poll by default). */
  pollMs?: number
  /**
   * Recurring work: a schedule of the queue's own name feeds it. An interval's runs at once on a new
   * installation; a cron expression's (UTC) waits for its first slot. Such a queue waits for its
   * schedule rather than polling (once a minute).
   */
  schedule?: { everyMs: number } | { cron: string }
  /** The QueueOptions fields that replace this entry's numbers. */
  options?: { concurrency?: keyof QueueOptions; leaseMs?: keyof QueueOptions }
}

const HOUR = 3600_000

/**
 * Data work (an export, a schedule's slot, a restore), handled by its service's `run`: each is run again from its
 * start after a crash, up to DATA_ATTEMPTS attempts (as the enqueue says too), backing off from 5 s to a minute.
 * `lease` is the QueueOptions field that replaces its lease.
 */
const data = <Q extends QueueName>({
  service,
  lease,
  ...o
}: Omit<QueueEntry<Q>, 'handler' | 'options'> & {
  service: (s: Services) => { run: JobHandler<Q> }
  lease: keyof QueueOptions
}): QueueEntry<Q> => ({
  handler: (s) => (job) => service(s).run(job),
  leaseMs: 15_000,
  maxAttempts: DATA_ATTEMPTS,
  backoffMs: exponentialBackoff({ firstMs: 5000, capMs: 60_000, jitter: false }),
  options: { leaseMs: lease },
  ...o,
})

const log = (s: Services, module: string) => s.platform.log.child({ module })
const at = (s: Services) => ({ now: new Date(s.now()) })

/** Every queue. */
export const QUEUES: { readonly [Q in QueueName]: QueueEntry<Q> } = {
  'agents.run': {
    handler: (s) => (job) => s.runs.handle(job),
    concurrency: 'AGENT_RUNS_PER_REPLICA',
    leaseMs: 15_000,
    // A step that failed for a fault of ours (the database away) is tried again soon: the run resumes.
    backoffMs: exponentialBackoff({ firstMs: 1000, capMs: 30_000, jitter: false }),
    options: { concurrency: 'agentRunConcurrency', leaseMs: 'agentRunLeaseMs' },
  },
  'chat.reply': {
    handler: (s) =>
      replyGenerator({
        db: s.platform.db,
        cache: s.platform.cache,
        llm: s.llm,
        connection: (tenantId) => s.llmSettings.connection(tenantId),
      }),
    concurrency: 'AGENT_RUNS_PER_REPLICA',
    leaseMs: 15_000,
    maxAttempts: 2,
    options: { concurrency: 'chatReplyConcurrency' },
  },
  'exports.run': data({ service: (s) => s.exports, concurrency: 2, lease: 'exportLeaseMs' }),
  // Its slots are enqueued by the schedules' tick, which wakes this queue on its replica: it polls seldom.
  'exports.scheduled': data({ service: (s) => s.schedules, concurrency: 2, pollMs: 10_000, lease: 'exportLeaseMs' }),
  'restores.run': data({ service: (s) => s.restores, concurrency: 1, lease: 'restoreLeaseMs' }),
  'exports.backups': {
    handler: (s) => automaticBackups({ ...s.platform, exports: s.exports, log: log(s, 'exports'), now: s.now }),
    leaseMs: 10 * 60_000,
    schedule: { everyMs: HOUR },
  },
  'projects.backup-retention': {
    handler: (s) => async () => void (await sweepExpiredBackups({ ...s.platform, log: log(s, 'projects') }, at(s))),
    leaseMs: 10 * 60_000,
    schedule: { everyMs: HOUR },
  },
  'projects.collect-objects': {
    handler: (s) => async () =>
      void (await collectFileObjects({ ...s.platform, files: s.files, log: log(s, 'projects') }, at(s))),
    leaseMs: 10 * 60_000,
    schedule: { everyMs: 6 * HOUR },
  },
  'audit.retention': { handler: (s) => auditRetention(s.auditLog, log(s, 'audit')), schedule: { everyMs: HOUR } },
  'webhooks.events-retention': {
    handler: (s) => eventsRetention({ db: s.platform.db, log: log(s, 'webhooks'), now: s.now }),
    schedule: { everyMs: HOUR },
  },
  // Once per deployment each hour (the runner leases it to one replica).
  'license.clock': {
    handler: (s) => clockCheck(s.platform.db, s.platform.time, s.platform.log),
    schedule: { everyMs: HOUR },
  },
  'jobs.sweep': { handler: (s) => jobUpkeep(s.platform.db, s.now), schedule: { cron: '17 3 * * *' } },
}

/** Each queue's handler, made from the services. */
export const jobHandlers = (s: Services): JobHandlers =>
  Object.fromEntries(
    (Object.entries(QUEUES) as [QueueName, QueueEntry][]).map(([name, q]) => [name, q.handler(s)]),
  ) as JobHandlers

/** A queue's concurrency and lease with the options and settings applied. */
export function tuned(
  q: QueueEntry,
  config: Pick<Config, 'AGENT_RUNS_PER_REPLICA'>,
  options: QueueOptions = {},
): { concurrency?: number; leaseMs?: number } {
  const concurrency = typeof q.concurrency === 'string' ? config[q.concurrency] : q.concurrency
  return {
    concurrency: (q.options?.concurrency && options[q.options.concurrency]) || concurrency,
    leaseMs: (q.options?.leaseMs && options[q.options.leaseMs]) || q.leaseMs,
  }
}

/** Defines every queue of QUEUES, with its handler, and the schedules of the recurring ones, on the runner. */
export function initJobs(
  runner: JobRunner,
  handlers: JobHandlers,
  config: Pick<Config, 'AGENT_RUNS_PER_REPLICA'>,
  options: QueueOptions = {},
): void {
  for (const [name, q] of Object.entries(QUEUES) as [QueueName, QueueEntry][]) {
    runner.define({
      name,
      handler: handlers[name] as QueueDefinition['handler'],
      ...tuned(q, config, options),
      maxAttempts: q.maxAttempts,
      backoffMs: q.backoffMs,
      pollMs: q.schedule ? 60_000 : q.pollMs,
    })
    if (q.schedule) runner.schedule({ name, queue: name, ...q.schedule, immediately: 'everyMs' in q.schedule })
  }
}
