import t from 'tap'
import { operatorKey } from '../../../helpers/operator.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { eventually, receiver, SECRET, verified, webhookApp } from './helpers.js'

t.test(
  'every event kind emitted so far reaches a real receiver and verifies with the reference verifier',
  async (t) => {
    const h = await webhookApp(t)
    const rx = await receiver(t)
    const a = await h.tenant()
    const hook = await a.call('POST', '/api/v1/webhooks', {
      url: rx.url,
      events: ['project.created', 'project.updated', 'project.deleted', 'user.created'],
      secret: SECRET,
    })
    t.equal(hook.status, 201, JSON.stringify(hook.body))

    const p = await a.call('POST', '/api/v1/projects', { name: 'Alpha' })
    await a.call('PATCH', `/api/v1/projects/${p.body.data.id}`, { name: 'Beta' })
    await a.call('DELETE', `/api/v1/projects/${p.body.data.id}`)
    const invited = await a.call('POST', '/api/v1/tenant/team/members', {
      email: `new-${Date.now()}@example.com`,
      role: 'member',
    })
    t.equal(invited.status, 201)
    const accepted = await h.anonymous('POST', '/api/v1/auth/invitations/accept', {
      token: invited.body.data.invitation.token,
      password: 'a long enough password',
    })
    t.equal(accepted.status, 200, JSON.stringify(accepted.body))

    await rx.waitFor(4)
    const payloads = rx.received.map((r) => verified(SECRET, r))
    t.same(payloads.map((x) => x.type).sort(), [
      'project.created',
      'project.deleted',
      'project.updated',
      'user.created',
    ])
    for (const [i, x] of payloads.entries()) {
      t.equal(x.tenantId, a.tenantId)
      t.equal(rx.received[i]!.headers['webhook-id'], x.id, 'webhook-id is the event id')
      t.match(rx.received[i]!.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/)
    }
    const updated = payloads.find((x) => x.type === 'project.updated')!
    t.match(updated.data, { id: p.body.data.id, name: 'Beta', previous: { name: 'Alpha' }, change: 'updated' })
    t.match(payloads.find((x) => x.type === 'user.created')!.data, {
      role: 'member',
      joinedBy: 'invitation',
      status: 'active',
    })

    // A platform operator's endpoint hears every tenant, tenant.created included.
    const opCall = (await operatorKey(h)).call
    const prx = await receiver(t)
    const whsec = 'whsec_' + Buffer.alloc(32, 7).toString('base64')
    const ph = await opCall('POST', '/api/v1/platform/webhooks', {
      url: prx.url,
      events: ['tenant.created', 'user.created'],
      secret: whsec,
    })
    t.equal(ph.status, 201, JSON.stringify(ph.body))
    const created = await createTenant(h.platform, { name: 'Newcomer', email: `newcomer-${Date.now()}@example.com` })
    await prx.waitFor(2)
    const got = prx.received.map((r) => verified(whsec, r))
    t.same(got.map((x) => x.type).sort(), ['tenant.created', 'user.created'])
    t.match(got.find((x) => x.type === 'tenant.created')!.data, {
      id: created.tenantId,
      name: 'Newcomer',
      plan: 'free',
    })
    t.match(got.find((x) => x.type === 'user.created')!.data, {
      id: created.userId,
      role: 'owner',
      joinedBy: 'tenant_created',
    })

    const list = await a.call('GET', `/api/v1/webhooks/${hook.body.data.id}/deliveries`)
    t.equal(list.status, 200)
    t.equal(list.body.data.length, 4)
    await eventually(
      async () =>
        (await a.call('GET', `/api/v1/webhooks/${hook.body.data.id}/deliveries?status=succeeded`)).body.data.length ===
        4,
    )
  },
)

