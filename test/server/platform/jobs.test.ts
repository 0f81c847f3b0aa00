// The job runner on the test's database (real PostgreSQL when TEST_DATABASE_URL is set, embedded
// PGlite otherwise): transactional enqueue, retries, cancel, fairness between tenants, concurrency,
// schedules, drain, metrics; and, on PostgreSQL, a worker killed with SIGKILL and two replicas
// sharing one schedule (in processes of their own).
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { Registry } from 'prom-client'
import {
  cancelJob,
  createJobRunner,
  enqueueJob,
  getJob,
  JobFailure,
  removeSchedule,
  runDueSchedules,
  slots,
  upsertSchedule,
  type JobRunner,
  type JobRunnerOptions,
  type QueueDefinition,
} from '../../../server/platform/jobs.js'
import type { Platform } from '../../../server/platform/index.js'
import { ipcChild, type IpcChild } from '../../helpers/ipc.js'
import { services, testPlatform } from '../../helpers/platform.js'

const platform = await testPlatform(t)
const { db, log } = platform
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function newTenant(p: Platform = platform): Promise<string> {
  const id = randomUUID()
  await p.db.sql`insert into tenants (id, name, plan) values (${id}, ${'jobs ' + id.slice(0, 8)}, 'pro')`
  return id
}

