import t from 'tap'
import { CREDENTIAL_CACHE_SECONDS } from '../../../../server/domain/credentials.js'
import { appOn, caller, testApp, type Caller } from '../../../helpers/app.js'
import { allPages, listedIds } from '../../../helpers/answers.js'
import { signedIn, until } from './helpers.js'

const h = await testApp(t)

interface Made {
  id: string
  key: string
  call: Caller
}

async function makeKey(call: Caller, body: Record<string, unknown>): Promise<Made> {
  const r = await call('POST', '/api/v1/api-keys', { name: 'test key', type: 'ci', ...body })
  if (r.status !== 201) throw new Error(`key not created: ${r.status} ${JSON.stringify(r.body)}`)
  return { id: r.body.data.id, key: r.body.data.key, call: caller(h.app, r.body.data.key) }
}

async function keyCount(tenantId: string): Promise<number> {
  const [row] = await h.platform.db.system(
    (sql) => sql<{ n: number }[]>`select count(*)::int as n from api_keys where tenant_id = ${tenantId}`,
  )
  return row!.n
}

const VIEW_FIELDS = [
  'createdAt',
  'createdBy',
  'expiresAt',
  'id',
  'lastFour',
  'lastUsedAt',
  'name',
  'permissions',
  'prefix',
  'revokedAt',
  'type',
]

t.test(
  'an admin creates a key whose secret is shown once; lists and gets show prefix and last four only',
  async (t) => {
    const { call, userId } = await h.tenant()
    const before = Date.now()
    const r = await call('POST', '/api/v1/api-keys', {
      name: '  deploy bot ',
      type: 'sdk',
      permissions: ['projects:read', 'projects:read'],
      expiresInDays: 30,
    })
    t.equal(r.status, 201)
    const created = r.body.data
    t.same(Object.keys(created).sort(), [
      'createdAt',
      'expiresAt',
      'id',
      'key',
      'lastFour',
      'name',
      'permissions',
      'prefix',
      'type',
    ])
    t.match(created, {
      name: 'deploy bot',
      type: 'sdk',
      key: /^svc_sdk_[A-Za-z0-9]{40}$/,
      permissions: ['projects:read'],
    })
    t.equal(created.prefix, created.key.slice(0, 12))
    t.equal(created.lastFour, created.key.slice(-4))
    const expires = Date.parse(created.expiresAt) - before
    t.ok(expires >= 30 * 86_400_000 && expires < 30 * 86_400_000 + 60_000, 'expires in 30 days')

    t.equal((await caller(h.app, created.key)('GET', '/api/v1/projects')).status, 200, 'the key works')

    const list = await call('GET', '/api/v1/api-keys')
    t.equal(list.status, 200)
    t.equal(list.body.data.length, 2, 'the new key and the owner key')
    t.equal(list.body.data[0].id, created.id, 'newest first')
    const got = await call('GET', `/api/v1/api-keys/${created.id}`)
    t.equal(got.status, 200)
    for (const view of [list.body.data[0], got.body.data]) {
      t.same(Object.keys(view).sort(), VIEW_FIELDS)
      t.match(view, {
        id: created.id,
        prefix: created.prefix,
        lastFour: created.lastFour,
        revokedAt: null,
        createdBy: userId,
        createdAt: created.createdAt,
        expiresAt: created.expiresAt,
      })
    }
    const secret = created.key.slice(12, -4)
    t.notMatch(list.raw.toString(), secret, 'the list never holds the secret')
    t.notMatch(got.raw.toString(), secret, 'nor does a get')
    const [row] = await h.platform.db.system((sql) => sql`select * from api_keys where id = ${created.id}`)
    t.notMatch(JSON.stringify(row), secret, 'the database holds only its hash')
  },
)

t.test('"*" stands alone, and no expiry means a key that does not expire', async (t) => {
  const { call } = await h.tenant()
  const r = await call('POST', '/api/v1/api-keys', { name: 'all', type: 'ci', permissions: ['export', '*'] })
  t.match(r.body.data, { permissions: ['*'], expiresAt: null })
  const at = new Date(Date.now() + 3600_000).toISOString()
  const until = await call('POST', '/api/v1/api-keys', {
    name: 'hour',
    type: 'ci',
    permissions: ['export'],
    expiresAt: at,
  })
  t.equal(until.body.data.expiresAt, at)
})

