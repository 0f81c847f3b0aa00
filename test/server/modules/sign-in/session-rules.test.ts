// The rules of sign-in/service.ts on their own: password sign-in through the throttle, who learns what,
// and session tokens (made here or not, rotated, copied, dead). What the service reads and writes is
// replaced by rows in memory and a recording throttle: no database. routes.test.ts checks the same
// through the API on a real one.
import t, { type Test } from 'tap'
import { CredentialCache } from '../../../../server/domain/credentials.js'
import { randomBase62 } from '../../../../common/ids.js'
import type * as Service from '../../../../server/modules/sign-in/service.js'
import type { AccountRow, SessionRow } from '../../../../server/modules/sign-in/store.js'
import type { Attempt, LoginThrottle, Standing } from '../../../../server/modules/sign-in/throttle.js'
import { hashPassword } from '../../../../server/modules/users/passwords.js'
import { credentialTags } from '../../../../server/platform/credential-tags.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'

const PASSWORD = 'correct horse battery'
const hash = await hashPassword(PASSWORD)
const otherHash = await hashPassword('another password entirely')
const secrets = { deriveKey: (purpose: string) => Buffer.from(purpose.padEnd(32, '.').slice(0, 32)) }
const sessionTags = credentialTags(secrets, 'session')
const newToken = () => sessionTags.sign(`ats_${randomBase62(43)}`)
const origin = { ip: '192.0.2.10', userAgent: 'unit' }
const NOW = Date.parse('2030-01-01T00:00:00Z')

type Candidate = AccountRow & { password_hash: string | null }
const account = (tenant: string, over: Partial<Candidate> = {}): Candidate => ({
  user_id: `user-${tenant}`,
  tenant_id: tenant,
  email: 'owner@example.com',
  name: 'Owner',
  role: 'owner',
  user_status: 'active',
  tenant_name: `Org ${tenant}`,
  plan: 'pro',
  tenant_status: 'active',
  password_hash: hash,
  ...over,
})
type Found = SessionRow & { retired_at: Date | null }
const session = (over: Partial<Found> = {}): Found => ({
  ...account('t1'),
  session_id: 's1',
  expires_at: new Date(NOW + 3600_000),
  revoked_at: null,
  retired_at: null,
  ...over,
})

interface World {
  candidates?: Candidate[]
  found?: Found
  retired?: boolean
  standing?: Standing
}

/** The auth service on rows in memory; `log` is every write and throttle call, in order. */
async function auth(t: Test, world: World = {}) {
  const log: unknown[][] = []
  const lookups: string[] = []
  const { authService } = await replacing<typeof Service>(
    t,
    import.meta.url,
    '../../../../server/modules/sign-in/service.js',
    {
      './store.js': {
        findAccountsByEmail: async (_sql: unknown, email: string) => {
          lookups.push(`accounts of ${email}`)
          return world.candidates ?? []
        },
        findSessionByToken: async () => {
          lookups.push('session by token')
          return world.found
        },
        insertSession: async (_sql: unknown, s: { method: string; userId: string }) =>
          void log.push(['session', s.method, s.userId]),
        insertSessionToken: async () => void log.push(['session token']),
        markLoggedIn: async () => {},
        retireToken: async () => (log.push(['retire']), world.retired ?? true),
        revokeSession: async (_sql: unknown, id: string) => void log.push(['revoke', id]),
      },
      '../audit/service.js': {
        audit: async (_sql: unknown, e: { action: string }) => void log.push(['audit', e.action]),
      },
    },
  )
  const throttle: Omit<LoginThrottle, 'unlock'> = {
    check: async (a: Attempt) => (
      log.push(['check', a.device]),
      world.standing ?? { trusted: a.device !== null, suspect: false }
    ),
    failed: async () => void log.push(['failed']),
    succeeded: async () => void log.push(['succeeded']),
    passwordCheck: async (_a, _s, check) => (log.push(['password check']), check()),
  }
  const credentials = {
    cache: new CredentialCache(),
    invalidate: async (inv: { kind: string; id: string }) => void log.push(['invalidate', inv.kind, inv.id]),
    close: async () => {},
  }
  const tokens = {
    kid: 'k1',
    sign: async (c: { sessionId: string; role: string }) => ({
      accessToken: `access-${c.sessionId}-${c.role}`,
      expiresIn: 900,
    }),
    verify: async () => null,
    jwks: () => ({ keys: [] }),
  }
  const clock = { now: NOW }
  const service = authService({
    db: fakeDb(),
    tokens,
    credentials,
    secrets,
    throttle,
    sessionTtlSeconds: 3600,
    now: () => clock.now,
  })
  return { service, log, lookups, clock }
}

