// The audit log's reading rules (audit/service.ts) on their own: which plans have a log, which
// filters reach the query, and who an event names as its actor. The query is replaced by rows in
// memory: no database. routes.test.ts checks the same through the API on a real one.
import t, { type Test } from 'tap'
import type * as Service from '../../../../server/modules/audit/service.js'
import type { AuditEvent, AuditFilter, AuditRow } from '../../../../server/modules/audit/store.js'
import type { Principal } from '../../../../server/domain/principal.js'
import { fakeDb, noSql, replacing } from '../../../helpers/fake-db.js'

const TENANT = '01900000-0000-7000-8000-0000000000aa'
const event = (id: string): AuditRow => ({
  id,
  action: 'key.created',
  actor_type: 'user',
  actor_id: 'u1',
  target_type: 'api_key',
  target_id: 'k1',
  ip: '',
  user_agent: '',
  details: {},
  created_at: new Date(0),
})
const ids = [
  '01900000-0000-7000-8000-000000000003',
  '01900000-0000-7000-8000-000000000002',
  '01900000-0000-7000-8000-000000000001',
]

/**
 * The audit log service on events in memory; `asked` is what each query was asked for, `written` each event recorded.
 */
async function auditLog(t: Test) {
  const asked: { filter: AuditFilter; limit: number; before: string | null }[] = []
  const written: AuditEvent[] = []
  const mod = await replacing<typeof Service>(t, import.meta.url, '../../../../server/modules/audit/service.js', {
    './store.js': {
      listAuditEvents: async (
        _sql: unknown,
        _tenant: string,
        filter: AuditFilter,
        limit: number,
        before: string | null,
      ) => {
        asked.push({ filter, limit, before })
        return ids.slice(0, limit).map(event)
      },
      insertAuditEvent: async (_sql: unknown, e: AuditEvent) => void written.push(e),
    },
  })
  const db = fakeDb()
  return { ...mod, service: mod.auditLogService({ db }), asked, written, db }
}

t.test('the free plan keeps no audit log: FORBIDDEN naming the plan it needs, without a query', async (t) => {
  const { service, db } = await auditLog(t)
  for (const plan of ['free', null] as const) {
    await t.rejects(
      service.list({ tenantId: TENANT, plan }, { limit: 10 }),
      { code: 'FORBIDDEN', details: { plan: 'free', requiredPlan: 'pro' } },
      String(plan),
    )
  }
  t.same(db.opened, [])
  for (const plan of ['pro', 'growth', 'enterprise'] as const)
    t.match(await service.list({ tenantId: TENANT, plan }, { limit: 10 }), { items: { length: 3 } }, plan)
})

t.test(
  'only the filters given reach the query, the times as dates; a window that ends before it starts is refused',
  async (t) => {
    const { service, asked, db } = await auditLog(t)
    await service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 10 })
    await service.list(
      { tenantId: TENANT, plan: 'pro' },
      { limit: 10, action: 'auth.*', actorId: 'u1', since: '2030-01-01T00:00:00Z', until: '2030-01-02T00:00:00Z' },
    )
    t.same(
      asked.map((a) => a.filter),
      [
        {},
        {
          action: 'auth.*',
          actorId: 'u1',
          since: new Date('2030-01-01T00:00:00Z'),
          until: new Date('2030-01-02T00:00:00Z'),
        },
      ],
    )
    const opened = db.opened.length
    for (const [since, until] of [
      ['2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z'],
      ['2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z'],
    ]) {
      await t.rejects(
        service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 10, since, until }),
        { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'querystring.since' }] } },
        `${since} to ${until}`,
      )
    }
    await t.rejects(service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 10, cursor: 'not-a-cursor' }), {
      code: 'VALIDATION_ERROR',
      details: { errors: [{ field: 'cursor' }] },
    })
    t.equal(db.opened.length, opened, 'none of them reached the database')
  },
)

t.test('a page asks for one event more than it shows, and the next page starts after its last event', async (t) => {
  const { service, asked } = await auditLog(t)
  const first = await service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 2 })
  t.same(
    first.items.map((e) => e.id),
    ids.slice(0, 2),
  )
  t.equal(asked[0]!.limit, 3)
  await service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 2, cursor: first.nextCursor! })
  t.equal(asked[1]!.before, ids[1], 'the cursor is the last id shown')
  t.equal(
    (await service.list({ tenantId: TENANT, plan: 'pro' }, { limit: 3 })).nextCursor,
    null,
    'no extra event: the last page',
  )
})

t.test('an event names a key by its id, a user by their user id, and nobody as anonymous', async (t) => {
  const { auditBy, audit, written } = await auditLog(t)
  const origin = { ip: '10.0.0.3', userAgent: 'unit' }
  const base = { tenantId: TENANT, plan: 'pro' as const, sessionId: null, permissions: new Set<string>() }
  const by = (principal: Principal) =>
    auditBy(noSql, { tenantId: TENANT, principal, origin }, { action: 'key.created' })
  await by({ ...base, kind: 'api_key', id: 'k1', userId: 'u1', role: null })
  await by({ ...base, kind: 'user', id: 'u2', userId: 'u2', role: 'admin', sessionId: 's1' })
  await audit(noSql, { tenantId: TENANT, actor: { type: 'anonymous', id: null }, action: 'auth.login_failed' })
  const actors = written.map((e) => ({ type: e.actorType, id: e.actorId }))
  t.same(actors[0], { type: 'api_key', id: 'k1' }, 'a key made by a user is still the key')
  t.same(actors[1], { type: 'user', id: 'u2' })
  t.same(
    actors[2],
    { type: 'anonymous', id: null },
    'nobody signed in (the caller names no principal): anonymous, with no id',
  )
  t.match(
    written.slice(0, 2),
    [
      { tenantId: TENANT, ip: '10.0.0.3', userAgent: 'unit' },
      { tenantId: TENANT, ip: '10.0.0.3', userAgent: 'unit' },
    ],
    "in the actor's tenant, from where its request came",
  )
})
