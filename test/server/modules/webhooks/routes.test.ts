// The webhook API's rules: what registration accepts and refuses, who may do what, isolation
// between tenants and between tenants and the platform, and what is never shown.
import t from 'tap'
import { caller, testApp } from '../../../helpers/app.js'
import { operatorKey } from '../../../helpers/operator.js'
import { signedIn } from '../api-keys/helpers.js'
import { SECRET } from './helpers.js'

// No worker: these tests look at the API only; deliveries stay pending.
const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true' })
const URL_OK = 'http://127.0.0.1:9/hook'

t.test('registration answers 201 with the endpoint, never its secret, which is stored sealed', async (t) => {
  const a = await h.tenant()
  const r = await a.call('POST', '/api/v1/webhooks', {
    url: ` ${URL_OK} `,
    events: ['project.created', 'project.created', 'user.created'],
    secret: SECRET,
    description: ' CRM sync ',
  })
  t.equal(r.status, 201)
  t.match(r.body.data, {
    url: URL_OK,
    description: 'CRM sync',
    events: ['project.created', 'user.created'],
    status: 'enabled',
    disabled: null,
  })
  t.notOk(JSON.stringify(r.body).includes(SECRET), 'the secret is not echoed')
  const got = await a.call('GET', `/api/v1/webhooks/${r.body.data.id}`)
  t.notOk(JSON.stringify(got.body).includes(SECRET))
  const [row] = await h.platform.db.system(
    (sql) => sql<{ secret_sealed: string }[]>`select secret_sealed from webhooks where id = ${r.body.data.id}`,
  )
  t.match(row!.secret_sealed, /^atrium:v1:/)
  t.notOk(row!.secret_sealed.includes(SECRET), 'sealed, not in the clear')
  const list = await a.call('GET', '/api/v1/webhooks')
  t.same(
    list.body.data.map((w: { id: string }) => w.id),
    [r.body.data.id],
  )
})

t.test('bad registrations are VALIDATION_ERROR naming the field, and nothing is stored', async (t) => {
  const a = await h.tenant()
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'secret shorter than 24 characters',
      { url: URL_OK, events: ['project.created'], secret: 'x'.repeat(23) },
      'secret',
    ],
    [
      'secret with a space',
      { url: URL_OK, events: ['project.created'], secret: 'a secret with spaces in it!!' },
      'secret',
    ],
    [
      'whsec_ secret that is not base64',
      { url: URL_OK, events: ['project.created'], secret: 'whsec_not*base64*at*all*here' },
      'secret',
    ],
    [
      'whsec_ secret with too little key',
      { url: URL_OK, events: ['project.created'], secret: 'whsec_' + Buffer.alloc(15).toString('base64') },
      'secret',
    ],
    ['no secret', { url: URL_OK, events: ['project.created'] }, 'secret'],
    ['unknown event kind', { url: URL_OK, events: ['project.exploded'], secret: SECRET }, 'events'],
    ['no events', { url: URL_OK, events: [], secret: SECRET }, 'events'],
    ['tenant.created on a tenant endpoint', { url: URL_OK, events: ['tenant.created'], secret: SECRET }, 'events'],
    ['not a URL', { url: 'hook please', events: ['project.created'], secret: SECRET }, 'url'],
    ['ftp URL', { url: 'ftp://127.0.0.1/x', events: ['project.created'], secret: SECRET }, 'url'],
    [
      'credentials in the URL',
      { url: 'http://user:pw@127.0.0.1/x', events: ['project.created'], secret: SECRET },
      'url',
    ],
    ['a fragment', { url: 'http://127.0.0.1/x#frag', events: ['project.created'], secret: SECRET }, 'url'],
    ['an unknown field', { url: URL_OK, events: ['project.created'], secret: SECRET, retries: 3 }, 'retries'],
  ]
  for (const [what, body, field] of cases) {
    const r = await a.call('POST', '/api/v1/webhooks', body)
    t.equal(r.status, 400, what)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
    t.match(JSON.stringify(r.body.error.details), field, `${what}: names ${field}`)
  }
  t.equal((await a.call('GET', '/api/v1/webhooks')).body.data.length, 0, 'nothing was stored')
})