const only = (log: unknown[][], what: string) => log.filter((e) => e[0] === what)

t.test(
  'a wrong password fails the attempt on the throttle and is UNAUTHORIZED; so is an unknown address, after one check against nothing',
  async (t) => {
    const known = await auth(t, { candidates: [account('t1')] })
    await t.rejects(known.service.login({ email: 'owner@example.com', password: 'wrong' }, { origin }), {
      code: 'UNAUTHORIZED',
      message: 'The email or password is not correct',
    })
    t.same(
      known.log.map((e) => e[0]),
      ['check', 'password check', 'failed', 'audit'],
      'failed, and the failure audited; nothing cleared',
    )
    t.same(only(known.log, 'audit'), [['audit', 'auth.login_failed']])

    const unknown = await auth(t, { candidates: [] })
    await t.rejects(unknown.service.login({ email: 'nobody@example.com', password: PASSWORD }, { origin }), {
      code: 'UNAUTHORIZED',
      message: 'The email or password is not correct',
    })
    t.same(
      unknown.log.map((e) => e[0]),
      ['check', 'password check', 'failed'],
      'the same steps, with nobody to audit',
    )
  },
)

t.test(
  'the right password clears the pair and starts a password session; a new browser gets a device cookie, a trusted one keeps its own',
  async (t) => {
    const { service, log } = await auth(t, { candidates: [account('t1')] })
    const first = await service.login({ email: 'owner@example.com', password: PASSWORD }, { origin })
    t.match(first, {
      user: { id: 'user-t1', role: 'owner' },
      tenant: { id: 't1', plan: 'pro' },
      session: { token: /^ats_[A-Za-z0-9]{51}$/, expiresAt: new Date(NOW + 3600_000) },
    })
    t.ok(sessionTags.verify(first.session.token), 'the session token carries the tag of this deployment')
    t.same(
      log.map((e) => e[0]),
      ['check', 'password check', 'succeeded', 'session', 'session token', 'audit'],
    )
    t.same(only(log, 'check'), [['check', null]], 'no device cookie: not a trusted device')
    t.match(first.deviceCookie, /^atd_/)

    const again = await service.login(
      { email: 'owner@example.com', password: PASSWORD },
      { origin, deviceCookie: first.deviceCookie },
    )
    t.match(only(log, 'check')[1], ['check', /^[A-Za-z0-9]{22}$/], 'the cookie is read as a device the account trusts')
    t.equal(again.deviceCookie, first.deviceCookie, 'and kept')
    // Its last character changed (to another one: one in 62 cookies already ends in '0').
    const altered = first.deviceCookie.slice(0, -1) + (first.deviceCookie.endsWith('0') ? '1' : '0')
    await service.login({ email: 'owner@example.com', password: PASSWORD }, { origin, deviceCookie: altered })
    t.same(only(log, 'check')[2], ['check', null], 'an altered cookie is no device')
  },
)

t.test(
  'only someone who knows the password learns that the account is disabled or its organization suspended',
  async (t) => {
    for (const [what, over, reason] of [
      ['disabled account', { user_status: 'disabled' }, 'account_disabled'],
      ['suspended organization', { tenant_status: 'suspended' }, 'tenant_suspended'],
    ] as const) {
      const { service, log } = await auth(t, { candidates: [account('t1', over)] })
      await t.rejects(
        service.login({ email: 'owner@example.com', password: 'wrong' }, { origin }),
        { code: 'UNAUTHORIZED' },
        `${what}, wrong password: the usual 401`,
      )
      await t.rejects(
        service.login({ email: 'owner@example.com', password: PASSWORD }, { origin }),
        { code: 'FORBIDDEN', details: { reason } },
        `${what}, right password: 403`,
      )
      t.same(only(log, 'session'), [], `${what}: no session`)
    }
  },
)

