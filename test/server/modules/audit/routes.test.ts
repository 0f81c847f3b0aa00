import t from 'tap'
import { newId } from '../../../../common/ids.js'
import { auditLogService } from '../../../../server/modules/audit/service.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { appOn, caller, testApp, type Caller } from '../../../helpers/app.js'
import { suffix, testPlatform } from '../../../helpers/platform.js'
import { allPages, listedIds } from '../../../helpers/answers.js'
import { PASSWORD, signedIn, until } from '../api-keys/helpers.js'

const h = await testApp(t)
const db = h.platform.db

type Plan = 'free' | 'pro' | 'growth' | 'enterprise'

/** How many days of events each paid plan keeps (the free plan keeps none). */
const RETENTION_DAYS = [
  ['pro', 30],
  ['growth', 90],
  ['enterprise', 365],
] as const

async function tenantWithPassword(plan: Plan) {
  const email = `owner-${suffix()}@example.com`
  const created = await createTenant(h.platform, { name: `Audited ${suffix()}`, plan, email, password: PASSWORD })
  return { ...created, email, call: caller(h.app, created.apiKey) }
}

/** An event written straight into the table, `daysAgo` old. */
async function insertEvent(
  tenantId: string,
  daysAgo: number,
  over: { action?: string; actorId?: string | null; actorType?: string } = {},
): Promise<string> {
  const id = newId()
  await db.system(
    (sql) => sql`
    insert into audit_events (id, tenant_id, actor_type, actor_id, action, created_at)
    values (${id}, ${tenantId}, ${over.actorType ?? 'system'}, ${over.actorId ?? null}, ${over.action ?? 'test.event'},
            now() - make_interval(secs => ${daysAgo * 86_400}))`,
  )
  return id
}