/** A runner on the test's database, stopped when the test ends. */
function runner(tt: Test, queues: QueueDefinition[], o: Partial<JobRunnerOptions> = {}): JobRunner {
  const r = createJobRunner({ db, log, pollMs: 20, ...o })
  for (const q of queues) r.define(q)
  tt.teardown(() => r.stop({ graceMs: 500 }))
  return r
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

const queue = () => `test.${randomUUID().slice(0, 8)}`
const statusOf = async (id: string) => (await db.system((sql) => getJob(sql, id)))!.status

t.test(
  'a job enqueued in a transaction that rolls back never exists and never runs; a committed one runs once',
  async (t) => {
    const q = queue()
    const ran: string[] = []
    const r = runner(t, [{ name: q, handler: async (job) => void ran.push(job.payload.n as string) }])
    await r.start()
    const failed = db.system(async (sql) => {
      await enqueueJob(sql, q, { n: 'rolled back' })
      throw new Error('the change failed')
    })
    await t.rejects(failed, /the change failed/)
    const id = await db.system((sql) => enqueueJob(sql, q, { n: 'committed' }))
    await until('the committed job', async () => (await statusOf(id!)) === 'completed')
    await sleep(200) // time enough for a wrongly stored job to run too
    t.same(ran, ['committed'])
    const [count] = await db.sql<{ n: number }[]>`select count(*)::int as n from jobs where queue = ${q}`
    t.equal(count?.n, 1, 'only the committed job is in the table')
  },
)

t.test('a failing job is retried with backoff up to its maximum, then failed with the last error', async (t) => {
  const q = queue()
  const attempts = new Map<string, number[]>()
  const r = runner(t, [
    {
      name: q,
      maxAttempts: 3,
      backoffMs: () => 30,
      handler: async (job) => {
        attempts.set(job.payload.kind as string, [...(attempts.get(job.payload.kind as string) ?? []), job.attempt])
        if (job.payload.kind === 'flaky' && job.attempt < 3) throw new Error(`attempt ${job.attempt} failed`)
        if (job.payload.kind === 'broken') throw new Error('always broken')
        if (job.payload.kind === 'final') throw new JobFailure('the input can never work', { retry: false })
      },
    },
  ])
  await r.start()
  const [flaky, broken, final] = await db.system(async (sql) => [
    await enqueueJob(sql, q, { kind: 'flaky' }),
    await enqueueJob(sql, q, { kind: 'broken' }),
    await enqueueJob(sql, q, { kind: 'final' }),
  ])
  await until('every job finished', async () => {
    const s = await Promise.all([flaky!, broken!, final!].map(statusOf))
    return s.every((x) => x === 'completed' || x === 'failed')
  })
  const get = (id: string) => db.system((sql) => getJob(sql, id))
  t.match(await get(flaky!), { status: 'completed', attempts: 3, lastError: null })
  t.match(await get(broken!), { status: 'failed', attempts: 3, lastError: 'always broken' })
  t.match(await get(final!), { status: 'failed', attempts: 1, lastError: 'JobFailure: the input can never work' })
  t.same(attempts.get('flaky'), [1, 2, 3])
  t.same(attempts.get('final'), [1], 'a failure that says no retry is not retried')
})

t.test('cancel: a queued job never runs; a running job sees its signal abort and ends cancelled', async (t) => {
  const q = queue()
  const started: string[] = []
  let aborted = false
  const r = runner(
    t,
    [
      {
        name: q,
        handler: async (job) => {
          started.push(job.payload.name as string)
          await new Promise<void>((resolve, reject) => {
            job.signal.addEventListener('abort', () => {
              aborted = true
              reject(job.signal.reason as Error)
            })
            setTimeout(resolve, 10_000).unref()
          })
        },
      },
    ],
    { pollMs: 50 },
  )
  const [queued] = await db.system(async (sql) => [
    await enqueueJob(sql, q, { name: 'queued' }, { runAt: new Date(Date.now() + 3600_000) }),
  ])
  t.equal(await db.system((sql) => cancelJob(sql, queued!)), 'cancelled')
  t.equal(await statusOf(queued!), 'cancelled')
  await r.start()
  const running = await db.system((sql) => enqueueJob(sql, q, { name: 'running' }))
  await until('the job to start', () => started.includes('running'))
  t.equal(await db.system((sql) => cancelJob(sql, running!)), 'requested')
  await until('the job to end', async () => (await statusOf(running!)) === 'cancelled')
  t.ok(aborted, 'the handler was told through its signal')
  t.notOk(started.includes('queued'), 'the cancelled queued job never ran')
  t.equal(await db.system((sql) => cancelJob(sql, running!)), null, 'a finished job cannot be cancelled')
})

t.test("1,000 jobs of tenant A and 1 of tenant B: B starts before A's last, within the first few", async (t) => {
  const q = queue()
  const [a, b] = [await newTenant(), await newTenant()]
  await db.system(async (sql) => {
    await sql`insert into jobs (id, queue, tenant_id, payload, run_at, max_attempts, created_at)
      select gen_random_uuid(), ${q}, ${a}, jsonb_build_object('i', i), now() - interval '1 minute' + i * interval '1 millisecond', null, now()
      from generate_series(1, 1000) i`
    await enqueueJob(sql, q, { i: 'b' }, { tenantId: b })
  })
  const order: string[] = []
  const r = runner(t, [{ name: q, concurrency: 2, handler: async (job) => void order.push(job.tenantId!) }])
  await r.start()
  await until('all 1,001 jobs', () => order.length === 1001, 60_000)
  const bAt = order.indexOf(b)
  t.ok(bAt >= 0 && bAt < order.lastIndexOf(a), `B's job started at ${bAt}, before A's last`)
  t.ok(bAt <= 4, `B waited behind at most a claim's worth of A's jobs (started ${bAt}th)`)
})

t.test('a queue runs at most its concurrency at once on a replica', async (t) => {
  const q = queue()
  let now = 0
  let most = 0
  const r = runner(t, [
    {
      name: q,
      concurrency: 3,
      handler: async () => {
        most = Math.max(most, ++now)
        await sleep(30)
        now--
      },
    },
  ])
  await db.system(async (sql) => {
    for (let i = 0; i < 20; i++) await enqueueJob(sql, q, { i })
  })
  await r.start()
  await until(
    'all done',
    async () => (await db.sql`select 1 from jobs where queue = ${q} and status <> 'completed'`).length === 0,
  )
  t.equal(most, 3)
})

t.test(
  'drain: a running handler that finishes within the grace completes; one that does not is handed back, its attempt not counted',
  async (t) => {
    const q = queue()
    const started = new Set<string>()
    const r = createJobRunner({ db, log, pollMs: 20 })
    r.define({
      name: q,
      concurrency: 2,
      handler: async (job) => {
        started.add(job.payload.kind as string)
        if (job.payload.kind === 'quick') return void (await sleep(100))
        await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason as Error)))
      },
    })
    const [quick, stuck] = await db.system(async (sql) => [
      await enqueueJob(sql, q, { kind: 'quick' }),
      await enqueueJob(sql, q, { kind: 'stuck' }),
    ])
    await r.start()
    await until('both started', () => started.size === 2)
    await r.stop({ graceMs: 300 })
    t.equal(await statusOf(quick!), 'completed')
    t.match(
      await db.system((sql) => getJob(sql, stuck!)),
      { status: 'queued', attempts: 0 },
      'handed back as if never started',
    )
    const [late] = await db.system(async (sql) => [await enqueueJob(sql, q, { kind: 'quick' })])
    await sleep(150)
    t.equal(await statusOf(late!), 'queued', 'a stopped runner claims nothing more')
    await db.sql`delete from jobs where queue = ${q}`
  },
)