t.test('bad key requests are VALIDATION_ERROR and create nothing', async (t) => {
  const { call, tenantId } = await h.tenant()
  const ok = { name: 'k', type: 'ci', permissions: ['projects:read'] }
  const cases: [string, unknown, string][] = [
    ['missing name', { type: 'ci', permissions: ['export'] }, 'body.name'],
    ['blank name', { ...ok, name: '   ' }, 'body.name'],
    ['name too long', { ...ok, name: 'x'.repeat(101) }, 'body.name'],
    ['admin type', { ...ok, type: 'admin' }, 'body.type'],
    ['unknown type', { ...ok, type: 'root' }, 'body.type'],
    ['missing type', { name: 'k', permissions: ['export'] }, 'body.type'],
    ['no permissions', { ...ok, permissions: [] }, 'body.permissions'],
    [
      'unknown permission',
      { ...ok, permissions: ['projects:read', 'projects:delete-everything'] },
      'body.permissions.1',
    ],
    ['permissions not a list', { ...ok, permissions: 'projects:read' }, 'body.permissions'],
    ['expiry in the past', { ...ok, expiresAt: new Date(Date.now() - 1000).toISOString() }, 'body.expiresAt'],
    ['expiry not a time', { ...ok, expiresAt: 'tomorrow' }, 'body.expiresAt'],
    [
      'both expiry fields',
      { ...ok, expiresAt: new Date(Date.now() + 86_400_000).toISOString(), expiresInDays: 1 },
      'body.expiresAt',
    ],
    ['zero days', { ...ok, expiresInDays: 0 }, 'body.expiresInDays'],
    ['fractional days', { ...ok, expiresInDays: 1.5 }, 'body.expiresInDays'],
    ['unknown field', { ...ok, tenantId: '01900000-0000-7000-8000-000000000000' }, 'body.tenantId'],
  ]
  for (const [what, body, field] of cases) {
    const r = await call('POST', '/api/v1/api-keys', body)
    t.equal(r.status, 400, what)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
    t.ok(
      r.body.error.details.errors.some((e: { field: string }) => e.field === field),
      `${what}: names ${field}`,
    )
  }
  t.equal(await keyCount(tenantId), 1, 'only the owner key exists')
})

t.test('nobody grants more than they hold', async (t) => {
  const { call, tenantId } = await h.tenant()
  const manager = await makeKey(call, { permissions: ['keys:manage', 'projects:read'] })
  const narrower = await manager.call('POST', '/api/v1/api-keys', {
    name: 'reader',
    type: 'sdk',
    permissions: ['projects:read'],
  })
  t.equal(narrower.status, 201, 'a subset of its own permissions')
  for (const [wanted, missing] of [
    [['projects:read', 'projects:write'], ['projects:write']],
    [['*'], ['*']],
    [
      ['export', 'audit:read'],
      ['export', 'audit:read'],
    ],
  ] as const) {
    const r = await manager.call('POST', '/api/v1/api-keys', { name: 'more', type: 'ci', permissions: wanted })
    t.equal(r.status, 403, wanted.join())
    t.equal(r.body.error.code, 'FORBIDDEN')
    t.same(r.body.error.details, { reason: 'exceeds_own_permissions', missing })
  }
  t.equal(await keyCount(tenantId), 3, 'owner key, manager, reader')
})

t.test('keys:manage is needed: keys without it, members and viewers are FORBIDDEN; admins may', async (t) => {
  const ta = h
  const { call, tenantId } = await ta.tenant()
  const target = await makeKey(call, { permissions: ['projects:read'] })
  const reader = target.call
  const member = await signedIn(ta, tenantId, 'member')
  const viewer = await signedIn(ta, tenantId, 'viewer')
  for (const [who, c] of [
    ['a key without keys:manage', reader],
    ['a member', member.call],
    ['a viewer', viewer.call],
  ] as const) {
    for (const [method, url, body] of [
      ['GET', '/api/v1/api-keys', undefined],
      ['GET', `/api/v1/api-keys/${target.id}`, undefined],
      ['POST', '/api/v1/api-keys', { name: 'x', type: 'ci', permissions: ['projects:read'] }],
      ['DELETE', `/api/v1/api-keys/${target.id}`, undefined],
    ] as const) {
      const r = await c(method, url, body)
      t.equal(r.status, 403, `${who}: ${method} ${url}`)
      t.equal(r.body.error.code, 'FORBIDDEN')
      t.equal(r.body.error.details.required, 'keys:manage')
    }
  }
  t.equal((await reader('GET', '/api/v1/projects')).status, 200, 'the key still works, and was not revoked')

  const admin = await signedIn(ta, tenantId, 'admin')
  const made = await admin.call('POST', '/api/v1/api-keys', { name: 'by admin', type: 'ci', permissions: ['*'] })
  t.equal(made.status, 201)
  t.equal(
    (await admin.call('GET', `/api/v1/api-keys/${made.body.data.id}`)).body.data.createdBy,
    admin.userId,
    'made on behalf of the signed-in admin',
  )
  const fromKey = await makeKey(caller(ta.app, made.body.data.key), { permissions: ['export'] })
  t.equal(
    (await call('GET', `/api/v1/api-keys/${fromKey.id}`)).body.data.createdBy,
    admin.userId,
    'a key made by a key inherits its user',
  )
})

