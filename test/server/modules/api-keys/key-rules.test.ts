// The key rules of api-keys/service.ts on their own: what a new key may be given, when it expires,
// who may revoke it, and what a presented key is worth. What the service reads and writes is
// replaced by rows in memory: no database. routes.test.ts and service.test.ts check the same on a
// real one.
import t, { type Test } from 'tap'
import type * as Service from '../../../../server/modules/api-keys/service.js'
import type * as Audit from '../../../../server/modules/audit/service.js'
import type { AuditEvent } from '../../../../server/modules/audit/store.js'
import type { Actor } from '../../../../server/domain/actor.js'
import type { Principal } from '../../../../server/domain/principal.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import type { KeyRow, KeyView } from '../../../../server/modules/api-keys/store.js'
import { randomBase62 } from '../../../../common/ids.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'

const TENANT = '01900000-0000-7000-8000-0000000000aa'
const DAY = 86_400_000
const tags = apiKeyTags({ deriveKey: () => Buffer.alloc(32, 4) })
const origin = { ip: '10.0.0.1', userAgent: 'unit' }

const holder = (permissions: string[], over: Partial<Principal> = {}): Principal => ({
  kind: 'api_key',
  id: 'key-of-caller',
  tenantId: TENANT,
  plan: 'pro',
  userId: 'user-1',
  role: null,
  sessionId: null,
  permissions: new Set(permissions),
  ...over,
})
const view = (over: Partial<KeyView> = {}): KeyView => ({
  id: 'key-2',
  name: 'ci',
  type: 'ci',
  prefix: 'svc_ci_abcd',
  last_four: 'wxyz',
  permissions: ['projects:read'],
  user_id: 'user-1',
  created_at: new Date(0),
  expires_at: null,
  revoked_at: null,
  last_used_at: null,
  ...over,
})
const found = (over: Partial<KeyRow> = {}): KeyRow => ({
  id: 'key-3',
  tenant_id: TENANT,
  user_id: 'user-1',
  type: 'ci',
  permissions: ['projects:read'],
  expires_at: null,
  revoked_at: null,
  last_used_at: new Date(),
  plan: 'pro',
  tenant_status: 'active',
  ...over,
})

interface World {
  current?: KeyView
  row?: KeyRow
  legacy?: boolean
}

/** The keys service and authenticator on rows in memory; `log` is every write, in order. */
async function keys(t: Test, world: World = {}) {
  const log: unknown[][] = []
  // The real audit module (auditBy names the actor), with only its write replaced: the event as it would be stored.
  const audit = await replacing<typeof Audit>(t, import.meta.url, '../../../../server/modules/audit/service.js', {
    './store.js': {
      insertAuditEvent: async (_sql: unknown, e: AuditEvent) =>
        void log.push(['audit', e.action, { type: e.actorType, id: e.actorId }, e.details]),
    },
  })
  const mod = await replacing<typeof Service>(t, import.meta.url, '../../../../server/modules/api-keys/service.js', {
    './store.js': {
      insertKey: async (
        _sql: unknown,
        k: { userId: string | null; permissions: string[]; expiresAt: Date | null; name: string },
      ) => {
        log.push(['insert', { userId: k.userId, permissions: k.permissions, expiresAt: k.expiresAt, name: k.name }])
        return view({ permissions: k.permissions })
      },
      selectKey: async () => (world.current ? [world.current] : []),
      revokeKey: async (_sql: unknown, _tenant: string, id: string, at: Date) => (
        log.push(['revoke', id]),
        { ...world.current!, revoked_at: at }
      ),
      findByHash: async () => (log.push(['look up']), world.row),
      touchLastUsed: async () => void log.push(['touch']),
    },
    '../audit/service.js': audit,
  })
  const db = fakeDb()
  const service = mod.apiKeysService({
    db,
    tags,
    credentials: { invalidate: async (inv) => void log.push(['invalidate', inv.kind, inv.id]) },
  })
  const authenticator = mod.apiKeyAuthenticator({ db, tags, legacy: { mayExist: () => world.legacy ?? false } })
  const as = (principal: Principal): Actor => ({ tenantId: TENANT, principal, origin })
  return { service, authenticator, log, db, as }
}

const request = (over: Partial<Service.NewKeyRequest> = {}): Service.NewKeyRequest => ({
  name: 'deploy',
  type: 'ci',
  permissions: ['projects:read'],
  ...over,
})
const invalid = (field: string, message?: RegExp) => ({
  code: 'VALIDATION_ERROR',
  details: { errors: [{ field, ...(message ? { message } : {}) }] },
})