const remaining = async (ids: string[]) =>
  (await db.system((sql) => sql<{ id: string }[]>`select id from audit_events where id = any(${ids}::uuid[])`))
    .map((r) => r.id)
    .sort()

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON from the API
async function events(call: Caller, query = ''): Promise<any[]> {
  const r = await call('GET', `/api/v1/audit-log${query}`)
  if (r.status !== 200) throw new Error(`audit log: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.data
}

t.test("sign-ins that succeed and fail are in the tenant admin's audit log", async (t) => {
  const o = await tenantWithPassword('pro')
  const ua = { 'user-agent': 'audit-test/1.0' }
  const wrong = await h.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: 'not the password' }, ua)
  t.equal(wrong.body.error.code, 'UNAUTHORIZED')
  const right = await h.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: PASSWORD }, ua)
  t.equal(right.status, 200)

  // A failure is audited after it is answered (so that an unknown address does not answer sooner).
  let log = await events(o.call)
  for (let i = 0; i < 50 && log.length < 2; i++) {
    await new Promise((r) => setTimeout(r, 20))
    log = await events(o.call)
  }
  t.match(log, [
    {
      action: 'auth.login',
      actor: { type: 'user', id: o.userId },
      target: { type: 'session', id: String },
      ip: '127.0.0.1',
      userAgent: 'audit-test/1.0',
      details: { method: 'password' },
    },
    {
      action: 'auth.login_failed',
      actor: { type: 'anonymous', id: null },
      target: { type: 'user', id: o.userId },
      ip: '127.0.0.1',
      userAgent: 'audit-test/1.0',
      details: { method: 'password' },
    },
  ])
  t.same(Object.keys(log[0]).sort(), ['action', 'actor', 'createdAt', 'details', 'id', 'ip', 'target', 'userAgent'])
  t.ok(Math.abs(Date.parse(log[0].createdAt) - Date.now()) < 60_000)

  const admin = await signedIn(h, o.tenantId, 'admin')
  t.match(
    await events(admin.call, '?action=auth.login_failed'),
    [{ action: 'auth.login_failed' }],
    'a signed-in admin reads it too',
  )
})

t.test('keys created and revoked are audited: who, what and from where', async (t) => {
  const o = await tenantWithPassword('growth')
  const ownerKey = (await o.call('GET', '/api/v1/api-keys')).body.data[0].id as string
  const made = await o.call(
    'POST',
    '/api/v1/api-keys',
    { name: 'ci bot', type: 'ci', permissions: ['projects:read', 'export'] },
    { 'user-agent': 'ci-setup' },
  )
  await o.call('DELETE', `/api/v1/api-keys/${made.body.data.id}`, undefined, { 'user-agent': 'cleanup' })
  const log = await events(o.call, '?action=key.*')
  t.match(log, [
    {
      action: 'key.revoked',
      actor: { type: 'api_key', id: ownerKey },
      target: { type: 'api_key', id: made.body.data.id },
      userAgent: 'cleanup',
      details: { type: 'ci', permissions: ['projects:read', 'export'], name: 'ci bot' },
    },
    {
      action: 'key.created',
      actor: { type: 'api_key', id: ownerKey },
      target: { type: 'api_key', id: made.body.data.id },
      ip: '127.0.0.1',
      userAgent: 'ci-setup',
      details: { type: 'ci', permissions: ['projects:read', 'export'], name: 'ci bot', expiresAt: null },
    },
  ])
  t.equal(log.length, 2)
  t.notMatch(JSON.stringify(log), made.body.data.key.slice(12), 'the secret is not in the log')

  const refused = await o.call('POST', '/api/v1/api-keys', { name: 'x', type: 'admin', permissions: ['*'] })
  t.equal(refused.body.error.code, 'VALIDATION_ERROR')
  t.equal((await events(o.call, '?action=key.*')).length, 2, 'a refused request records nothing')
})

t.test('the free plan records nothing and has no audit log to read', async (t) => {
  const o = await tenantWithPassword('free')
  await h.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: 'wrong password' })
  await h.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: PASSWORD })
  const made = await o.call('POST', '/api/v1/api-keys', { name: 'k', type: 'sdk', permissions: ['projects:read'] })
  t.equal(made.status, 201)
  t.equal((await o.call('DELETE', `/api/v1/api-keys/${made.body.data.id}`)).status, 200)
  const [row] = await db.system(
    (sql) => sql<{ n: number }[]>`select count(*)::int as n from audit_events where tenant_id = ${o.tenantId}`,
  )
  t.equal(row!.n, 0, 'nothing was recorded')

  const r = await o.call('GET', '/api/v1/audit-log')
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.same(r.body.error.details, { plan: 'free', requiredPlan: 'pro' })
  t.match(r.body.error.message, /needs the Pro plan or higher/)
})

t.test("only events inside the plan's retention are shown", async (t) => {
  for (const [plan, days] of RETENTION_DAYS) {
    const o = await h.tenant(plan)
    const inside = await insertEvent(o.tenantId, days - 1)
    await insertEvent(o.tenantId, days + 1)
    t.same(
      (await events(o.call)).map((e) => e.id),
      [inside],
      `${plan}: ${days} days`,
    )
  }
})

t.test('a plan change moves the window at once', async (t) => {
  const o = await h.tenant('growth')
  const older = await insertEvent(o.tenantId, 60)
  const recent = await insertEvent(o.tenantId, 1)
  t.same(
    (await events(o.call)).map((e) => e.id),
    [recent, older],
  )
  await db.system((sql) => sql`update tenants set plan = 'pro' where id = ${o.tenantId}`)
  t.same(
    (await events(o.call)).map((e) => e.id),
    [recent],
    'pro keeps 30 days, before any sweep',
  )
})

t.test('filters: action, action prefix, actor, since and until', async (t) => {
  const o = await h.tenant('enterprise')
  const alice = newId()
  const bob = newId()
  const e1 = await insertEvent(o.tenantId, 10, { action: 'key.created', actorType: 'user', actorId: alice })
  const e2 = await insertEvent(o.tenantId, 5, { action: 'key.revoked', actorType: 'user', actorId: bob })
  const e3 = await insertEvent(o.tenantId, 2, { action: 'auth.login', actorType: 'user', actorId: alice })
  const ids = async (q: string) => (await events(o.call, q)).map((e) => e.id)
  const at = (daysAgo: number) => encodeURIComponent(new Date(Date.now() - daysAgo * 86_400_000).toISOString())

  t.same(await ids(''), [e3, e2, e1])
  t.same(await ids('?action=key.created'), [e1])
  t.same(await ids('?action=key.*'), [e2, e1])
  t.same(await ids('?action=key'), [], 'an exact action, not a prefix')
  t.same(await ids(`?actorId=${alice}`), [e3, e1])
  t.same(await ids(`?actorId=${alice}&action=auth.*`), [e3])
  t.same(await ids(`?since=${at(6)}`), [e3, e2])
  t.same(await ids(`?until=${at(3)}`), [e2, e1])
  t.same(await ids(`?since=${at(6)}&until=${at(3)}`), [e2])

  for (const q of [
    'action=Key.Created',
    'action=key.%25',
    'actorId=alice',
    'since=yesterday',
    'until=2024-01-01',
    `since=${at(1)}&until=${at(2)}`,
    'limit=201',
    'limit=0',
    'cursor=nope',
    'extra=1',
  ]) {
    const r = await o.call('GET', `/api/v1/audit-log?${q}`)
    t.equal(r.status, 400, q)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', q)
  }
})

t.test('the log pages newest first without gaps or repeats', async (t) => {
  const o = await h.tenant('pro')
  const ids: string[] = []
  for (let i = 5; i >= 1; i--) ids.push(await insertEvent(o.tenantId, i / 10))
  const pages = await allPages(o.call, '/api/v1/audit-log', 2)
  t.equal(pages.length, 3)
  t.same(listedIds(pages), [...ids].reverse())
})

t.test("audit:read is needed, and another tenant's events are never shown", async (t) => {
  const a = await h.tenant('enterprise')
  const b = await h.tenant('enterprise')
  const theirs = await insertEvent(b.tenantId, 1, { actorType: 'user', actorId: b.userId })
  const mine = await insertEvent(a.tenantId, 1)
  t.same(
    (await events(a.call)).map((e) => e.id),
    [mine],
  )
  t.same(await events(a.call, `?actorId=${b.userId}`), [])
  t.same(
    (await events(b.call)).map((e) => e.id),
    [theirs],
  )

  const reader = await a.call('POST', '/api/v1/api-keys', { name: 'auditor', type: 'ci', permissions: ['audit:read'] })
  t.equal(
    (await caller(h.app, reader.body.data.key)('GET', '/api/v1/audit-log')).status,
    200,
    'audit:read alone suffices',
  )
  const noAudit = await a.call('POST', '/api/v1/api-keys', {
    name: 'no audit',
    type: 'ci',
    permissions: ['projects:read', 'export', 'team:read'],
  })
  const member = await signedIn(h, a.tenantId, 'member')
  for (const [who, c] of [
    ['a key without audit:read', caller(h.app, noAudit.body.data.key)],
    ['a member', member.call],
  ] as const) {
    const r = await c('GET', '/api/v1/audit-log')
    t.equal(r.status, 403, who)
    t.equal(r.body.error.code, 'FORBIDDEN', who)
    t.equal(r.body.error.details.required, 'audit:read', who)
  }
  t.equal((await h.anonymous('GET', '/api/v1/audit-log')).body.error.code, 'UNAUTHORIZED')
})

t.test("the retention sweep deletes events past their tenant's retention, and only those", async (t) => {
  const keep: string[] = []
  const gone: string[] = []
  for (const [plan, days] of RETENTION_DAYS) {
    const o = await h.tenant(plan)
    keep.push(await insertEvent(o.tenantId, 0), await insertEvent(o.tenantId, days - 1))
    gone.push(await insertEvent(o.tenantId, days + 1), await insertEvent(o.tenantId, 400))
  }
  // A free tenant keeps none: rows from a time it paid for a longer plan go at the next sweep.
  const free = await h.tenant('free')
  gone.push(await insertEvent(free.tenantId, 0), await insertEvent(free.tenantId, 10))

  const deleted = await auditLogService({ db }).sweep()
  t.type(deleted, 'number')
  t.same(await remaining([...keep, ...gone]), [...keep].sort(), 'in-window events stay, the rest are gone')
  t.equal(await auditLogService({ db }).sweep(), 0, 'a second sweep has nothing to do')
})

t.test(
  'only one replica sweeps at a time',
  { skip: db.mode === 'embedded' ? 'the embedded database has one session: no second one to hold the lock' : false },
  async (t) => {
    const o = await h.tenant('pro')
    const old = await insertEvent(o.tenantId, 31)
    const svc = auditLogService({ db })
    await db.sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(7242019301)`
      t.equal(await svc.sweep(), null, 'the lock is held elsewhere: this replica skips')
    })
    t.same(await remaining([old]), [old])
    t.ok((await svc.sweep())! >= 1, 'once the lock is free, the sweep runs')
    t.same(await remaining([old]), [])
  },
)

t.test('the sweep runs when a server starts', async (t) => {
  const platform = await testPlatform(t)
  const { tenantId } = await createTenant(platform, { name: 'Swept', plan: 'pro', email: `s-${suffix()}@example.com` })
  const old = newId()
  await platform.db.system(
    (sql) => sql`
    insert into audit_events (id, tenant_id, actor_type, action, created_at) values (${old}, ${tenantId}, 'system', 'test.event', now() - interval '31 days')`,
  )
  await appOn(t, platform, { jobs: {} })
  const { r } = await until(
    async () => {
      const [row] = await platform.db.system(
        (sql) => sql<{ n: number }[]>`select count(*)::int as n from audit_events where id = ${old}`,
      )
      return { status: row!.n, headers: {}, body: null, raw: Buffer.alloc(0) }
    },
    1,
    5000,
  )
  t.equal(r.status, 0, 'the old event is gone without anyone asking')
})