t.test('keys carry their permissions on every route', async (t) => {
  const { call } = await h.tenant()
  const project = (await call('POST', '/api/v1/projects', { name: 'p' })).body.data
  const reader = await makeKey(call, { permissions: ['projects:read'] })
  const exporter = await makeKey(call, { permissions: ['export'] })

  t.equal((await reader.call('GET', '/api/v1/projects')).status, 200)
  const write = await reader.call('POST', '/api/v1/projects', { name: 'nope' })
  t.equal(write.status, 403)
  t.equal(write.body.error.code, 'FORBIDDEN')
  t.equal(write.body.error.details.required, 'projects:write')
  const patch = await reader.call('PATCH', `/api/v1/projects/${project.id}`, { name: 'nope' })
  t.equal(patch.body.error.details.required, 'projects:write')

  // The backup (a project taken out of the platform) is today's export-like route; it needs projects:read.
  const backup = await exporter.call('POST', `/api/v1/projects/${project.id}/backup`, {})
  t.equal(backup.status, 403)
  t.equal(backup.body.error.code, 'FORBIDDEN')
  t.equal(backup.body.error.details.required, 'projects:read')
  t.equal(
    (await reader.call('POST', `/api/v1/projects/${project.id}/backup`, {})).status,
    201,
    'with projects:read it works',
  )

  const audit = await reader.call('GET', '/api/v1/audit-log')
  t.equal(audit.body.error.code, 'FORBIDDEN')
  t.equal(audit.body.error.details.required, 'audit:read')
})

t.test('a revoked key stops working at once, on this replica and on another', async (t) => {
  const other = await appOn(t, h.platform)
  const { call } = await h.tenant()
  const k = await makeKey(call, { permissions: ['projects:read'] })
  const here = () => k.call('GET', '/api/v1/projects')
  const there = () => caller(other.app, k.key)('GET', '/api/v1/projects')
  t.equal((await here()).status, 200)
  t.equal((await there()).status, 200, 'the other replica has it cached')

  const revoked = await call('DELETE', `/api/v1/api-keys/${k.id}`)
  t.equal(revoked.status, 200)
  t.match(revoked.body.data, { id: k.id, revokedAt: String })
  t.same(Object.keys(revoked.body.data).sort(), VIEW_FIELDS)

  const mine = await here()
  t.equal(mine.status, 401, 'this replica: the very next request')
  t.equal(mine.body.error.code, 'UNAUTHORIZED')
  const { r, elapsed } = await until(there, 200, 2000)
  t.equal(r.status, 401, 'the other replica, told by the invalidation message')
  t.equal(r.body.error.code, 'UNAUTHORIZED')
  t.ok(elapsed < CREDENTIAL_CACHE_SECONDS * 1000, `well before its cache entry would expire (${elapsed} ms)`)
  const fresh = await appOn(t, h.platform)
  t.equal(
    (await caller(fresh.app, k.key)('GET', '/api/v1/projects')).body.error.code,
    'UNAUTHORIZED',
    'and on a replica that looks it up anew',
  )
})

t.test('revoking a revoked key answers with it unchanged and records one event', async (t) => {
  const { call, tenantId } = await h.tenant()
  const k = await makeKey(call, { permissions: ['projects:read'] })
  const first = await call('DELETE', `/api/v1/api-keys/${k.id}`)
  const again = await call('DELETE', `/api/v1/api-keys/${k.id}`)
  t.equal(again.status, 200)
  t.same(again.body.data, first.body.data)
  const events = await h.platform.db.system(
    (sql) => sql`select action from audit_events where tenant_id = ${tenantId} and target_id = ${k.id} order by id`,
  )
  t.same(
    events.map((e) => e.action),
    ['key.created', 'key.revoked'],
  )
  const listed = await call('GET', `/api/v1/api-keys/${k.id}`)
  t.equal(listed.body.data.revokedAt, first.body.data.revokedAt, 'revoked keys stay listed, with the time')
})