t.test(
  "slots: intervals are multiples since the epoch; cron follows node-cron's syntax, day of month and day of week both",
  async (t) => {
    const every = slots({ everyMs: 60_000 })
    t.same(every.latest(new Date('2026-11-25T10:00:59.999Z')), new Date('2026-11-25T10:00:00Z'))
    t.same(every.after(new Date('2026-11-25T10:00:00Z')), new Date('2026-11-25T10:01:00Z'))
    const secs = slots({ cron: '*/15 * * * * *' })
    t.same(secs.latest(new Date('2026-11-25T10:00:14Z')), new Date('2026-11-25T10:00:00Z'))
    t.same(secs.after(new Date('2026-11-25T10:00:14Z')), new Date('2026-11-25T10:00:15Z'))
    // The 13th, when it is a Friday: 2026-11-13 is one.
    const friday13 = slots({ cron: '0 9 13 * fri' })
    t.same(friday13.after(new Date('2026-10-01T00:00:00Z')), new Date('2026-11-13T09:00:00Z'))
    const berlin = slots({ cron: '0 2 * * *', timezone: 'Europe/Berlin' })
    t.same(
      berlin.after(new Date('2026-11-25T00:00:00Z')),
      new Date('2026-11-25T01:00:00Z'),
      'at 02:00 in Berlin, 01:00 UTC in winter',
    )
    t.throws(() => slots({ cron: '61 * * * *' }))
    t.throws(() => slots({ everyMs: 10 }), RangeError)
    t.throws(() => slots({}), RangeError)
  },
)

t.test('a schedule runs each slot once, and only the latest of the slots missed while nothing ran', async (t) => {
  const q = queue()
  const name = `${q}.every-minute`
  let now = Date.parse('2026-11-25T10:00:30Z')
  const ran: string[] = []
  const r = runner(t, [{ name: q, handler: async (job) => void ran.push(job.runAt.toISOString()) }], {
    now: () => now,
    scheduleTickMs: 3600_000,
  })
  r.schedule({ name, queue: q, everyMs: 60_000 })
  await r.start()
  t.equal(await r.tickSchedules(), 0, 'nothing before the first slot after the schedule was made')
  now = Date.parse('2026-11-25T10:01:05Z')
  t.equal(await r.tickSchedules(), 1)
  t.equal(await r.tickSchedules(), 0, 'the same slot again: nothing')
  // Every replica down from 10:02 to 10:07:10: of the five slots missed, the latest runs once.
  now = Date.parse('2026-11-25T10:07:10Z')
  t.equal(await r.tickSchedules(), 1)
  r.kick()
  await until('both slots ran', () => ran.length === 2)
  t.same(ran, ['2026-11-25T10:01:00.000Z', '2026-11-25T10:07:00.000Z'])
  await db.system((sql) => removeSchedule(sql, name))
})

