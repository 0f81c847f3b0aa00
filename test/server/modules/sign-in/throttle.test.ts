// Password sign-in throttling (throttle.ts): attackers are slowed, owners are not locked out, and
// password checks stay bounded. Each address of a test is its own client (remoteAddress).
import t, { type Test } from 'tap'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { services, suffix } from '../../../helpers/platform.js'
import type { LoginLimits } from '../../../../server/modules/sign-in/throttle.js'
import { SUSPECT_FAILURES, workGate } from '../../../../server/modules/sign-in/throttle.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'

const PASSWORD = 'correct horse battery'

async function setUp(t: Test, limits: Partial<LoginLimits> = {}, rateLimitPrefix = `atrium:test:${suffix()}`) {
  const ta = await testApp(t, {}, { loginLimits: limits, rateLimitPrefix })
  const email = `owner-${suffix()}@example.com`
  await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan: 'pro', email, password: PASSWORD })
  return { ta, email, login: loginAs(ta) }
}

/** One password check at a time, and failure limits out of reach: only the gate in front of the checks refuses. */
const GATE_ONLY: Partial<LoginLimits> = { passwordChecks: 1, failuresPerIp: 1000, pairFreeFailures: 1000 }

interface Attempt {
  email: string
  password: string
  ip: string
  device?: string
  tenant?: string
}

function loginAs(ta: TestApp) {
  return async (a: Attempt) => {
    const r = await ta.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      remoteAddress: a.ip,
      payload: { email: a.email, password: a.password, ...(a.tenant ? { tenantId: a.tenant } : {}) },
      headers: a.device ? { cookie: `atrium_device=${a.device}` } : {},
    })
    const device = /atrium_device=([^;]+)/.exec(String(r.headers['set-cookie'] ?? ''))?.[1]
    return { status: r.statusCode, body: r.json(), headers: r.headers, device }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test(
  'consecutive failures of one account from one address make that pair wait, for made-up addresses alike; a success clears them',
  async (t) => {
    const { email, login } = await setUp(t, { pairFreeFailures: 3, pairFirstWaitSeconds: 1 })
    for (const who of [email, `ghost-${suffix()}@example.com`]) {
      for (let i = 0; i < 3; i++)
        t.equal((await login({ email: who, password: `wrong ${i}`, ip: '10.1.0.1' })).body.error.code, 'UNAUTHORIZED')
      const waiting = await login({ email: who, password: PASSWORD, ip: '10.1.0.1' })
      t.equal(waiting.status, 429, 'even the right password waits')
      t.match(waiting.body.error, { code: 'RATE_LIMIT_EXCEEDED', details: { reason: 'sign_in_throttled' } })
      t.equal(waiting.headers['retry-after'], '1')
    }
    await sleep(1100)
    t.equal(
      (await login({ email, password: PASSWORD, ip: '10.1.0.1' })).status,
      200,
      'the wait ends, and the right password works',
    )
    t.equal(
      (await login({ email, password: 'wrong again', ip: '10.1.0.1' })).body.error.code,
      'UNAUTHORIZED',
      'the success cleared the count',
    )
  },
)

t.test('an attacker failing from one address does not lock the owner out from another', async (t) => {
  const { email, login } = await setUp(t)
  for (let i = 0; i < 20; i++) await login({ email, password: `guess ${i}`, ip: '10.2.0.66' })
  t.equal((await login({ email, password: PASSWORD, ip: '10.2.0.66' })).status, 429, 'the attacker waits')
  t.equal((await login({ email, password: PASSWORD, ip: '10.2.0.7' })).status, 200, 'the owner, elsewhere, signs in')
})