t.test('a key may revoke itself; a narrower key may not revoke a broader one', async (t) => {
  const { call } = await h.tenant()
  const owner = (await call('GET', '/api/v1/api-keys')).body.data[0]
  const manager = await makeKey(call, { permissions: ['keys:manage', 'projects:read'] })
  const reader = await makeKey(call, { permissions: ['projects:read'] })

  const broader = await manager.call('DELETE', `/api/v1/api-keys/${owner.id}`)
  t.equal(broader.status, 403)
  t.equal(broader.body.error.code, 'FORBIDDEN')
  t.same(broader.body.error.details, { reason: 'exceeds_own_permissions', missing: ['*'] })
  t.equal((await call('GET', '/api/v1/projects')).status, 200, 'the owner key still works')

  t.equal((await manager.call('DELETE', `/api/v1/api-keys/${reader.id}`)).status, 200, 'a key within its permissions')
  const itself = await manager.call('DELETE', `/api/v1/api-keys/${manager.id}`)
  t.equal(itself.status, 200, 'its own key')
  t.type(itself.body.data.revokedAt, 'string')
  t.equal((await manager.call('GET', '/api/v1/api-keys')).body.error.code, 'UNAUTHORIZED', 'and then it is gone')
})

t.test('a key of another tenant is RESOURCE_NOT_FOUND and keeps working', async (t) => {
  const a = await h.tenant()
  const b = await h.tenant()
  const theirs = await makeKey(b.call, { permissions: ['projects:read'] })
  for (const method of ['GET', 'DELETE'] as const) {
    const r = await a.call(method, `/api/v1/api-keys/${theirs.id}`)
    t.equal(r.status, 404, method)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND')
    t.same(r.body.error.details, { resource: 'api_key', id: theirs.id })
  }
  t.notOk(
    (await a.call('GET', '/api/v1/api-keys?limit=200')).body.data.some((k: { id: string }) => k.id === theirs.id),
    'not listed',
  )
  t.equal((await theirs.call('GET', '/api/v1/projects')).status, 200)
  const missing = await a.call('DELETE', '/api/v1/api-keys/01900000-0000-7000-8000-000000000000')
  t.equal(missing.body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await a.call('GET', '/api/v1/api-keys/not-a-uuid')).body.error.code, 'VALIDATION_ERROR')
})

t.test('an expired key is UNAUTHORIZED', async (t) => {
  const { call, tenantId } = await h.tenant()
  const soon = await makeKey(call, {
    permissions: ['projects:read'],
    expiresAt: new Date(Date.now() + 1500).toISOString(),
  })
  t.equal((await soon.call('GET', '/api/v1/projects')).status, 200, 'works, and is cached')
  await new Promise((r) => setTimeout(r, 1600))
  const r = await soon.call('GET', '/api/v1/projects')
  t.equal(r.status, 401, 'refused at its expiry, cached or not')
  t.equal(r.body.error.code, 'UNAUTHORIZED')

  const old = await makeKey(call, { permissions: ['projects:read'] })
  await h.platform.db.system(
    (sql) =>
      sql`update api_keys set expires_at = now() - interval '1 day' where id = ${old.id} and tenant_id = ${tenantId}`,
  )
  t.equal((await old.call('GET', '/api/v1/projects')).body.error.code, 'UNAUTHORIZED', 'expired when first looked up')
})

t.test('the list pages newest first without gaps or repeats', async (t) => {
  const { call } = await h.tenant()
  const ids = [(await call('GET', '/api/v1/api-keys')).body.data[0].id as string]
  for (let i = 0; i < 4; i++) ids.push((await makeKey(call, { name: `k${i}`, permissions: ['export'] })).id)
  const pages = await allPages(call, '/api/v1/api-keys', 2)
  for (const page of pages) t.equal(page.status, 200)
  t.equal(pages.length, 3)
  t.same(listedIds(pages), [...ids].reverse())
  for (const q of ['limit=0', 'limit=201', 'cursor=nope', 'extra=1']) {
    t.equal((await call('GET', `/api/v1/api-keys?${q}`)).body.error.code, 'VALIDATION_ERROR', q)
  }
})

t.test('last use is recorded, at most once a minute', async (t) => {
  const { call } = await h.tenant()
  const k = await makeKey(call, { permissions: ['projects:read'] })
  t.equal((await call('GET', `/api/v1/api-keys/${k.id}`)).body.data.lastUsedAt, null, 'never used')
  await k.call('GET', '/api/v1/projects')
  const { r } = await until(
    async () => {
      const got = await call('GET', `/api/v1/api-keys/${k.id}`)
      return { ...got, status: got.body.data.lastUsedAt === null ? 0 : 200 }
    },
    0,
    2000,
  )
  const first = r.body.data.lastUsedAt as string
  t.type(first, 'string', 'recorded after the request, not during it')

  // Another replica looks the key up anew, but finds it used within the minute: no write.
  const other = await appOn(t, h.platform)
  t.equal((await caller(other.app, k.key)('GET', '/api/v1/projects')).status, 200)
  await new Promise((res) => setTimeout(res, 200))
  t.equal((await call('GET', `/api/v1/api-keys/${k.id}`)).body.data.lastUsedAt, first)
})
