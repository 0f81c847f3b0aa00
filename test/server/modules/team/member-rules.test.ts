// The team rules of team/service.ts on their own: who may act on which role, nobody changes
// themselves (except an owner stepping down), the last active owner stays, and what a change
// revokes. What the service reads and writes is replaced (its direct imports: t.mockImport does not
// reach through a module it did not mock) by a list of members in memory: no database.
// routes.test.ts checks the same rules through the API on a real one.
import t, { type Test } from 'tap'
import { ROLE_PERMISSIONS } from '../../../../server/domain/permissions.js'
import type * as Service from '../../../../server/modules/team/service.js'
import type { MemberRow } from '../../../../server/modules/users/store.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'

type Role = MemberRow['role']
type Principal = Parameters<typeof Service.mayHandle>[0]

const TENANT = '01900000-0000-7000-8000-0000000000aa'
const ROLES: Role[] = ['owner', 'admin', 'member', 'viewer']
const origin = { ip: '10.0.0.1', userAgent: 'unit' }

const user = (id: string, role: Role): Principal => ({
  kind: 'user',
  id,
  tenantId: TENANT,
  plan: 'pro',
  userId: id,
  role,
  sessionId: `session-${id}`,
  permissions: new Set(ROLE_PERMISSIONS[role]),
})
const key = (permissions: string[], userId: string | null = null): Principal => ({
  kind: 'api_key',
  id: 'key-1',
  tenantId: TENANT,
  plan: 'pro',
  userId,
  role: null,
  sessionId: null,
  permissions: new Set(permissions),
})
const member = (id: string, role: Role, status: MemberRow['status'] = 'active'): MemberRow => ({
  id,
  email: `${id}@example.com`,
  name: id,
  role,
  status,
  created_at: new Date(0),
  last_login_at: null,
})

/** The team service on members kept in memory; `log` is every write, in order. */
async function team(t: Test, members: MemberRow[]) {
  const log: unknown[][] = []
  const { teamService, mayHandle } = await replacing<typeof Service>(
    t,
    import.meta.url,
    '../../../../server/modules/team/service.js',
    {
      '../users/service.js': {
        // The member and every active owner, as the real one locks them.
        lockMemberAndOwners: async (_sql: unknown, _tenant: string, id: string) =>
          members.filter((m) => m.id === id || (m.role === 'owner' && m.status === 'active')),
        updateMember: async (
          _sql: unknown,
          _tenant: string,
          id: string,
          f: { role: Role; status: MemberRow['status'] },
        ) => {
          log.push(['update', id, f.role, f.status])
          return { ...members.find((m) => m.id === id)!, ...f }
        },
        deleteMember: async (_sql: unknown, _tenant: string, id: string) => {
          log.push(['delete', id])
          return true
        },
      },
      './store.js': {
        revokeUserKeys: async (_sql: unknown, _tenant: string, id: string, _at: Date, unless?: readonly string[]) => {
          log.push(['revoke keys', id, unless ?? 'all'])
          return ['key-of-' + id]
        },
      },
      '../sign-in/accounts.js': {
        revokeUserSessions: async (_sql: unknown, id: string) => {
          log.push(['end sessions', id])
          return ['session-of-' + id]
        },
      },
      '../audit/service.js': {
        audit: async (_sql: unknown, e: { action: string; details: Record<string, unknown> }) =>
          void log.push(['audit', e.action, e.details]),
        auditBy: async (_sql: unknown, _actor: unknown, e: { action: string; details: Record<string, unknown> }) =>
          void log.push(['audit', e.action, e.details]),
      },
    },
  )
  const db = fakeDb()
  const service = teamService({
    db,
    secrets: { deriveKey: () => Buffer.alloc(32, 1) },
    auth: {
      startSession: async () => {
        throw new Error('no session in these tests')
      },
    },
    credentials: { invalidate: async (inv) => void log.push(['invalidate', inv.kind, inv.id]) },
    publicUrl: 'https://atrium.example.com',
  })
  const as = (principal: Principal) => ({ tenantId: TENANT, principal, origin })
  return { service, log, db, as, mayHandle }
}

const refused = (code: 'FORBIDDEN' | 'VALIDATION_ERROR', reason: string, more: Record<string, unknown> = {}) => ({
  code,
  details: { reason, ...more },
})

