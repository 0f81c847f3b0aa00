// The device login's transitions (cli-auth/service.ts) on their own: what start records, what
// complete and token check and in which order, and what a lost race answers. What the service reads
// and writes is replaced by rows in memory: no database. routes.test.ts checks the same through the
// API on a real one; service.test.ts covers the pure helpers.
import t, { type Test } from 'tap'
import type * as Service from '../../../../server/modules/cli-auth/service.js'
import type * as Audit from '../../../../server/modules/audit/service.js'
import type { AuditEvent } from '../../../../server/modules/audit/store.js'
import type { Actor } from '../../../../server/domain/actor.js'
import type { AccountRow } from '../../../../server/modules/sign-in/store.js'
import type { CliLoginRow } from '../../../../server/modules/cli-auth/store.js'
import { credentialTags } from '../../../../server/platform/credential-tags.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'
import { principal } from '../../../helpers/principal.js'

const NOW = Date.parse('2030-01-01T00:00:00Z')
const secrets = { deriveKey: (purpose: string) => Buffer.from(purpose.padEnd(32, '#').slice(0, 32)) }
const tags = credentialTags(secrets, 'cli-login')
const VERIFIER = 'v'.repeat(43)
const origin = { ip: '10.0.0.7', userAgent: 'unit' }
const approver: Actor = {
  tenantId: 't1',
  origin,
  principal: principal({ sessionId: 's0', permissions: new Set(['*']) }),
}

interface World {
  /** What findLogin answers, one row per call (the last one repeats). */
  rows?: (CliLoginRow | undefined)[]
  approved?: boolean
  consumed?: boolean
  account?: AccountRow
}

/** The device login service on rows in memory; `log` is every write, in order. */
async function cli(t: Test, world: World = {}) {
  const log: unknown[][] = []
  const lookups: string[] = []
  const rows = [...(world.rows ?? [])]
  // The real audit module (audit and auditBy), with only its write replaced.
  const audit = await replacing<typeof Audit>(t, import.meta.url, '../../../../server/modules/audit/service.js', {
    './store.js': { insertAuditEvent: async (_sql: unknown, e: AuditEvent) => void log.push(['audit', e.action]) },
  })
  const mod = await replacing<typeof Service>(t, import.meta.url, '../../../../server/modules/cli-auth/service.js', {
    './store.js': {
      findLogin: async (_sql: unknown, id: string) => (lookups.push(id), rows.length > 1 ? rows.shift() : rows[0]),
      insertLogin: async (_sql: unknown, l: Record<string, unknown>) => void log.push(['insert', l]),
      deleteExpiredLogins: async (_sql: unknown, before: Date, limit: number) => (
        log.push(['clean up', before, limit]),
        0
      ),
      approveLogin: async () => (
        log.push(['approve']),
        world.approved === false ? undefined : login({ status: 'approved' })
      ),
      consumeLogin: async () => (
        log.push(['consume']),
        world.consumed === false ? undefined : login({ status: 'consumed', tenant_id: 't1', user_id: 'u1' })
      ),
    },
    '../sign-in/accounts.js': { findAccount: async () => world.account },
    '../audit/service.js': audit,
  })
  const auth = {
    startSession: async (_sql: unknown, s: { method: string; userId: string }) => (
      log.push(['session', s.method, s.userId]),
      { sessionId: 's1', token: 'ats_refresh', expiresAt: new Date(NOW + 3600_000) }
    ),
  }
  const tokens = {
    kid: 'k',
    sign: async () => ({ accessToken: 'eyJ.access.token', expiresIn: 900 }),
    verify: async () => null,
    jwks: () => ({ keys: [] }),
  }
  const service = mod.cliAuthService({
    db: fakeDb(),
    secrets,
    auth: auth as unknown as Service.CliAuthServiceOptions['auth'],
    tokens,
    publicUrl: 'https://atrium.example.com/ai',
    now: () => NOW,
  })
  return { ...mod, service, log, lookups }
}

const LOGIN_ID = tags.sign('A'.repeat(35))
function login(over: Partial<CliLoginRow> = {}): CliLoginRow {
  return {
    login_id: LOGIN_ID,
    state: 's'.repeat(64),
    code_challenge: '',
    cli_version: '1.0.0',
    platform: 'linux-x64',
    verification_code: 'BCDF-GHJK',
    status: 'pending',
    requester_ip: '10.0.0.9',
    created_at: new Date(NOW - 60_000),
    expires_at: new Date(NOW + 540_000),
    tenant_id: null,
    user_id: null,
    ...over,
  }
}
const account = (over: Partial<AccountRow> = {}): AccountRow => ({
  user_id: 'u1',
  tenant_id: 't1',
  email: 'u1@example.com',
  name: 'U',
  role: 'member',
  user_status: 'active',
  tenant_name: 'Org',
  plan: 'pro',
  tenant_status: 'active',
  ...over,
})
const wrongStatus = (status: string) => ({
  code: 'VALIDATION_ERROR',
  details: { status, errors: [{ field: 'body.loginId', message: `login is ${status}` }] },
})