t.test(
  'a schedule made with `immediately` runs its latest slot at once; changing its timing starts from its next slot',
  async (t) => {
    const q = queue()
    const name = `${q}.sweep`
    const now = new Date('2026-11-25T10:30:00Z')
    await db.system((sql) => upsertSchedule(sql, { name, queue: q, everyMs: 3600_000, immediately: true }, now))
    t.same(await runDueSchedules(db, now, log), [q])
    await db.system((sql) => upsertSchedule(sql, { name, queue: q, cron: '0 */2 * * *' }, now))
    t.same(
      await runDueSchedules(db, new Date('2026-11-25T11:30:00Z'), log),
      [],
      'not at 11:00, which the new timing has no slot for',
    )
    t.same(await runDueSchedules(db, new Date('2026-11-25T12:00:00Z'), log), [q])
    const keys = (
      await db.sql<{ unique_key: string }[]>`select unique_key from jobs where queue = ${q} order by run_at`
    ).map((r) => r.unique_key)
    t.same(keys, [`${name}@2026-11-25T10:00:00.000Z`, `${name}@2026-11-25T12:00:00.000Z`])
    t.rejects(
      db.system((sql) => upsertSchedule(sql, { name: `${q}.bad`, queue: q, cron: 'every day' }, now)),
      'a bad expression is refused before anything is written',
    )
    await db.system((sql) => removeSchedule(sql, name))
  },
)

t.test(
  'metrics: jobs by queue and state, finished attempts by outcome, the age of the oldest waiting job',
  async (t) => {
    const q = queue()
    const registry = new Registry()
    const r = runner(
      t,
      [
        {
          name: q,
          maxAttempts: 1,
          handler: async (job) => {
            if (job.payload.fail) throw new Error('no')
          },
        },
      ],
      { registry },
    )
    await db.system(async (sql) => {
      await enqueueJob(sql, q, { fail: false })
      await enqueueJob(sql, q, { fail: true })
    })
    await r.start()
    await until(
      'both finished',
      async () =>
        (await db.sql`select 1 from jobs where queue = ${q} and status in ('completed', 'failed')`).length === 2,
    )
    const other = queue()
    await db.system((sql) => enqueueJob(sql, other, {}, { runAt: new Date(Date.now() - 90_000) }))
    const text = await registry.metrics()
    t.match(text, `atrium_jobs{queue="${q}",state="failed"} 1`)
    t.match(text, `atrium_jobs{queue="${other}",state="queued"} 1`)
    t.match(text, `atrium_jobs_finished_total{queue="${q}",outcome="completed"} 1`)
    t.match(text, `atrium_jobs_finished_total{queue="${q}",outcome="failed"} 1`)
    // Exported at 0 from the queue's definition, so that a rate or increase sees the first one.
    t.match(text, `atrium_jobs_finished_total{queue="${q}",outcome="cancelled"} 0`)
    const oldest = Number(
      new RegExp(`atrium_jobs_oldest_waiting_seconds\\{queue="${other}"\\} ([0-9.]+)`).exec(text)?.[1],
    )
    t.ok(oldest >= 89 && oldest < 200, `the oldest waiting job is about 90 s old (${oldest})`)
    await db.sql`delete from jobs where queue = ${other}`
  },
)

// ---- in processes of their own, on PostgreSQL ----------------------------------------------------

/** What a worker process says (jobs-worker.ts). */
interface Msg {
  ready?: number
  started?: string
  pid?: number
  ticked?: number
  enqueued?: number
  error?: string
  ran?: string
  slot?: string
}

const WORKER = fileURLToPath(new URL('./jobs-worker.ts', import.meta.url))
const postgresOnly = services.databaseUrl
  ? false
  : 'needs PostgreSQL (TEST_DATABASE_URL): replicas in processes of their own share one database server'

const worker = (tt: Test, env: Record<string, string>): IpcChild<Msg> =>
  ipcChild<Msg>(tt, WORKER, { ...process.env, DATABASE_URL: platform.config.DATABASE_URL, ...env })