t.test(
  'a password that opens accounts in several organizations needs tenantId, and only then names them; one place in the gate for all',
  async (t) => {
    const { service, log } = await auth(t, {
      candidates: [account('t1'), account('t2'), account('t3', { password_hash: otherHash })],
    })
    await t.rejects(service.login({ email: 'owner@example.com', password: PASSWORD }, { origin }), {
      code: 'VALIDATION_ERROR',
      details: {
        reason: 'tenant_required',
        tenants: [
          { id: 't1', name: 'Org t1' },
          { id: 't2', name: 'Org t2' },
        ],
        errors: [{ field: 'body.tenantId' }],
      },
    })
    t.same(only(log, 'password check').length, 1, 'three accounts, one place in the gate')
    t.same(only(log, 'session'), [])

    const one = await auth(t, { candidates: [account('t1', { password_hash: otherHash }), account('t2')] })
    t.match(
      await one.service.login({ email: 'owner@example.com', password: PASSWORD }, { origin }),
      { tenant: { id: 't2' } },
      'the one account the password opens',
    )
    const mixed = await auth(t, { candidates: [account('t1'), account('t2', { user_status: 'disabled' })] })
    t.match(
      await mixed.service.login({ email: 'owner@example.com', password: PASSWORD }, { origin }),
      { tenant: { id: 't1' } },
      'a disabled one is no choice to make',
    )
  },
)

t.test('a session token not issued here is refused without a lookup', async (t) => {
  const { service, lookups } = await auth(t, { found: session() })
  const real = newToken()
  for (const token of [
    '',
    'ats_short',
    `ats_${randomBase62(51)}`,
    real.slice(0, -1) + (real.endsWith('A') ? 'B' : 'A'),
    credentialTags({ deriveKey: () => Buffer.alloc(32, 9) }, 'session').sign(`ats_${randomBase62(43)}`),
  ]) {
    await t.rejects(service.exchange(token, origin), { code: 'UNAUTHORIZED' }, token.slice(0, 12) || '(empty)')
  }
  t.same(lookups, [])
  t.match(
    await service.exchange(real, origin),
    { accessToken: 'access-s1-owner', expiresIn: 900 },
    'a token made here is looked up',
  )
  t.match(
    await service.exchange(`ats_${randomBase62(43)}`, origin),
    { accessToken: 'access-s1-owner' },
    'so is one of the format before tags',
  )
  t.same(lookups, ['session by token', 'session by token'])
})

t.test(
  `a token retired less than 30 s ago lost a refresh race: refused as rotated, and the session lives on`,
  async (t) => {
    const { service, log, clock } = await auth(t, { found: session({ retired_at: new Date(NOW) }) })
    clock.now = NOW + 30_000
    await t.rejects(service.refresh(newToken(), origin), { code: 'UNAUTHORIZED', details: { reason: 'token_rotated' } })
    t.same(log, [], 'nothing revoked, nothing audited')
  },
)

t.test(
  'a token retired longer ago was copied: the session ends on every replica, and the reuse is audited',
  async (t) => {
    const { service, log, clock } = await auth(t, { found: session({ retired_at: new Date(NOW) }) })
    clock.now = NOW + 30_001
    await t.rejects(service.exchange(newToken(), origin), {
      code: 'UNAUTHORIZED',
      message: /invalid, expired or revoked/,
    })
    t.same(log, [
      ['revoke', 's1'],
      ['audit', 'auth.session_token_reused'],
      ['invalidate', 'session', 's1'],
    ])
  },
)

t.test('a dead session costs one lookup, then its token is refused from memory', async (t) => {
  for (const [what, found] of [
    ['revoked', session({ revoked_at: new Date(NOW - 1) })],
    ['expired', session({ expires_at: new Date(NOW) })],
    ['user disabled', session({ user_status: 'disabled' })],
    ['organization suspended', session({ tenant_status: 'suspended' })],
    ['unknown', undefined],
  ] as const) {
    const { service, lookups } = await auth(t, { found })
    const token = newToken()
    await t.rejects(service.exchange(token, origin), { code: 'UNAUTHORIZED' }, what)
    await t.rejects(service.exchange(token, origin), { code: 'UNAUTHORIZED' }, `${what}, again`)
    t.same(lookups, ['session by token'], `${what}: looked up once`)
  }
})

t.test('a refresh that loses the retirement to a concurrent one is told the token was rotated', async (t) => {
  const won = await auth(t, { found: session() })
  const next = await won.service.refresh(newToken(), origin)
  t.match(next, { token: /^ats_/, accessToken: 'access-s1-owner', expiresAt: new Date(NOW + 3600_000) })
  t.ok(sessionTags.verify(next.token))
  const lost = await auth(t, { found: session(), retired: false })
  await t.rejects(lost.service.refresh(newToken(), origin), {
    code: 'UNAUTHORIZED',
    details: { reason: 'token_rotated' },
  })
  t.same(only(lost.log, 'session token'), [], 'no new token issued')
})