/** The endpoint's deliveries once the newest has reached `status`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const deliveriesOnce = (deliveries: () => Promise<any[]>, status: string) =>
  eventually(async () => {
    const list = await deliveries()
    return list[0]?.status === status ? list : null
  })

/** A tenant with one endpoint on a receiver; returns what tests need. */
async function endpoint(
  h: Awaited<ReturnType<typeof webhookApp>>,
  url: string,
  events = ['project.created'],
  secret = SECRET,
) {
  const a = await h.tenant()
  const hook = await a.call('POST', '/api/v1/webhooks', { url, events, secret })
  if (hook.status !== 201) throw new Error(JSON.stringify(hook.body))
  const id: string = hook.body.data.id
  const deliveries = async () => (await a.call('GET', `/api/v1/webhooks/${id}/deliveries`)).body.data as any[] // eslint-disable-line @typescript-eslint/no-explicit-any
  return { a, id, deliveries }
}

t.test(
  'a receiver that fails twice then succeeds gets exactly one successful delivery, with the same webhook-id each time',
  async (t) => {
    const h = await webhookApp(t)
    const rx = await receiver(t, [500, 503, 200])
    const { a, deliveries } = await endpoint(h, rx.url)
    await a.call('POST', '/api/v1/projects', { name: 'Flaky' })
    await rx.waitFor(3)
    const [d] = await deliveriesOnce(deliveries, 'succeeded')
    t.equal(rx.succeeded().length, 1, 'one successful delivery')
    t.equal(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, 1, 'the same webhook-id on every attempt')
    for (const r of rx.received)
      t.equal(verified(SECRET, r).type, 'project.created', 'each attempt is signed afresh and verifies')
    t.equal(d.attemptCount, 3)
    t.same(
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      d.attempts.map((x: any) => [x.attempt, x.statusCode, x.outcome]),
      [
        [1, 500, 'retrying'],
        [2, 503, 'retrying'],
        [3, 200, 'succeeded'],
      ],
    )
    t.match(d.attempts[0], { error: 'the endpoint answered 500', responseExcerpt: 'no thanks (500)' })
    t.ok(d.attempts[0].nextAttemptAt, 'a failed attempt says when the next one is')
    t.equal(d.attempts[2].nextAttemptAt, null)
    await new Promise((r) => setTimeout(r, 500))
    t.equal(rx.received.length, 3, 'nothing more after the success')
  },
)

t.test('410 Gone disables the endpoint at once, and its admins can see why', async (t) => {
  const h = await webhookApp(t)
  const rx = await receiver(t, [410])
  const { a, id, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Gone' })
  await rx.waitFor(1)
  const w = await eventually(async () => {
    const r = await a.call('GET', `/api/v1/webhooks/${id}`)
    return r.body.data.status === 'disabled' ? r.body.data : null
  })
  t.match(w.disabled, { reason: 'gone', message: /410 Gone/ })
  const [d] = await deliveries()
  t.match(d, { status: 'failed', attemptCount: 1, lastStatusCode: 410 })
  const log = await a.call('GET', '/api/v1/audit-log?action=webhook.disabled')
  t.match(log.body.data[0], { action: 'webhook.disabled', actor: { type: 'system' }, details: { reason: 'gone' } })

  // Disabled: later events are not sent to it, and it can be turned back on.
  await a.call('POST', '/api/v1/projects', { name: 'After' })
  await new Promise((r) => setTimeout(r, 300))
  t.equal(rx.received.length, 1)
  const on = await a.call('PATCH', `/api/v1/webhooks/${id}`, { enabled: true })
  t.match(on.body.data, { status: 'enabled', disabled: null, failingSince: null })
})

t.test('Retry-After from the receiver is honoured over a shorter scheduled wait', async (t) => {
  const h = await webhookApp(t)
  const rx = await receiver(t, [(res) => res.writeHead(429, { 'retry-after': '2' }).end('slow down'), 200])
  const { a, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Patient' })
  await rx.waitFor(2)
  const [d] = await deliveriesOnce(deliveries, 'succeeded')
  const first = d.attempts[0]
  const waitedFor = Date.parse(first.nextAttemptAt) - Date.parse(first.startedAt)
  t.ok(waitedFor >= 2000, `the next attempt was set ${waitedFor} ms after the first began, not the schedule's 0.1 s`)
  t.ok(rx.received[1]!.at - rx.received[0]!.at >= 1900, 'and the receiver was not called again before then')
})

t.test('redirects are not followed: a 3xx is a failed attempt and the other address hears nothing', async (t) => {
  const h = await webhookApp(t)
  const elsewhere = await receiver(t)
  const rx = await receiver(t, [(res) => res.writeHead(307, { location: elsewhere.url }).end(), 200])
  const { a, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Moved' })
  const [d] = await deliveriesOnce(deliveries, 'succeeded')
  t.match(d.attempts[0], { statusCode: 307, outcome: 'retrying', error: 'the endpoint answered 307' })
  t.equal(elsewhere.received.length, 0)
})

t.test('an attempt with no complete answer within the timeout fails and is tried again', async (t) => {
  const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, schedule: [0.1, 0.1], attemptTimeoutMs: 300 } })
  const rx = await receiver(t, [
    () => {
      /* never answers */
    },
    200,
  ])
  const { a, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Slow' })
  const [d] = await deliveriesOnce(deliveries, 'succeeded')
  t.match(d.attempts[0], { statusCode: null, outcome: 'retrying', error: /no complete response within/ })
  t.equal(d.attempts[1].outcome, 'succeeded')
})

t.test('when the schedule is used up the delivery is failed, with every attempt recorded', async (t) => {
  const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, schedule: [0.1, 0.1] } })
  const rx = await receiver(t, [(res) => res.writeHead(500).end('x'.repeat(5000))])
  const { a, id, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Doomed' })
  const [d] = await deliveriesOnce(deliveries, 'failed')
  t.same(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    d.attempts.map((x: any) => x.outcome),
    ['retrying', 'retrying', 'failed'],
  )
  t.equal(d.nextAttemptAt, null)
  t.equal(d.attempts[0].responseExcerpt.length, 1024, 'the response excerpt is bounded')
  const w = (await a.call('GET', `/api/v1/webhooks/${id}`)).body.data
  t.equal(w.status, 'enabled', 'one failed delivery does not disable the endpoint')
  t.ok(w.failingSince, 'but the run of failures is visible')
})