t.test(
  'start cleans up logins a day past expiry, a batch at a time, and records one valid for 10 minutes',
  async (t) => {
    const { service, log } = await cli(t)
    const started = await service.start(
      { state: 'x'.repeat(64), codeChallenge: 'c', cliVersion: '1.2.3', platform: 'darwin-arm64' },
      '10.0.0.5',
    )
    t.same(log[0], ['clean up', new Date(NOW - 24 * 3600_000), 100])
    t.match(log[1], [
      'insert',
      {
        loginId: started.loginId,
        state: 'x'.repeat(64),
        requesterIp: '10.0.0.5',
        createdAt: new Date(NOW),
        expiresAt: new Date(NOW + 600_000),
      },
    ])
    t.ok(tags.verify(started.loginId), 'the loginId carries the tag of this deployment')
    t.equal(
      started.authUrl,
      `https://atrium.example.com/ai/cli/auth/approve?loginId=${started.loginId}&state=${'x'.repeat(64)}`,
      'under PUBLIC_URL, its path kept',
    )
    t.match(started, { expiresAt: new Date(NOW + 600_000), interval: 5, verificationCode: /^[A-Z]{4}-[A-Z]{4}$/ })
  },
)

t.test('a loginId not made here is RESOURCE_NOT_FOUND without a lookup, in every step', async (t) => {
  const { service, lookups } = await cli(t, { rows: [login()] })
  const madeUp = credentialTags({ deriveKey: () => Buffer.alloc(32, 8) }, 'cli-login').sign('A'.repeat(35))
  await t.rejects(service.status(madeUp), { code: 'RESOURCE_NOT_FOUND' })
  await t.rejects(service.info(madeUp), { code: 'RESOURCE_NOT_FOUND' })
  await t.rejects(service.complete(approver, madeUp, 's'.repeat(64)), { code: 'RESOURCE_NOT_FOUND' })
  await t.rejects(service.token(madeUp, VERIFIER, origin), { code: 'RESOURCE_NOT_FOUND' })
  t.same(lookups, [])
})

t.test('complete checks the state before the status, and a lost race names the status the winner left', async (t) => {
  const expired = await cli(t, { rows: [login({ expires_at: new Date(NOW) })] })
  await t.rejects(
    expired.service.complete(approver, LOGIN_ID, 'wrong'),
    { code: 'FORBIDDEN', details: { reason: 'state_mismatch' } },
    'a wrong state learns nothing of the status',
  )
  await t.rejects(expired.service.complete(approver, LOGIN_ID, 's'.repeat(64)), wrongStatus('expired'))
  t.same(expired.log, [])
  const lost = await cli(t, { rows: [login(), login({ status: 'approved' })], approved: false })
  await t.rejects(lost.service.complete(approver, LOGIN_ID, 's'.repeat(64)), wrongStatus('approved'))
  t.same(lost.log, [['approve']], 'nothing audited for the loser')
  const won = await cli(t, { rows: [login()] })
  t.same(await won.service.complete(approver, LOGIN_ID, 's'.repeat(64)), {
    status: 'approved',
    approvedAt: new Date(NOW),
  })
  t.same(won.log, [['approve'], ['audit', 'cli_login.approved']])
})

t.test(
  'token checks the verifier before the status; only an approved login is redeemed, once, by an account that can still sign in',
  async (t) => {
    const { pkceChallenge } = await cli(t)
    const challenge = pkceChallenge(VERIFIER)
    const pending = await cli(t, { rows: [login({ code_challenge: challenge })] })
    await t.rejects(
      pending.service.token(LOGIN_ID, 'w'.repeat(43), origin),
      { code: 'UNAUTHORIZED' },
      'a wrong verifier learns nothing of the status',
    )
    await t.rejects(pending.service.token(LOGIN_ID, VERIFIER, origin), wrongStatus('pending'))

    const raced = await cli(t, {
      rows: [login({ code_challenge: challenge, status: 'approved' }), login({ status: 'consumed' })],
      consumed: false,
    })
    await t.rejects(
      raced.service.token(LOGIN_ID, VERIFIER, origin),
      wrongStatus('consumed'),
      'the loser of two token calls',
    )
    t.same(raced.log, [['consume']])

    for (const [what, found] of [
      ['disabled', account({ user_status: 'disabled' })],
      ['moved to another tenant', account({ tenant_id: 't2' })],
      ['suspended', account({ tenant_status: 'suspended' })],
      ['gone', undefined],
    ] as const) {
      const c = await cli(t, { rows: [login({ code_challenge: challenge, status: 'approved' })], account: found })
      await t.rejects(
        c.service.token(LOGIN_ID, VERIFIER, origin),
        { code: 'FORBIDDEN', details: { reason: 'account_disabled' } },
        what,
      )
      t.same(c.log, [['consume']], `${what}: no session (the consumption rolls back with the error)`)
    }

    const ok = await cli(t, { rows: [login({ code_challenge: challenge, status: 'approved' })], account: account() })
    t.match(await ok.service.token(LOGIN_ID, VERIFIER, origin), {
      token: 'eyJ.access.token',
      expiresIn: 900,
      refreshToken: 'ats_refresh',
      user: { id: 'u1', role: 'member' },
      tenant: { id: 't1' },
    })
    t.same(ok.log, [['consume'], ['session', 'cli', 'u1'], ['audit', 'auth.login']])
  },
)
