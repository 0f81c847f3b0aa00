// A whole Atrium replica in a process of its own, for tests of what several replicas do together.
// It runs the app built from its environment (as the server would, without listening) with its
// job runner; its clock is the parent's to set over IPC:
//   {tick: ms}  sets the clock and runs the due schedules; answered {ticked: ms, enqueued: n}
//   {stop: true} drains and exits.
// It sends {ready: pid} once started.
import { configFrom } from './platform.js'
import { createLogger } from '../../server/logger.js'
import { buildApp } from '../../server/app.js'
import { openPlatform } from '../../server/platform/index.js'

const send = (m: unknown) => process.send?.(m)
const config = configFrom(process.env as Record<string, string>)
const platform = await openPlatform(config, createLogger(config.LOG_LEVEL), { migrate: false })
let now = Number(process.env.REPLICA_NOW ?? Date.now())
const app = await buildApp(platform, { now: () => now, jobs: { pollMs: 50, scheduleTickMs: 3_600_000 } })
await app.ready()

process.on('message', (m: { tick?: number; stop?: true }) => {
  if (m.tick !== undefined) {
    now = m.tick
    void app.jobs.tickSchedules().then(
      (enqueued) => {
        app.jobs.kick()
        send({ ticked: m.tick, enqueued })
      },
      (err: unknown) => send({ error: String(err) }),
    )
  }
  if (m.stop)
    void app
      .close()
      .then(() => platform.close())
      .then(() => process.exit(0))
})
send({ ready: process.pid })