t.test(
  'authority over a role: owners over every role, others over the roles whose permissions they hold in full',
  async (t) => {
    const { mayHandle } = await team(t, [])
    const over = (p: Principal) => ROLES.filter((r) => mayHandle(p, r))
    t.same(over(user('o', 'owner')), ['owner', 'admin', 'member', 'viewer'])
    t.same(over(user('a', 'admin')), ['admin', 'member', 'viewer'], 'an admin holds every permission but is no owner')
    t.same(over(key(['*'])), ['admin', 'member', 'viewer'], "a '*' key is like an admin, never like an owner")
    t.same(over(user('m', 'member')), ['member', 'viewer'])
    t.same(over(user('v', 'viewer')), ['viewer'])
    t.same(over(key(['team:manage', ...ROLE_PERMISSIONS.viewer])), ['viewer'], 'a narrow key over the roles it covers')
    t.same(over(key(['team:manage'])), [], 'team:manage alone covers no role')
  },
)

t.test('a change the principal has no authority for is FORBIDDEN and writes nothing', async (t) => {
  const { service, log, as } = await team(t, [member('o1', 'owner'), member('a1', 'admin'), member('m1', 'member')])
  await t.rejects(
    service.update(as(user('a1', 'admin')), 'm1', { role: 'owner' }),
    refused('FORBIDDEN', 'owner_only', { role: 'owner' }),
    'an admin cannot make an owner',
  )
  await t.rejects(
    service.update(as(user('a1', 'admin')), 'o1', { status: 'disabled' }),
    refused('FORBIDDEN', 'owner_only'),
    'nor act on one',
  )
  await t.rejects(service.remove(as(key(['*'])), 'o1'), refused('FORBIDDEN', 'owner_only'), "nor can a '*' key")
  await t.rejects(
    service.update(as(key(['team:manage', ...ROLE_PERMISSIONS.viewer])), 'm1', { role: 'viewer' }),
    refused('FORBIDDEN', 'role_not_covered', { role: 'member' }),
    'a narrow key cannot demote a member it does not cover',
  )
  t.same(log, [])
})

t.test(
  'nobody changes their own role or status, except an owner stepping down while another owner remains',
  async (t) => {
    const { service, log, as } = await team(t, [member('o1', 'owner'), member('o2', 'owner'), member('a1', 'admin')])
    await t.rejects(
      service.update(as(user('a1', 'admin')), 'a1', { role: 'member' }),
      refused('FORBIDDEN', 'self'),
      'own role',
    )
    await t.rejects(
      service.update(as(user('o1', 'owner')), 'o1', { status: 'disabled' }),
      refused('FORBIDDEN', 'self'),
      'own status, even an owner',
    )
    await t.rejects(service.remove(as(user('a1', 'admin')), 'a1'), refused('FORBIDDEN', 'self'), 'own membership')
    t.same(log, [], 'nothing written')
    t.match(
      await service.update(as(user('o1', 'owner')), 'o1', { role: 'admin' }),
      { id: 'o1', role: 'admin' },
      'an owner steps down',
    )
  },
)

t.test('the last active owner cannot be demoted or removed, even by themselves', async (t) => {
  const { service, log, as } = await team(t, [member('o1', 'owner'), member('o2', 'owner', 'disabled')])
  await t.rejects(service.update(as(user('o1', 'owner')), 'o1', { role: 'admin' }), {
    ...refused('VALIDATION_ERROR', 'last_owner'),
    details: { errors: [{ field: 'role' }] },
  })
  await t.rejects(service.remove(as(user('o1', 'owner')), 'o1'), {
    ...refused('VALIDATION_ERROR', 'last_owner'),
    details: { errors: [{ field: 'userId' }] },
  })
  t.same(log, [], 'a disabled owner does not count')
})

t.test("an invited member's status cannot change; their role can", async (t) => {
  const { service, log, as } = await team(t, [member('o1', 'owner'), member('i1', 'member', 'invited')])
  await t.rejects(
    service.update(as(user('o1', 'owner')), 'i1', { status: 'disabled' }),
    refused('VALIDATION_ERROR', 'invited'),
  )
  t.same(log, [])
  t.match(await service.update(as(user('o1', 'owner')), 'i1', { role: 'viewer' }), {
    role: 'viewer',
    status: 'invited',
  })
})