t.test('http URLs are refused unless the deployment allows them', async (t) => {
  const strict = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8' })
  const a = await strict.tenant()
  const r = await a.call('POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET })
  t.equal(r.body.error.code, 'VALIDATION_ERROR')
  t.match(r.body.error.message, /https.*WEBHOOK_ALLOW_HTTP/)
})

t.test(
  "registering past the plan's endpoint limit is FORBIDDEN with the limit and the plan; disabled endpoints count, deleted ones do not",
  async (t) => {
    const a = await h.tenant('free')
    const register = (i: number) =>
      a.call('POST', '/api/v1/webhooks', { url: `${URL_OK}/${i}`, events: ['project.created'], secret: SECRET })
    const ids: string[] = []
    for (const i of [0, 1]) {
      const r = await register(i)
      t.equal(r.status, 201)
      ids.push(r.body.data.id)
    }
    const over = await register(2)
    t.equal(over.status, 403)
    t.match(over.body.error, {
      code: 'FORBIDDEN',
      message: /free plan allows 2 webhook endpoints/,
      details: { reason: 'plan_limit', limit: 2, plan: 'free' },
    })
    t.equal((await a.call('GET', '/api/v1/webhooks')).body.data.length, 2, 'nothing was stored')
    t.equal(
      (await a.call('GET', '/api/v1/tenant')).body.data.limits.webhookEndpoints,
      2,
      'the tenant can see its limit',
    )

    await a.call('PATCH', `/api/v1/webhooks/${ids[0]}`, { enabled: false })
    t.equal((await register(3)).body.error?.details.reason, 'plan_limit', 'a disabled endpoint still takes its place')
    await a.call('DELETE', `/api/v1/webhooks/${ids[0]}`)
    t.equal((await register(4)).status, 201, 'a deleted one frees it')

    const larger = (await h.tenant('growth')).call
    const platform = (await operatorKey(h)).call
    for (const [call, path, event, what] of [
      [larger, '/api/v1/webhooks', 'project.created', 'another plan, another limit'],
      [platform, '/api/v1/platform/webhooks', 'tenant.created', "the platform's own endpoints are not a tenant's"],
    ] as const)
      for (let i = 0; i < 3; i++)
        t.equal(
          (await call('POST', path, { url: `${URL_OK}/${i}`, events: [event], secret: SECRET })).status,
          201,
          what,
        )
  },
)

t.test("registrations at once never exceed the plan's endpoint limit", async (t) => {
  const a = await h.tenant('pro') // 10
  const all = await Promise.all(
    Array.from({ length: 25 }, (_, i) =>
      a.call('POST', '/api/v1/webhooks', { url: `${URL_OK}/${i}`, events: ['project.created'], secret: SECRET }),
    ),
  )
  t.equal(all.filter((r) => r.status === 201).length, 10, 'ten registered')
  t.ok(
    all
      .filter((r) => r.status !== 201)
      .every((r) => r.body.error.details.reason === 'plan_limit' && r.body.error.details.limit === 10),
    'the rest refused for the limit',
  )
  const [row] = await h.platform.db.system(
    (sql) => sql<{ n: number }[]>`select count(*)::int as n from webhooks where tenant_id = ${a.tenantId}`,
  )
  t.equal(row!.n, 10, 'ten stored')
})

t.test('webhooks:read lists and webhooks:manage changes; members and keys without them get FORBIDDEN', async (t) => {
  const a = await h.tenant()
  const made = await a.call('POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET })
  const id = made.body.data.id
  const readerKey = await a.call('POST', '/api/v1/api-keys', {
    name: 'reader',
    type: 'ci',
    permissions: ['webhooks:read'],
  })
  const reader = caller(h.app, readerKey.body.data.key)
  t.equal((await reader('GET', '/api/v1/webhooks')).status, 200)
  t.equal((await reader('GET', `/api/v1/webhooks/${id}/deliveries`)).status, 200)
  for (const [method, url, body] of [
    ['POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET }],
    ['PATCH', `/api/v1/webhooks/${id}`, { description: 'x' }],
    ['DELETE', `/api/v1/webhooks/${id}`, undefined],
    ['POST', `/api/v1/webhooks/${id}/rotate-secret`, {}],
    ['POST', `/api/v1/webhooks/${id}/test`, undefined],
  ] as const) {
    const r = await reader(method, url, body)
    t.equal(r.body.error?.code, 'FORBIDDEN', `${method} ${url} needs webhooks:manage`)
    t.equal(r.body.error?.details.required, 'webhooks:manage')
  }
  const member = await signedIn(h, a.tenantId, 'member')
  const r = await member.call('GET', '/api/v1/webhooks')
  t.equal(r.body.error.code, 'FORBIDDEN', 'members do not see webhook endpoints')
  t.equal(r.body.error.details.required, 'webhooks:read')
})

t.test("another tenant's endpoint is RESOURCE_NOT_FOUND for every operation", async (t) => {
  const a = await h.tenant()
  const b = await h.tenant()
  const id = (await a.call('POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET }))
    .body.data.id
  const sent = await a.call('POST', `/api/v1/webhooks/${id}/test`)
  for (const [method, url, body] of [
    ['GET', `/api/v1/webhooks/${id}`, undefined],
    ['PATCH', `/api/v1/webhooks/${id}`, { description: 'mine now' }],
    ['DELETE', `/api/v1/webhooks/${id}`, undefined],
    ['POST', `/api/v1/webhooks/${id}/rotate-secret`, {}],
    ['POST', `/api/v1/webhooks/${id}/test`, undefined],
    ['GET', `/api/v1/webhooks/${id}/deliveries`, undefined],
    ['GET', `/api/v1/webhooks/${id}/deliveries/${sent.body.data.id}`, undefined],
    ['POST', `/api/v1/webhooks/${id}/deliveries/${sent.body.data.id}/retry`, undefined],
  ] as const) {
    t.equal((await b.call(method, url, body)).body.error?.code, 'RESOURCE_NOT_FOUND', `${method} ${url}`)
  }
  t.equal((await b.call('GET', '/api/v1/webhooks')).body.data.length, 0)
  t.equal((await a.call('GET', `/api/v1/webhooks/${id}`)).status, 200, 'still there for its owner')
})

t.test('platform endpoints take operator keys only, and tenant endpoints refuse them', async (t) => {
  const a = await h.tenant()
  const operator = (await operatorKey(h)).call
  const tenantTry = await a.call('POST', '/api/v1/platform/webhooks', {
    url: URL_OK,
    events: ['tenant.created'],
    secret: SECRET,
  })
  t.equal(tenantTry.body.error.code, 'FORBIDDEN')
  t.equal(tenantTry.body.error.details.required, 'operator')
  t.equal((await a.call('GET', '/api/v1/platform/webhooks')).body.error.code, 'FORBIDDEN')
  t.equal((await operator('GET', '/api/v1/webhooks')).body.error.code, 'FORBIDDEN', 'an operator key is not a tenant')

  const made = await operator('POST', '/api/v1/platform/webhooks', {
    url: URL_OK,
    events: ['tenant.created', 'project.deleted'],
    secret: SECRET,
  })
  t.equal(made.status, 201)
  const id = made.body.data.id
  t.equal(
    (await a.call('GET', `/api/v1/webhooks/${id}`)).body.error.code,
    'RESOURCE_NOT_FOUND',
    'a tenant cannot reach a platform endpoint',
  )
  t.equal((await operator('GET', `/api/v1/platform/webhooks/${id}`)).status, 200)
  t.equal(
    (await operator('PATCH', `/api/v1/platform/webhooks/${id}`, { enabled: false })).body.data.disabled.reason,
    'manual',
  )
  t.equal((await operator('DELETE', `/api/v1/platform/webhooks/${id}`)).status, 200)
  t.equal((await operator('GET', `/api/v1/platform/webhooks/${id}`)).body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await h.anonymous('GET', '/api/v1/platform/webhooks')).body.error.code, 'UNAUTHORIZED')
})

t.test(
  'disabling an endpoint fails its pending deliveries; changes are audited; deleting removes its history',
  async (t) => {
    const a = await h.tenant('pro')
    const id = (await a.call('POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET }))
      .body.data.id
    const sent = await a.call('POST', `/api/v1/webhooks/${id}/test`)
    t.equal(sent.body.data.status, 'pending')
    const retryPending = await a.call('POST', `/api/v1/webhooks/${id}/deliveries/${sent.body.data.id}/retry`)
    t.equal(retryPending.body.error.code, 'VALIDATION_ERROR', 'a pending delivery cannot be retried')
    t.equal(retryPending.body.error.details.reason, 'delivery_pending')

    const off = await a.call('PATCH', `/api/v1/webhooks/${id}`, { enabled: false })
    t.match(off.body.data, { status: 'disabled', disabled: { reason: 'manual' } })
    const [d] = (await a.call('GET', `/api/v1/webhooks/${id}/deliveries`)).body.data
    t.match(d, { status: 'failed', lastError: 'The endpoint was disabled', nextAttemptAt: null })
    const test = await a.call('POST', `/api/v1/webhooks/${id}/test`)
    t.equal(test.body.error.details.reason, 'webhook_disabled')
    t.equal(
      (
        await a.call('PATCH', `/api/v1/webhooks/${id}`, {
          events: ['project.deleted', 'agent.failed'],
          url: 'http://127.0.0.2:9/new',
        })
      ).body.data.status,
      'disabled',
      'other changes keep it off',
    )
    const on = await a.call('PATCH', `/api/v1/webhooks/${id}`, { enabled: true })
    t.match(on.body.data, {
      status: 'enabled',
      disabled: null,
      events: ['project.deleted', 'agent.failed'],
      url: 'http://127.0.0.2:9/new',
    })

    const log = (await a.call('GET', '/api/v1/audit-log?limit=10')).body.data.map((e: { action: string }) => e.action)
    t.match(log, ['webhook.updated', 'webhook.updated', 'webhook.updated', 'webhook.created'])
    t.equal(
      (await a.call('PATCH', `/api/v1/webhooks/${id}`, {})).body.error.code,
      'VALIDATION_ERROR',
      'an empty change is refused',
    )

    t.equal((await a.call('DELETE', `/api/v1/webhooks/${id}`)).status, 200)
    const left = await h.platform.db.system((sql) => sql`select 1 from webhook_deliveries where webhook_id = ${id}`)
    t.equal(left.length, 0)
  },
)

t.test('the deliveries list pages newest first and filters by status', async (t) => {
  const a = await h.tenant()
  const id = (await a.call('POST', '/api/v1/webhooks', { url: URL_OK, events: ['project.created'], secret: SECRET }))
    .body.data.id
  const ids: string[] = []
  for (let i = 0; i < 5; i++) ids.push((await a.call('POST', `/api/v1/webhooks/${id}/test`)).body.data.id)
  const first = await a.call('GET', `/api/v1/webhooks/${id}/deliveries?limit=3`)
  t.same(
    first.body.data.map((d: { id: string }) => d.id),
    ids.slice(2).reverse(),
  )
  const second = await a.call('GET', `/api/v1/webhooks/${id}/deliveries?limit=3&cursor=${first.body.meta.nextCursor}`)
  t.same(
    second.body.data.map((d: { id: string }) => d.id),
    ids.slice(0, 2).reverse(),
  )
  t.equal(second.body.meta.nextCursor, null)
  t.equal((await a.call('GET', `/api/v1/webhooks/${id}/deliveries?status=succeeded`)).body.data.length, 0)
  t.equal((await a.call('GET', `/api/v1/webhooks/${id}/deliveries?status=nope`)).body.error.code, 'VALIDATION_ERROR')
  t.equal((await a.call('GET', `/api/v1/webhooks/${id}/deliveries?cursor=bogus`)).body.error.code, 'VALIDATION_ERROR')
})

t.test('every webhook route is in the OpenAPI document', async (t) => {
  const doc = (await h.anonymous('GET', '/openapi.json')).body
  for (const base of ['/api/v1/webhooks', '/api/v1/platform/webhooks']) {
    for (const path of [
      '',
      '/{id}',
      '/{id}/rotate-secret',
      '/{id}/test',
      '/{id}/deliveries',
      '/{id}/deliveries/{deliveryId}',
      '/{id}/deliveries/{deliveryId}/retry',
    ]) {
      t.ok(doc.paths[base + path], base + path)
    }
  }
})