t.test(
  'on PostgreSQL a committed job wakes an idle runner at once (NOTIFY), long before its next poll',
  { skip: postgresOnly },
  async (t) => {
    const q = queue()
    const ran: number[] = []
    const r = runner(t, [{ name: q, handler: async () => void ran.push(Date.now()) }], { pollMs: 60_000 })
    await r.start()
    await sleep(300) // the first poll has passed: from now on only a NOTIFY wakes it within the minute
    const t0 = Date.now()
    await db.system((sql) => enqueueJob(sql, q, {}))
    await until('the job to run', () => ran.length === 1, 10_000)
    t.ok(ran[0]! - t0 < 10_000, `ran ${ran[0]! - t0} ms after the commit, with a 60 s poll`)
  },
)

t.test(
  'kill -9 of the process holding a job: another process completes it once its lease runs out, recorded completed once',
  { skip: postgresOnly },
  async (t) => {
    const holder = worker(t, { JOBS_MODE: 'hang', JOBS_LEASE_MS: '1000' })
    await holder.next((m) => m.ready)
    const id = await db.system((sql) => enqueueJob(sql, 'test.hang', { n: 1 }))
    const started = await holder.next((m) => m.started)
    t.equal(started.started, id)
    holder.kill('SIGKILL')
    await new Promise((r) => holder.once('exit', r))
    t.equal(await statusOf(id!), 'running', 'the dead process still holds it')
    const completions: string[] = []
    const r = runner(t, [{ name: 'test.hang', handler: async (job) => void completions.push(job.id) }])
    const t0 = Date.now()
    await r.start()
    await until('the job to complete', async () => (await statusOf(id!)) === 'completed')
    t.ok(Date.now() - t0 < 5000, 'taken again once the lease ran out')
    await sleep(300)
    t.same(completions, [id], 'completed by the second process, once')
    t.match(await db.system((sql) => getJob(sql, id!)), { status: 'completed', attempts: 2 })
  },
)

t.test(
  'two processes and one schedule over 100 slots: each slot runs exactly once',
  { skip: postgresOnly },
  async (t) => {
    await db.sql`delete from job_schedules where name = 'test.every-minute'`
    await db.sql`delete from jobs where queue = 'test.slot'`
    const base = Date.parse('2026-11-25T00:00:30Z')
    const replicas = [
      worker(t, { JOBS_MODE: 'slots', JOBS_NOW: String(base) }),
      worker(t, { JOBS_MODE: 'slots', JOBS_NOW: String(base) }),
    ]
    await Promise.all(replicas.map((w) => w.next((m) => m.ready)))
    const ran: string[] = []
    for (const w of replicas)
      w.on('message', (m) => {
        if ((m as Msg).ran) ran.push((m as Msg).slot!)
      })
    let enqueued = 0
    for (let k = 1; k <= 100; k++) {
      // Both replicas inside slot k, at different seconds of it.
      const at = [
        base + k * 60_000 + Math.floor(Math.random() * 29_000),
        base + k * 60_000 + Math.floor(Math.random() * 29_000),
      ]
      const answers = await Promise.all(
        replicas.map((w, i) => {
          w.send({ tick: at[i] })
          return w.next((m) => m.ticked === at[i] || m.error)
        }),
      )
      for (const a of answers) {
        if (a.error) throw new Error(a.error)
        enqueued += a.enqueued ?? 0
      }
    }
    t.equal(enqueued, 100, 'the two replicas enqueued 100 jobs between them')
    await until('all 100 slots ran', () => ran.length >= 100, 30_000)
    await sleep(300)
    t.equal(ran.length, 100)
    t.equal(new Set(ran).size, 100, 'each slot once')
    const rows = await db.sql<
      { n: number; distinct_keys: number }[]
    >`select count(*)::int as n, count(distinct unique_key)::int as distinct_keys from jobs where queue = 'test.slot' and status = 'completed'`
    t.same(rows[0], { n: 100, distinct_keys: 100 })
    for (const w of replicas) w.send({ stop: true })
    await Promise.all(replicas.map((w) => new Promise((r) => w.once('exit', r))))
    await db.sql`delete from job_schedules where name = 'test.every-minute'`
  },
)