t.test('a malformed key request is VALIDATION_ERROR before any transaction', async (t) => {
  const { service, db, as } = await keys(t)
  const all = holder(['*'])
  await t.rejects(
    service.create(as(all), request({ type: 'admin' })),
    invalid('body.type', /admin CLI/),
    'operator keys come from the admin CLI only',
  )
  await t.rejects(service.create(as(all), request({ type: 'root' })), invalid('body.type', /must be sdk or ci/))
  await t.rejects(service.create(as(all), request({ name: '   ' })), invalid('body.name'))
  await t.rejects(
    service.create(as(all), request({ permissions: ['projects:read', 'projects:delete', 'root'] })),
    invalid('body.permissions', /unknown permissions: projects:delete, root/),
  )
  await t.rejects(
    service.create(as(all), request({ expiresAt: new Date(Date.now() + DAY).toISOString(), expiresInDays: 1 })),
    {
      code: 'VALIDATION_ERROR',
      details: { errors: [{ field: 'body.expiresAt' }, { field: 'body.expiresInDays' }] },
    },
    'not both expiries',
  )
  await t.rejects(
    service.create(as(all), request({ expiresAt: new Date(Date.now() - 1000).toISOString() })),
    invalid('body.expiresAt', /future/),
  )
  t.same(db.opened, [])
})

t.test('nobody grants more than they hold; a refusal names what is missing', async (t) => {
  const { service, log, as } = await keys(t)
  const reader = holder(['projects:read', 'export'])
  await t.rejects(
    service.create(as(reader), request({ permissions: ['projects:read', 'projects:write', 'audit:read'] })),
    {
      code: 'FORBIDDEN',
      details: { reason: 'exceeds_own_permissions', missing: ['projects:write', 'audit:read'] },
    },
  )
  await t.rejects(
    service.create(as(reader), request({ permissions: ['*'] })),
    { code: 'FORBIDDEN', details: { missing: ['*'] } },
    "'*' is more than any list",
  )
  t.same(log, [])
  await service.create(as(reader), request({ permissions: ['export', 'projects:read'] }))
  await service.create(as(holder(['*'])), request({ permissions: ['*'] }))
  t.same(
    log.filter((e) => e[0] === 'insert').map((e) => (e[1] as { permissions: string[] }).permissions),
    [['export', 'projects:read'], ['*']],
    'within what they hold',
  )
})

t.test(
  "a new key: '*' stands alone, duplicates go, it is made for the creator's user, and its creation is audited",
  async (t) => {
    const { service, log, as } = await keys(t)
    const before = Date.now()
    await service.create(
      as(holder(['*'], { userId: 'user-9' })),
      request({ name: '  deploy  ', permissions: ['projects:read', '*', 'export'], expiresInDays: 30 }),
    )
    await service.create(
      as(holder(['*'], { userId: 'user-9' })),
      request({ permissions: ['export', 'export', 'projects:read'] }),
    )
    const inserts = log
      .filter((e) => e[0] === 'insert')
      .map((e) => e[1] as { userId: string; permissions: string[]; expiresAt: Date | null; name: string })
    t.match(inserts, [
      { userId: 'user-9', permissions: ['*'], name: 'deploy' },
      { userId: 'user-9', permissions: ['export', 'projects:read'], expiresAt: null },
    ])
    const expires = inserts[0]!.expiresAt!.getTime() - before
    t.ok(expires >= 30 * DAY && expires < 30 * DAY + 60_000, 'expiresInDays counts from now')
    t.match(
      log.find((e) => e[0] === 'audit'),
      [
        'audit',
        'key.created',
        { type: 'api_key', id: 'key-of-caller' },
        { type: 'ci', permissions: ['*'], name: 'deploy' },
      ],
    )
  },
)

