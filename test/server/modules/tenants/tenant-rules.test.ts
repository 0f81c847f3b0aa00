// The tenant rules of tenants/service.ts and plans.ts on their own: what a new tenant must be, the
// license's tenant limit, what it is born with, renaming, and the plan gates. What the service reads
// and writes is replaced by rows in memory: no database. service.test.ts checks the same on a real one.
import t, { type Test } from 'tap'
import { PLAN_TERMS } from '../../../../server/domain/plans.js'
import type * as Service from '../../../../server/modules/tenants/service.js'
import type { TenantRow } from '../../../../server/modules/tenants/store.js'
import { verifyPassword } from '../../../../server/modules/users/passwords.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'

type Plan = TenantRow['plan']
const PLANS: Plan[] = ['free', 'pro', 'growth', 'enterprise']
const row = (over: Partial<TenantRow> = {}): TenantRow => ({
  id: 't1',
  name: 'Acme',
  plan: 'pro',
  status: 'active',
  created_at: new Date(0),
  updated_at: new Date(0),
  ...over,
})

/** The tenants service on rows in memory; `log` is every write, in order. */
async function tenants(t: Test, world: { count?: number; current?: TenantRow } = {}) {
  const log: unknown[][] = []
  const mod = await replacing<typeof Service>(t, import.meta.url, '../../../../server/modules/tenants/service.js', {
    './store.js': {
      countTenantsForCreation: async () => (log.push(['count']), world.count ?? 0),
      insertTenant: async (_sql: unknown, r: { id: string; name: string; plan: Plan }) => (
        log.push(['tenant', r.name, r.plan]),
        row(r)
      ),
      selectTenant: async () => (world.current ? [world.current] : []),
      renameTenant: async (_sql: unknown, id: string, name: string) => (log.push(['rename', name]), row({ id, name })),
    },
    '../users/service.js': {
      insertUser: async (_sql: unknown, u: { email: string; role: string; passwordHash: string | null }) =>
        void log.push(['user', u.email, u.role, u.passwordHash]),
      emitUserCreated: async (_sql: unknown, _t: string, _u: string, by: string) =>
        void log.push(['event', 'user.created', by]),
    },
    '../outbox/service.js': {
      emitEvent: async (_sql: unknown, e: { type: string }) => void log.push(['event', e.type]),
    },
    '../api-keys/service.js': {
      createKey: async (_sql: unknown, _tags: unknown, k: { type: string; permissions: string[]; name: string }) => (
        log.push(['key', k.type, k.permissions, k.name]),
        { key: 'svc_ci_made' }
      ),
    },
    '../audit/service.js': {
      audit: async (_sql: unknown, e: { action: string; details: unknown }) =>
        void log.push(['audit', e.action, e.details]),
      auditBy: async (_sql: unknown, _actor: unknown, e: { action: string; details: unknown }) =>
        void log.push(['audit', e.action, e.details]),
    },
  })
  const db = fakeDb()
  const platform = { db, secrets: { deriveKey: () => Buffer.alloc(32, 3) } }
  return { ...mod, platform, db, log, service: mod.tenantsService({ db }) }
}

t.test('bad input for a new tenant is VALIDATION_ERROR before any transaction', async (t) => {
  const { createTenant, platform, db } = await tenants(t)
  const bad: [Service.CreateTenantInput, string][] = [
    [{ name: '' }, 'name'],
    [{ name: '   ' }, 'name'],
    [{ name: 'x'.repeat(201) }, 'name'],
    [{ name: 'ok', plan: 'platinum' }, 'plan'],
    [{ name: 'ok', email: 'not-an-email' }, 'email'],
    [{ name: 'ok', email: `${'x'.repeat(310)}@example.com` }, 'email'],
    [{ name: 'ok', email: 'o@example.com', password: 'elevenchars' }, 'password'],
  ]
  for (const [input, field] of bad)
    await t.rejects(
      createTenant(platform, input),
      { code: 'VALIDATION_ERROR', details: { errors: [{ field }] } },
      JSON.stringify(input).slice(0, 60),
    )
  t.same(db.opened, [])
})

