// Webhook delivery across real server processes: two replicas on one database share the outbox
// without delivering anything twice, and an event committed just before a replica is killed is
// delivered by the next one. Each server is `server/main.ts` as `npm start` runs it; the receiver
// is a real HTTP server on loopback.
import t from 'tap'
import { adminTenant, serverProcess } from '../../../helpers/cli.js'
import { testEnv } from '../../../helpers/platform.js'
import { eventually, receiver, SECRET, verified } from './helpers.js'

const LOOPBACK = { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true' }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Deliveries this server logged attempting (LOG_LEVEL=info), by event id. */
function attemptsLogged(stdout: string): string[] {
  const ids: string[] = []
  for (const line of stdout.split('\n')) {
    if (!line.includes('"webhook delivery attempt"')) continue
    try {
      ids.push((JSON.parse(line) as { eventId: string }).eventId)
    } catch {
      // not a whole log line
    }
  }
  return ids
}

t.test('two server processes deliver each event once', async (t) => {
  const env = await testEnv(t, { ...LOOPBACK, LOG_LEVEL: 'info' })
  const rx = await receiver(t)
  // The second replica joins the first one's database (as a guest, when embedded), as the admin
  // CLI does meanwhile.
  const a = await serverProcess(t, env)
  const [b, { tenantId, apiKey }] = await Promise.all([serverProcess(t, env), adminTenant(t, env, 'Two replicas')])

  const hook = await a.call(apiKey, 'POST', '/api/v1/webhooks', {
    url: rx.url,
    events: ['project.created', 'project.updated'],
    secret: SECRET,
  })
  t.equal(hook.status, 201, JSON.stringify(hook.body))

  const N = 30
  const names = Array.from({ length: N }, (_, i) => `Project ${String(i).padStart(2, '0')}`)
  // All at once, alternating replicas: both workers wake for events the other replica committed.
  const created = await Promise.all(
    names.map((name, i) => (i % 2 ? b : a).call(apiKey, 'POST', '/api/v1/projects', { name })),
  )
  for (const r of created) t.equal(r.status, 201, JSON.stringify(r.body))

  await rx.waitFor(N, 60_000)
  // Every delivery recorded as done, then longer than a poll interval of either worker: a second
  // delivery of anything would have arrived by now.
  const list = (status = '') =>
    a.call(
      apiKey,
      'GET',
      `/api/v1/webhooks/${hook.body.data.id}/deliveries?limit=200${status ? `&status=${status}` : ''}`,
    )
  await eventually(async () => (await list('succeeded')).body.data.length === N, 60_000)
  await sleep(1500)

  t.equal(rx.received.length, N, 'exactly one request per event')
  const ids = rx.received.map((r) => r.headers['webhook-id'])
  t.equal(new Set(ids).size, N, 'every request has its own webhook-id')
  const payloads = rx.received.map((r) => verified(SECRET, r))
  t.same(
    payloads.map((p) => p.type),
    Array(N).fill('project.created'),
  )
  t.same(
    payloads.map((p) => p.tenantId),
    Array(N).fill(tenantId),
  )
  t.same(
    payloads.map((p) => p.id),
    ids,
    'webhook-id is the event id',
  )
  t.same(payloads.map((p) => p.data.name).sort(), names, 'one event per project created, on either replica')
  t.same(new Set(payloads.map((p) => p.data.id)), new Set(created.map((r) => r.body.data.id)))

  const deliveries = (await list()).body.data as {
    eventId: string
    status: string
    attemptCount: number
    attempts: unknown[]
  }[]
  t.equal(deliveries.length, N, 'one delivery per event')
  t.same(new Set(deliveries.map((d) => d.eventId)), new Set(ids))
  for (const d of deliveries)
    t.match(d, {
      status: 'succeeded',
      attemptCount: 1,
      attempts: [{ attempt: 1, outcome: 'succeeded', statusCode: 204 }],
    })
  t.ok(
    deliveries.every((d) => d.attempts.length === 1),
    'each delivery was attempted once',
  )

  // Who delivered what, from the replicas' own logs: together each event once.
  a.child.kill('SIGTERM')
  b.child.kill('SIGTERM')
  const [ea, eb] = await Promise.all([a.done, b.done])
  t.equal(ea.code, 0, ea.stderr)
  t.equal(eb.code, 0, eb.stderr)
  const byA = attemptsLogged(ea.stdout)
  const byB = attemptsLogged(eb.stdout)
  t.comment(`replica A delivered ${byA.length}, replica B ${byB.length}`)
  t.same(
    [...byA, ...byB].sort(),
    deliveries.map((d) => d.eventId).sort(),
    'the two replicas attempted each event once between them',
  )
})

t.test('an event committed just before the server is killed is delivered after a restart', async (t) => {
  const env = await testEnv(t, LOOPBACK)
  const rx = await receiver(t)
  // This replica accepts API calls but delivers nothing: the kill lands between commit and delivery.
  const a = await serverProcess(t, { ...env, WEBHOOK_DELIVERY_CONCURRENCY: '0' })
  const { tenantId, apiKey } = await adminTenant(t, env, 'Killed')
  const hook = await a.call(apiKey, 'POST', '/api/v1/webhooks', {
    url: rx.url,
    events: ['project.created'],
    secret: SECRET,
  })
  t.equal(hook.status, 201, JSON.stringify(hook.body))
  const project = await a.call(apiKey, 'POST', '/api/v1/projects', { name: 'Committed, then killed' })
  t.equal(project.status, 201, 'committed')

  a.child.kill('SIGKILL')
  const exit = await a.done
  t.equal(exit.code, null)
  t.equal(a.child.signalCode, 'SIGKILL')
  t.equal(rx.received.length, 0, 'nothing was delivered before the kill')

  // The next replica (it takes over a stale db.lock, when embedded) finds the event in the outbox.
  const b = await serverProcess(t, env)
  const got = await b.call(apiKey, 'GET', `/api/v1/projects/${project.body.data.id}`)
  t.equal(got.status, 200, 'the project survived the kill')
  await rx.waitFor(1, 60_000)
  const list = (status = '') =>
    b.call(apiKey, 'GET', `/api/v1/webhooks/${hook.body.data.id}/deliveries${status ? `?status=${status}` : ''}`)
  await eventually(async () => (await list('succeeded')).body.data.length === 1, 60_000)
  await sleep(1500)

  t.equal(rx.received.length, 1, 'delivered once, no duplicates')
  const r = rx.received[0]!
  const payload = verified(SECRET, r)
  t.equal(r.headers['webhook-id'], payload.id)
  t.match(payload, {
    type: 'project.created',
    tenantId,
    data: { id: project.body.data.id, name: 'Committed, then killed' },
  })
  const deliveries = (await list()).body.data
  t.equal(deliveries.length, 1)
  t.match(deliveries[0], { eventId: payload.id, status: 'succeeded', attemptCount: 1 })
})