t.test(
  'revoking needs authority over the key, except revoking itself; a revoked key is answered as it is',
  async (t) => {
    const admin = view({ id: 'key-2', permissions: ['keys:manage', 'projects:write'] })
    const one = await keys(t, { current: admin })
    await t.rejects(one.service.revoke(one.as(holder(['keys:manage'])), 'key-2'), {
      code: 'FORBIDDEN',
      details: { reason: 'exceeds_own_permissions', missing: ['projects:write'] },
    })
    t.same(one.log, [], 'nothing revoked, nothing invalidated')
    t.match(
      await one.service.revoke(one.as(holder(['projects:read'], { id: 'key-2' })), 'key-2'),
      { id: 'key-2', revoked_at: Date },
      'a key may always revoke itself',
    )
    t.same(
      one.log.map((e) => e[0]),
      ['revoke', 'audit', 'invalidate'],
    )

    const gone = await keys(t, { current: view({ revoked_at: new Date(1) }) })
    t.match(await gone.service.revoke(gone.as(holder(['*'])), 'key-2'), { revoked_at: new Date(1) })
    t.same(gone.log, [['invalidate', 'api_key', 'key-2']], 'no second revocation or event; the message is sent again')

    const none = await keys(t)
    await t.rejects(none.service.revoke(none.as(holder(['*'])), 'key-404'), {
      code: 'RESOURCE_NOT_FOUND',
      details: { resource: 'api_key', id: 'key-404' },
    })
  },
)

t.test(
  'memory decides every key not issued here; a key of the old format only while the set of old keys may hold it',
  async (t) => {
    const { authenticator, log } = await keys(t, { legacy: false })
    const issued = tags.sign(`svc_ci_${randomBase62(32)}`)
    t.equal(authenticator.fromMemory('not-a-key'), null)
    t.equal(authenticator.fromMemory(`svc_ci_${randomBase62(40)}`), null, 'a tag not made here')
    t.equal(authenticator.fromMemory(issued.slice(0, -1) + (issued.endsWith('a') ? 'b' : 'a')), null, 'an altered key')
    t.equal(authenticator.fromMemory(`svc_ci_${randomBase62(32)}`), null, 'an old-format key the set does not hold')
    t.equal(authenticator.fromMemory(issued), undefined, 'a key made here: only a lookup can tell')
    const old = await keys(t, { legacy: true })
    t.equal(
      old.authenticator.fromMemory(`svc_ci_${randomBase62(32)}`),
      undefined,
      'an old-format key the set may hold is looked up',
    )
    t.same(log, [], 'deciding from memory looks nothing up')
  },
)

t.test('a looked-up key is a principal while it is live; a dead one is refused from memory afterwards', async (t) => {
  const token = () => tags.sign(`svc_ci_${randomBase62(32)}`)
  const live = await keys(t, { row: found({ permissions: ['export', 'projects:read'] }) })
  const k = token()
  t.match(await live.authenticator.lookUp(k), {
    kind: 'api_key',
    id: 'key-3',
    tenantId: TENANT,
    plan: 'pro',
    userId: 'user-1',
    role: null,
  })
  t.same([...live.authenticator.fromMemory(k)!.permissions], ['export', 'projects:read'], 'cached with its permissions')
  const admin = await keys(t, { row: found({ tenant_id: null, plan: null, tenant_status: null, permissions: ['*'] }) })
  t.match(
    await admin.authenticator.lookUp(token()),
    { tenantId: null },
    "an operator key belongs to no tenant and needs none that's active",
  )

  for (const [what, row] of [
    ['revoked', found({ revoked_at: new Date() })],
    ['of a suspended tenant', found({ tenant_status: 'suspended' })],
    ['expired', found({ expires_at: new Date(Date.now() - 1) })],
    ['unknown', undefined],
  ] as const) {
    const dead = await keys(t, { row })
    const key = token()
    t.equal(await dead.authenticator.lookUp(key), null, what)
    t.equal(dead.authenticator.fromMemory(key), null, `${what}: refused from memory now`)
  }
})

t.test('a lookup records the last use only when the stored time is a minute old', async (t) => {
  const recent = await keys(t, { row: found({ last_used_at: new Date(Date.now() - 30_000) }) })
  await recent.authenticator.lookUp(tags.sign(`svc_ci_${randomBase62(32)}`))
  const stale = await keys(t, { row: found({ last_used_at: new Date(Date.now() - 61_000) }) })
  await stale.authenticator.lookUp(tags.sign(`svc_ci_${randomBase62(32)}`))
  const never = await keys(t, { row: found({ last_used_at: null }) })
  await never.authenticator.lookUp(tags.sign(`svc_ci_${randomBase62(32)}`))
  t.same([recent.log, stale.log, never.log], [[['look up']], [['look up'], ['touch']], [['look up'], ['touch']]])
})