t.test('an address failing for many accounts waits, except a device the account trusts', async (t) => {
  const { email, login } = await setUp(t, { failuresPerIp: 5 })
  const trusted = (await login({ email, password: PASSWORD, ip: '10.3.0.1' })).device
  t.ok(trusted, 'a successful sign-in marks the browser as trusted')
  // One address for everyone: a NAT, or a proxy that TRUSTED_PROXIES does not name.
  for (let i = 0; i < 5; i++)
    await login({ email: `spray-${i}-${suffix()}@example.com`, password: 'Summer2026!', ip: '10.3.0.1' })
  const refused = await login({ email, password: PASSWORD, ip: '10.3.0.1' })
  t.equal(refused.status, 429, 'without the device cookie, the address waits')
  t.equal(
    (await login({ email, password: PASSWORD, ip: '10.3.0.1', device: trusted })).status,
    200,
    'the trusted device signs in',
  )
})

t.test("guessing spread over many addresses: past the account's limit only its trusted devices get in", async (t) => {
  const { email, login } = await setUp(t, { failuresPerAccount: 6 })
  const trusted = (await login({ email, password: PASSWORD, ip: '10.4.0.1' })).device!
  for (let i = 0; i < 6; i++) await login({ email, password: `guess ${i}`, ip: `10.4.1.${i}` })
  t.equal((await login({ email, password: PASSWORD, ip: '10.4.2.1' })).status, 429, 'a new device waits')
  const other = await setUp(t)
  const othersDevice = (await other.login({ email: other.email, password: PASSWORD, ip: '10.4.0.2' })).device!
  const forged = trusted.slice(0, -1) + (trusted.endsWith('A') ? 'B' : 'A')
  for (const [name, device] of [
    ['a device of another account', othersDevice],
    ['a forged cookie', forged],
  ] as const) {
    t.equal((await login({ email, password: PASSWORD, ip: '10.4.2.1', device })).status, 429, name)
  }
  const ok = await login({ email, password: PASSWORD, ip: '10.4.2.2', device: trusted })
  t.equal(ok.status, 200, 'the trusted device signs in')
  t.equal(ok.device, trusted, 'and keeps its cookie')
})

t.test('an IPv6 client counts by its /64: a new address per guess does not escape the limit', async (t) => {
  const { email, login } = await setUp(t, { failuresPerIp: 5 })
  for (let i = 1; i <= 5; i++)
    await login({ email: `spray-${i}@example.com`, password: 'x', ip: `2001:db8:7:1::${i.toString(16)}` })
  t.equal((await login({ email, password: PASSWORD, ip: '2001:db8:7:1::ff' })).status, 429, 'the same /64')
  t.equal((await login({ email, password: PASSWORD, ip: '2001:db8:7:2::1' })).status, 200, 'another /64')
})

t.test('a trusted device that keeps failing is trusted no more', async (t) => {
  const { email, login } = await setUp(t, { failuresPerDevice: 3, failuresPerAccount: 3 })
  const trusted = (await login({ email, password: PASSWORD, ip: '10.5.0.1' })).device!
  for (let i = 0; i < 3; i++) await login({ email, password: `guess ${i}`, ip: `10.5.1.${i}`, device: trusted })
  t.equal((await login({ email, password: PASSWORD, ip: '10.5.2.1', device: trusted })).status, 429)
})

t.test('password checks run a few at a time per replica; past the queue, 503 and never a 500', async (t) => {
  const { email, login } = await setUp(t, { ...GATE_ONLY, passwordQueue: 2, passwordChecksPerIp: 1000 })
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => login({ email, password: `flood ${i}`, ip: `10.6.0.${i}` })),
  )
  const statuses = results.map((r) => r.status)
  t.ok(
    statuses.every((s) => s === 401 || s === 503),
    `401 or 503 only: ${statuses}`,
  )
  const busy = results.filter((r) => r.status === 503)
  t.ok(busy.length > 0, 'the queue overflowed')
  t.ok(busy.every((r) => r.body.error.details.reason === 'sign_in_busy' && r.headers['retry-after'] === '1'))
})