t.test('a change to nothing new writes nothing and invalidates nothing', async (t) => {
  const { service, log, as } = await team(t, [member('o1', 'owner'), member('m1', 'member')])
  t.match(await service.update(as(user('o1', 'owner')), 'm1', { role: 'member', status: 'active' }), {
    id: 'm1',
    role: 'member',
  })
  t.same(log, [])
})

t.test(
  'a demotion ends the sessions and revokes the keys holding more than the new role, then drops cached credentials',
  async (t) => {
    const { service, log, as } = await team(t, [member('o1', 'owner'), member('a1', 'admin')])
    await service.update(as(user('o1', 'owner')), 'a1', { role: 'viewer' })
    t.same(log, [
      ['update', 'a1', 'viewer', 'active'],
      ['end sessions', 'a1'],
      ['revoke keys', 'a1', ROLE_PERMISSIONS.viewer],
      [
        'audit',
        'team.member_role_changed',
        { email: 'a1@example.com', from: 'admin', to: 'viewer', sessionsRevoked: 1, apiKeysRevoked: ['key-of-a1'] },
      ],
      ['invalidate', 'user', 'a1'],
    ])
  },
)

t.test('disabling revokes every key; enabling revokes none', async (t) => {
  const { service, log, as } = await team(t, [
    member('o1', 'owner'),
    member('m1', 'member'),
    member('m2', 'member', 'disabled'),
  ])
  await service.update(as(user('o1', 'owner')), 'm1', { status: 'disabled' })
  await service.update(as(user('o1', 'owner')), 'm2', { status: 'active' })
  t.same(
    log.filter((e) => e[0] === 'revoke keys'),
    [['revoke keys', 'm1', 'all']],
  )
  t.same(
    log.filter((e) => e[0] === 'audit').map((e) => e[1]),
    ['team.member_disabled', 'team.member_enabled'],
  )
  t.same(
    log.filter((e) => e[0] === 'invalidate').map((e) => e[2]),
    ['m1', 'm2'],
  )
})

t.test(
  "a removal revokes the member's keys before deleting them (keys outlive a deleted user), then drops cached credentials",
  async (t) => {
    const { service, log, as } = await team(t, [member('o1', 'owner'), member('o2', 'owner'), member('m1', 'member')])
    await service.remove(as(user('o1', 'owner')), 'm1')
    t.same(
      log.map((e) => e.slice(0, 2)),
      [
        ['revoke keys', 'm1'],
        ['end sessions', 'm1'],
        ['delete', 'm1'],
        ['audit', 'team.member_removed'],
        ['invalidate', 'user'],
      ],
    )
    await service.remove(as(user('o2', 'owner')), 'o2')
    t.same(log.at(-3)!.slice(0, 2), ['delete', 'o2'], 'an owner may leave while another owner remains')
  },
)

t.test('an unknown member is RESOURCE_NOT_FOUND', async (t) => {
  const { service, as } = await team(t, [member('o1', 'owner')])
  await t.rejects(service.update(as(user('o1', 'owner')), 'ghost', { role: 'viewer' }), {
    code: 'RESOURCE_NOT_FOUND',
    details: { resource: 'member', id: 'ghost' },
  })
  await t.rejects(service.remove(as(user('o1', 'owner')), 'ghost'), { code: 'RESOURCE_NOT_FOUND' })
})

t.test(
  'an invitation is refused before any transaction for a bad address or a role the inviter cannot grant',
  async (t) => {
    const { service, db, as } = await team(t, [member('a1', 'admin')])
    await t.rejects(service.invite(as(user('a1', 'admin')), { email: 'not an address', role: 'member' }), {
      code: 'VALIDATION_ERROR',
      details: { errors: [{ field: 'email' }] },
    })
    await t.rejects(
      service.invite(as(user('a1', 'admin')), { email: 'new@example.com', role: 'owner' }),
      refused('FORBIDDEN', 'owner_only'),
    )
    t.same(db.opened, [])
  },
)

t.test('an invitation token not made here is refused from memory', async (t) => {
  const { service, db } = await team(t, [])
  for (const token of ['', 'ati_short', `ati_${'A'.repeat(51)}`, `ats_${'A'.repeat(51)}`]) {
    await t.rejects(
      service.accept({ token, password: 'a long enough password' }, origin),
      { code: 'UNAUTHORIZED' },
      token || '(empty)',
    )
  }
  t.same(db.opened, [], 'no lookup')
})
