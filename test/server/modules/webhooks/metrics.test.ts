// The delivery worker's metrics, read from the registry it is given.
import t from 'tap'
import pino from 'pino'
import { Registry } from 'prom-client'
import { startWebhookWorker } from '../../../../server/modules/webhooks/worker.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'
import { testApp } from '../../../helpers/app.js'
import { eventually, FAST_SCHEDULE, receiver, SECRET } from './helpers.js'

t.test(
  'the worker counts attempts by outcome, and shows its attempts in flight and how long the oldest due delivery has waited',
  async (t) => {
    // No worker in the app: the test starts its own, with a registry.
    const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true' })
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    t.teardown(release)
    const hanging = await receiver(t, () => (res) => void gate.then(() => res.writeHead(204).end()))
    const flaky = await receiver(t, [500, 204])
    const registry = new Registry()
    // One slot, and a clock an hour ahead: what waits has waited an hour by the worker's clock.
    const worker = startWebhookWorker({
      db: h.platform.db,
      secrets: h.platform.secrets,
      policy: compilePolicy({ allowedCidrs: ['127.0.0.0/8'], airGapped: false }),
      log: pino({ level: 'silent' }),
      concurrency: 1,
      userAgent: 'test',
      pollMs: 50,
      schedule: FAST_SCHEDULE,
      now: () => Date.now() + 3600_000,
      registry,
    })
    t.teardown(() => worker.stop())
    const read = async (name: string) => (await registry.getSingleMetric(name)!.get()).values

    const a = await h.tenant()
    const hook = async (url: string) =>
      (await a.call('POST', '/api/v1/webhooks', { url, events: ['project.created'], secret: SECRET })).body.data
        .id as string
    const first = await hook(hanging.url)
    await a.call('POST', `/api/v1/webhooks/${first}/test`)
    await hanging.waitFor(1)
    // A second endpoint of the same tenant, not known to work either: with one slot, it waits its turn.
    const second = await hook(flaky.url)
    await a.call('POST', `/api/v1/webhooks/${second}/test`)
    t.match(await read('atrium_webhook_attempts_in_flight'), [{ value: 1 }])
    const [waited] = await read('atrium_webhook_oldest_due_seconds')
    t.ok(waited!.value >= 3600, `the second delivery is due and waits (${waited!.value} s by the worker's clock)`)

    release()
    await flaky.waitFor(2)
    const outcomes = await eventually(async () => {
      const values = await read('atrium_webhook_attempts_total')
      const by = Object.fromEntries(values.map((v) => [v.labels.outcome, v.value]))
      return by.succeeded === 2 ? by : null
    })
    // failed at 0, exported from the start: the alert on its increase sees the first one.
    t.same(outcomes, { succeeded: 2, retrying: 1, failed: 0 })
    await eventually(async () => (await read('atrium_webhook_oldest_due_seconds'))[0]!.value === 0)
    t.match(await read('atrium_webhook_attempts_in_flight'), [{ value: 0 }])
  },
)