t.test(
  "a new tenant is born in one transaction with its owner, the owner's all-permissions key and both events",
  async (t) => {
    const { createTenant, platform, db, log } = await tenants(t)
    const created = await createTenant(platform, {
      name: '  Acme ',
      plan: 'growth',
      email: ' owner@example.com ',
      password: 'twelve chars',
    })
    t.equal(created.apiKey, 'svc_ci_made')
    t.same(db.opened, ['system'])
    t.match(log, [
      ['tenant', 'Acme', 'growth'],
      ['user', 'owner@example.com', 'owner', /^scrypt\$/],
      ['event', 'tenant.created'],
      ['event', 'user.created', 'tenant_created'],
      ['key', 'ci', ['*'], 'owner key (admin CLI)'],
    ])
    t.ok(await verifyPassword('twelve chars', log[1]![3] as string), 'the owner signs in with the password given')
    t.same(
      log.filter((e) => e[0] === 'count'),
      [],
      'no license limit given: nothing counted',
    )

    const quiet = await tenants(t)
    const q = await quiet.createTenant(quiet.platform, { name: 'Quiet' })
    t.match(
      quiet.log,
      [
        ['tenant', 'Quiet', 'free'],
        ['user', `owner-${q.tenantId.slice(-12)}@tenant.invalid`, 'owner', null],
      ],
      'free by default; an owner without an address or a password',
    )
  },
)

t.test("the license's tenant limit is counted in the creation's transaction; FORBIDDEN at the limit", async (t) => {
  const full = await tenants(t, { count: 3 })
  await t.rejects(full.createTenant(full.platform, { name: 'Fourth' }, { maxTenants: 3 }), {
    code: 'FORBIDDEN',
    message: /at most 3 tenant\(s\)/,
    details: { reason: 'license_tenant_limit', maxTenants: 3 },
  })
  t.same(full.log, [['count']], 'nothing created')
  const room = await tenants(t, { count: 2 })
  await room.createTenant(room.platform, { name: 'Third' }, { maxTenants: 3 })
  t.same(
    room.log.slice(0, 2).map((e) => e[0]),
    ['count', 'tenant'],
  )
  const unlicensed = await tenants(t, { count: 10_000 })
  await unlicensed.createTenant(unlicensed.platform, { name: 'Any' }, { maxTenants: null })
  t.same(
    unlicensed.log.filter((e) => e[0] === 'count'),
    [],
    'no license, no limit',
  )
})

t.test('a rename to the same name (once trimmed) writes nothing; another is audited with both names', async (t) => {
  const { service, log } = await tenants(t, { current: row() })
  const actor = {
    tenantId: 't1',
    principal: {
      kind: 'api_key' as const,
      id: 'k1',
      tenantId: 't1',
      plan: 'pro' as const,
      userId: null,
      role: null,
      sessionId: null,
      permissions: new Set(['*']),
    },
    origin: { ip: '', userAgent: '' },
  }
  t.match(await service.rename(actor, '  Acme  '), { name: 'Acme', limits: PLAN_TERMS.pro.limits })
  t.same(log, [])
  t.match(await service.rename(actor, ' Acme Corp '), { name: 'Acme Corp' })
  t.same(log, [
    ['rename', 'Acme Corp'],
    ['audit', 'tenant.updated', { fields: ['name'], from: 'Acme', to: 'Acme Corp' }],
  ])
  const gone = await tenants(t)
  await t.rejects(gone.service.get('t9'), { code: 'RESOURCE_NOT_FOUND', details: { resource: 'tenant', id: 't9' } })
})

t.test(
  'plan gates grow with the plan; enterprise keeps every version, and every plan bounds its endpoints',
  async (t) => {
    t.same(
      PLANS.map((p) => PLAN_TERMS[p].limits.projectVersions),
      [5, 20, 50, null],
    )
    t.same(
      PLANS.map((p) => PLAN_TERMS[p].limits.webhookEndpoints),
      [2, 10, 25, 100],
    )
    const { tenantView } = await import('../../../../server/modules/tenants/service.js')
    for (const plan of PLANS)
      t.same(tenantView(row({ plan })).limits, PLAN_TERMS[plan].limits, `a ${plan} tenant sees its own gates`)
  },
)