t.test('an endpoint whose every attempt failed for 5 days is disabled, and says why', async (t) => {
  let offset = 0
  const h = await webhookApp(
    t,
    {},
    { now: () => Date.now() + offset, webhookWorker: { pollMs: 50, schedule: [0.1, 0.1, 0.1, 0.1] } },
  )
  const rx = await receiver(t, [500])
  const { a, id, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Down' })
  await rx.waitFor(1)
  const since = await eventually(async () => (await a.call('GET', `/api/v1/webhooks/${id}`)).body.data.failingSince)
  offset = 5 * 24 * 3600_000 + 60_000 // the receiver stays down for five days
  const w = await eventually(async () => {
    const r = await a.call('GET', `/api/v1/webhooks/${id}`)
    return r.body.data.status === 'disabled' ? r.body.data : null
  })
  t.match(w.disabled, {
    reason: 'failing',
    message: new RegExp(`Every delivery attempt failed from ${since.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
  })
  t.match((await deliveries())[0], { status: 'failed', lastError: 'The endpoint was disabled' })
  const log = await a.call('GET', '/api/v1/audit-log?action=webhook.disabled')
  t.match(log.body.data[0].details, { reason: 'failing' })
})

t.test('a rotated secret signs beside the old one during the overlap, then alone', async (t) => {
  const h = await webhookApp(t)
  const rx = await receiver(t)
  const { a, id } = await endpoint(h, rx.url)
  const rotated = await a.call('POST', `/api/v1/webhooks/${id}/rotate-secret`, { overlapSeconds: 3600 })
  t.equal(rotated.status, 200)
  const fresh: string = rotated.body.data.secret
  t.match(fresh, /^whsec_[A-Za-z0-9+/]{43}=$/, 'a generated secret, in the Standard Webhooks form, shown once')
  t.ok(rotated.body.data.webhook.secret.previousValidUntil)
  await a.call('POST', '/api/v1/projects', { name: 'Both' })
  const [both] = await rx.waitFor(1)
  t.equal(String(both!.headers['webhook-signature']).split(' ').length, 2, 'two signatures')
  t.equal(verified(fresh, both!).type, 'project.created', 'verifies with the new secret')
  t.equal(verified(SECRET, both!).type, 'project.created', 'and with the old one')

  const chosen = 'another-shared-secret-0123456789'
  const again = await a.call('POST', `/api/v1/webhooks/${id}/rotate-secret`, { secret: chosen, overlapSeconds: 0 })
  t.equal(again.body.data.secret, null, 'a secret the client chose is not echoed')
  t.equal(again.body.data.webhook.secret.previousValidUntil, null)
  await a.call('POST', '/api/v1/projects', { name: 'New only' })
  const [, only] = await rx.waitFor(2)
  t.equal(verified(chosen, only!).type, 'project.created')
  t.throws(() => verified(fresh, only!), 'the replaced secret no longer verifies')
  t.equal(String(only!.headers['webhook-signature']).split(' ').length, 1)
})

t.test(
  'a test event goes to that endpoint alone, and a finished delivery can be sent again with the same webhook-id',
  async (t) => {
    const h = await webhookApp(t)
    const rx = await receiver(t)
    const other = await receiver(t)
    const { a, id, deliveries } = await endpoint(h, rx.url)
    await a.call('POST', '/api/v1/webhooks', { url: other.url, events: ['project.created'], secret: SECRET })
    const sent = await a.call('POST', `/api/v1/webhooks/${id}/test`)
    t.equal(sent.status, 202)
    t.match(sent.body.data, { eventType: 'webhook.test', status: 'pending' })
    const [first] = await rx.waitFor(1)
    t.match(verified(SECRET, first!), { type: 'webhook.test', tenantId: a.tenantId, data: { webhookId: id } })
    await eventually(async () => (await deliveries())[0]?.status === 'succeeded')

    const retried = await a.call('POST', `/api/v1/webhooks/${id}/deliveries/${sent.body.data.id}/retry`)
    t.equal(retried.status, 202)
    const [, second] = await rx.waitFor(2)
    t.equal(second!.headers['webhook-id'], first!.headers['webhook-id'])
    const d = await eventually(async () => {
      const r = await a.call('GET', `/api/v1/webhooks/${id}/deliveries/${sent.body.data.id}`)
      return r.body.data.attemptCount === 2 && r.body.data.status === 'succeeded' ? r.body.data : null
    })
    t.equal(d.attempts.length, 2)
    t.equal(other.received.length, 0, 'the other endpoint heard nothing')
  },
)

t.test('two replicas on one database deliver each event once', async (t) => {
  const h = await webhookApp(t)
  const { appOn } = await import('../../../helpers/app.js')
  await appOn(t, h.platform, { webhookWorker: { pollMs: 50 } })
  await appOn(t, h.platform, { webhookWorker: { pollMs: 50 } })
  const rx = await receiver(t)
  const { a } = await endpoint(h, rx.url)
  await Promise.all(Array.from({ length: 25 }, (_, i) => a.call('POST', '/api/v1/projects', { name: `P${i}` })))
  await rx.waitFor(25)
  await new Promise((r) => setTimeout(r, 500))
  t.equal(rx.received.length, 25)
  t.equal(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, 25)
})

t.test('a response body with a NUL byte is recorded (made printable), not retried for ever', async (t) => {
  const h = await webhookApp(t)
  const rx = await receiver(t, [
    (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.from([0x6f, 0x00, 0x6b])),
  ])
  const { a, deliveries } = await endpoint(h, rx.url)
  await a.call('POST', '/api/v1/projects', { name: 'Nul' })
  const [d] = await deliveriesOnce(deliveries, 'succeeded')
  t.equal(d.attempts[0].responseExcerpt, 'o\uFFFDk')
  t.equal(rx.received.length, 1)
})

t.test('many attempts failing with 410 at once disable the endpoint once, and every attempt is recorded', async (t) => {
  const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, schedule: [0.1], concurrency: 12 } })
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const rx = await receiver(t, (n) => (n === 0 ? 204 : (res) => void gate.then(() => res.writeHead(410).end())))
  const { a, id, deliveries } = await endpoint(h, rx.url)
  // Known to work first: an endpoint that has not yet answered is tried one delivery at a time.
  await a.call('POST', `/api/v1/webhooks/${id}/test`)
  await deliveriesOnce(deliveries, 'succeeded')
  await Promise.all(Array.from({ length: 12 }, (_, i) => a.call('POST', '/api/v1/projects', { name: `G${i}` })))
  await rx.waitFor(13)
  release() // twelve answers of 410 arrive together
  const list = await eventually(async () => {
    const l = (await deliveries()).filter((d) => d.eventType === 'project.created')
    return l.length === 12 && l.every((d) => d.status === 'failed') ? l : null
  })
  t.same(
    list.map((d) => d.attemptCount),
    Array(12).fill(1),
    'each attempt recorded once',
  )
  t.ok(list.every((d) => d.attempts.length === 1 && d.attempts[0].statusCode === 410))
  t.equal((await a.call('GET', `/api/v1/webhooks/${id}`)).body.data.disabled.reason, 'gone')
  t.equal((await a.call('GET', '/api/v1/audit-log?action=webhook.disabled')).body.data.length, 1, 'disabled once')
  await new Promise((r) => setTimeout(r, 300))
  t.equal(rx.received.length, 13, 'nothing was sent again')
})

t.test(
  'disabling an endpoint while an attempt is in flight: the change succeeds and the attempt is not retried',
  async (t) => {
    const h = await webhookApp(t)
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const rx = await receiver(t, [(res) => void gate.then(() => res.writeHead(503).end())])
    const { a, id, deliveries } = await endpoint(h, rx.url)
    await a.call('POST', '/api/v1/projects', { name: 'In flight' })
    await rx.waitFor(1)
    const off = await a.call('PATCH', `/api/v1/webhooks/${id}`, { enabled: false })
    t.equal(off.status, 200)
    t.equal((await deliveries())[0].status, 'pending', 'the attempt in flight is left to its worker')
    const retry = await a.call('POST', `/api/v1/webhooks/${id}/deliveries/${(await deliveries())[0].id}/retry`)
    t.equal(retry.body.error.code, 'VALIDATION_ERROR', 'nor can anyone send it again meanwhile')
    release()
    const [d] = await deliveriesOnce(deliveries, 'failed')
    t.match(d.attempts[0], { statusCode: 503, outcome: 'failed', nextAttemptAt: null, error: /disabled meanwhile/ })
    await new Promise((r) => setTimeout(r, 300))
    t.equal(rx.received.length, 1)
  },
)

t.test(
  'a stopping worker finishes its attempt in flight and hands back what it claimed but had not begun',
  async (t) => {
    const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, concurrency: 1 } })
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const rx = await receiver(t, (n) => (n === 1 ? (res) => void gate.then(() => res.writeHead(200).end()) : 200))
    const { a, id, deliveries } = await endpoint(h, rx.url)
    // Known to work first: an endpoint that has not yet answered is tried one delivery at a time, with nothing claimed
    // ahead.
    await a.call('POST', `/api/v1/webhooks/${id}/test`)
    await deliveriesOnce(deliveries, 'succeeded')
    await a.call('POST', '/api/v1/projects', { name: 'First' })
    await rx.waitFor(2)
    await a.call('POST', '/api/v1/projects', { name: 'Second' })
    const leased = () =>
      h.platform.db.system(
        (sql) => sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where leased_until is not null`,
      )
    await eventually(async () => (await leased())[0]!.n === 2) // one in flight, one claimed ahead
    const closing = h.app.close()
    await eventually(async () => (await leased())[0]!.n === 1)
    release()
    await closing
    const rows = await h.platform.db.system(
      (sql) => sql<{ status: string }[]>`select status from webhook_deliveries order by id`,
    )
    t.same(
      rows.map((r) => r.status),
      ['succeeded', 'succeeded', 'pending'],
    )
    const { appOn } = await import('../../../helpers/app.js')
    await appOn(t, h.platform, { webhookWorker: { pollMs: 50 } })
    await rx.waitFor(3)
    t.equal(
      verified(SECRET, rx.received[2]!).data.name,
      'Second',
      'another worker delivers it at once, not after the lease',
    )
  },
)
