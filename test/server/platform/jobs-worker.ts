// A replica's job runner in a process of its own, for the job runner's multi-process tests. Driven
// over IPC: its clock is the parent's to set, and it reports what its handlers do.
//   JOBS_MODE=hang: the 'test.hang' queue's handler reports 'started' and never returns.
//   JOBS_MODE=slots: the 'test.slot' queue completes at once; 'tick' messages set the clock and run
//   the schedules, answered with 'ticked'.
import pino from 'pino'
import { openDb } from '../../../server/platform/db.js'
import { createJobRunner } from '../../../server/platform/jobs.js'

const send = (m: unknown) => process.send?.(m)
const log = pino({ level: 'silent' })
const db = await openDb({ databaseUrl: process.env.DATABASE_URL!, dataDir: '', poolMax: 4, log })
let now: number | null = process.env.JOBS_NOW ? Number(process.env.JOBS_NOW) : null
const runner = createJobRunner({ db, log, now: () => now ?? Date.now(), pollMs: 50, scheduleTickMs: 3600_000 })

if (process.env.JOBS_MODE === 'hang') {
  runner.define({
    name: 'test.hang',
    leaseMs: Number(process.env.JOBS_LEASE_MS ?? 1000),
    handler: async (job) => {
      send({ started: job.id, pid: process.pid })
      await new Promise(() => {})
    },
  })
} else {
  runner.define({
    name: 'test.slot',
    concurrency: 4,
    handler: async (job) => void send({ ran: job.id, slot: job.runAt.toISOString() }),
  })
  runner.schedule({ name: 'test.every-minute', queue: 'test.slot', everyMs: 60_000 })
}

process.on('message', (m: { tick?: number; stop?: true }) => {
  if (m.tick !== undefined) {
    now = m.tick
    void runner.tickSchedules().then(
      (enqueued) => {
        runner.kick()
        send({ ticked: m.tick, enqueued })
      },
      (err: unknown) => send({ error: String(err) }),
    )
  }
  if (m.stop)
    void runner
      .stop({ graceMs: 1000 })
      .then(() => db.close())
      .then(() => process.exit(0))
})
await runner.start()
send({ ready: process.pid })
