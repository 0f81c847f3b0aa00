import t, { type Test } from 'tap'
import pino from 'pino'
import { appOn, type TestApp } from '../../../helpers/app.js'
import { startWebhookWorker } from '../../../../server/modules/webhooks/worker.js'
import type { Db } from '../../../../server/platform/db.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'
import { createSecrets } from '../../../../server/platform/secrets.js'
import { eventually, receiver, SECRET, verified, webhookApp } from './helpers.js'

t.test('a lease that could end while its attempt still runs is refused before anything starts', async (t) => {
  const base = {
    db: {} as Db,
    secrets: createSecrets(Buffer.alloc(32)),
    policy: compilePolicy({ allowedCidrs: [], airGapped: false }),
    log: pino({ level: 'silent' }),
    concurrency: 1,
    userAgent: 'test',
  }
  t.throws(
    () => startWebhookWorker({ ...base, attemptTimeoutMs: 15_000, leaseMs: 15_000 }),
    /leaseMs \(15000\) must be longer than the attempt timeout \(15000\)/,
  )
  t.throws(
    () => startWebhookWorker({ ...base, leaseMs: 1000 }),
    /must be longer/,
    'against the default 15 s timeout too',
  )
})

// ---- sharing the slots between tenants ---------------------------------------------------------

type Tenant = Awaited<ReturnType<TestApp['tenant']>>

async function register(a: Tenant, url: string): Promise<string> {
  const r = await a.call('POST', '/api/v1/webhooks', { url, events: ['project.created'], secret: SECRET })
  if (r.status !== 201) throw new Error(JSON.stringify(r.body))
  return r.body.data.id
}

/** A receiver that holds every request open until `release()`, then answers 503. */
async function hangingReceiver(t: Test) {
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const rx = await receiver(t, () => (res) => void gate.then(() => res.writeHead(503).end()))
  return { rx, release }
}

/** Tenant A: `n` endpoints that never answer, each with two deliveries due. */
async function hangingTenant(h: TestApp, url: string, n: number) {
  const a = await h.tenant()
  for (let i = 0; i < n; i++) await register(a, `${url}/${i}`)
  await a.call('POST', '/api/v1/projects', { name: 'A0' })
  await a.call('POST', '/api/v1/projects', { name: 'A1' })
  return a
}

const recordedAttempts = async (h: TestApp, tenantId: string) =>
  (
    await h.platform.db.system(
      (sql) => sql<{ n: number }[]>`select count(*)::int as n from webhook_attempts where tenant_id = ${tenantId}`,
    )
  )[0]!.n

t.test(
  "another tenant's delivery goes out while one tenant's endpoints that never answer hang, with fewer slots than they are",
  async (t) => {
    // Long enough that A's attempts end only when the test lets them.
    const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, concurrency: 4, attemptTimeoutMs: 120_000 } })
    const { rx: hanging, release } = await hangingReceiver(t)
    t.teardown(release)
    const a = await hangingTenant(h, hanging.url, 6) // six endpoints, twelve deliveries, four slots
    await hanging.waitFor(3) // as many as endpoints not known to work may hold of four slots

    const fast = await receiver(t)
    const b = await h.tenant('free')
    await register(b, fast.url)
    await b.call('POST', '/api/v1/projects', { name: 'B' })
    const [got] = await fast.waitFor(1)
    t.equal(verified(SECRET, got!).data.name, 'B', "B's delivery arrived")
    // At that moment: every attempt A began is still hanging, and it began no more than its share.
    t.equal(await recordedAttempts(h, a.tenantId), 0, "none of A's attempts has ended")
    t.equal(hanging.received.length, 3, 'A holds three of the four slots, one attempt per endpoint')

    release()
    await eventually(async () => (await recordedAttempts(h, a.tenantId)) >= 3)
  },
)

t.test(
  'with two replicas, each keeps slots for other tenants, and each delivery is attempted by one of them at a time',
  async (t) => {
    const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, concurrency: 2, attemptTimeoutMs: 120_000 } })
    await appOn(t, h.platform, { webhookWorker: { pollMs: 50, concurrency: 2, attemptTimeoutMs: 120_000 } })
    const { rx: hanging, release } = await hangingReceiver(t)
    t.teardown(release)
    const a = await hangingTenant(h, hanging.url, 6)
    await hanging.waitFor(2) // one of each replica's two slots

    const fast = await receiver(t)
    const b = await h.tenant('free')
    await register(b, fast.url)
    await b.call('POST', '/api/v1/projects', { name: 'B' })
    await fast.waitFor(1)
    t.equal(await recordedAttempts(h, a.tenantId), 0, "none of A's attempts has ended")
    t.equal(hanging.received.length, 2, 'A holds one slot on each replica')
    const leased = await h.platform.db.system(
      (sql) => sql`select 1 from webhook_deliveries where tenant_id = ${a.tenantId} and leased_until is not null`,
    )
    t.equal(leased.length, 2, "two of A's deliveries are claimed")

    release()
    await eventually(async () => (await recordedAttempts(h, a.tenantId)) >= 12)
    const twice = await h.platform.db.system(
      (sql) => sql`
    select delivery_id, attempt from webhook_attempts where tenant_id = ${a.tenantId} group by delivery_id, attempt having count(*) > 1`,
    )
    t.equal(twice.length, 0, 'no attempt of any delivery was made by both replicas')
  },
)

t.test('one tenant alone, with an endpoint that answers, gets every slot', async (t) => {
  const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, concurrency: 4 } })
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  t.teardown(release)
  // The first request answers at once (the endpoint is then known to work); the rest wait together.
  const rx = await receiver(t, (n) => (n === 0 ? 204 : (res) => void gate.then(() => res.writeHead(204).end())))
  const a = await h.tenant()
  const id = await register(a, rx.url)
  await a.call('POST', `/api/v1/webhooks/${id}/test`)
  await rx.waitFor(1)
  await eventually(async () => (await a.call('GET', `/api/v1/webhooks/${id}`)).body.data.lastSuccessAt)
  for (let i = 0; i < 6; i++) await a.call('POST', '/api/v1/projects', { name: `P${i}` })
  await rx.waitFor(5) // four at once, none answered yet: every slot in use
  t.equal(rx.received.length, 5)
  release()
  await rx.waitFor(7)
})