t.test('an address that has been failing holds two places of the gate: another client still gets in', async (t) => {
  const { email, login } = await setUp(t, { ...GATE_ONLY, passwordQueue: 4 })
  for (let i = 0; i < SUSPECT_FAILURES; i++)
    await login({ email: `spray-${i}@example.com`, password: 'Summer2026!', ip: '10.6.1.66' })
  const flood = Array.from({ length: 12 }, (_, i) =>
    login({ email: `spray-${i}@example.com`, password: 'Summer2026!', ip: '10.6.1.66' }),
  )
  const user = await login({ email, password: PASSWORD, ip: '10.6.1.7' })
  const statuses = (await Promise.all(flood)).map((r) => r.status)
  t.equal(user.status, 200, 'the user signs in: the queue had room')
  t.ok(statuses.filter((s) => s === 429).length >= 10, `the flood beyond two at once is refused: ${statuses}`)
  t.notOk(statuses.includes(503), 'the flood never filled the queue')
})

t.test('clients sharing an address that has not been failing (an office) wait their turn, none refused', async (t) => {
  const { email, login } = await setUp(t, { passwordChecks: 1, passwordQueue: 8 })
  const results = await Promise.all(
    Array.from({ length: 6 }, () => login({ email, password: PASSWORD, ip: '10.6.2.1' })),
  )
  t.same(
    results.map((r) => r.status),
    [200, 200, 200, 200, 200, 200],
  )
})

t.test('an address with accounts in many organizations is checked in one place of the gate', async (t) => {
  const { ta, email, login } = await setUp(t, { passwordChecks: 1, passwordQueue: 1 })
  const tenants = [
    (
      await ta.platform.db.system(
        (sql) => sql<{ tenant_id: string }[]>`select tenant_id from users where email = ${email}`,
      )
    )[0]!.tenant_id,
  ]
  for (let i = 0; i < 3; i++)
    tenants.push((await createTenant(ta.platform, { name: `Also ${i}`, email, password: PASSWORD })).tenantId)
  const ambiguous = await login({ email, password: PASSWORD, ip: '10.6.3.1' })
  t.equal(ambiguous.status, 400, 'all four accounts are checked: the password opens them all')
  t.same(ambiguous.body.error.details.tenants.map((x: { id: string }) => x.id).sort(), [...tenants].sort())
  t.equal((await login({ email, password: 'wrong', ip: '10.6.3.2' })).status, 401, 'a wrong password is a plain 401')
  t.equal((await login({ email, password: PASSWORD, ip: '10.6.3.3', tenant: tenants[2] })).status, 200)
})

t.test('the gate runs trusted work first, at most N at once', async (t) => {
  const run = workGate(1, 10)
  const order: string[] = []
  let release!: () => void
  const blocker = run(null, false, () => new Promise<void>((r) => (release = r)))
  const tasks = [
    run(null, false, async () => order.push('normal 1')),
    run(null, true, async () => order.push('trusted')),
    run(null, false, async () => order.push('normal 2')),
  ]
  await sleep(10)
  t.same(order, [], 'nothing runs while the one slot is taken')
  release()
  await Promise.all([blocker, ...tasks])
  t.same(order, ['trusted', 'normal 1', 'normal 2'])
})

t.test(
  'what the throttle keeps expires with its windows',
  { skip: services.redisUrl ? false : 'needs Redis (TEST_REDIS_URL)' },
  async (t) => {
    const prefix = `atrium:test:${suffix()}`
    const { ta, login } = await setUp(t, {}, prefix)
    await login({ email: `ghost-${suffix()}@example.com`, password: 'x', ip: '10.7.0.1' })
    const redis = ta.platform.cache.redis!
    const keys = await redis.keys(`${prefix}:login:*`)
    t.ok(keys.length >= 3, 'per address, per account, per pair')
    for (const key of keys) t.ok((await redis.pttl(key)) > 0, `${key} expires`)
    t.notOk(
      keys.some((k) => k.includes('@')),
      'no address in clear text',
    )
  },
)
