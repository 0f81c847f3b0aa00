// The sign-in throttle's rules on their own (throttle.ts): counters kept in memory (platform/counters.ts
// without Redis), no app, no database. throttle.test.ts checks the same rules through the login route.
import { createHash } from 'node:crypto'
import pino from 'pino'
import { Registry } from 'prom-client'
import t from 'tap'
import {
  deviceCookies,
  loginThrottle,
  SUSPECT_FAILURES,
  workGate,
  type Attempt,
  type LoginLimits,
  type Standing,
} from '../../../../server/modules/sign-in/throttle.js'
import { credentialTags } from '../../../../server/platform/credential-tags.js'
import { openCounters } from '../../../../server/platform/counters.js'

let throttles = 0
/** A throttle of its own: counters in memory, under a prefix no other test uses. */
const throttle = (limits: Partial<LoginLimits> = {}) =>
  loginThrottle({
    counters: openCounters({ redis: null, log: pino({ level: 'silent' }), registry: new Registry() }),
    keyPrefix: `unit:${throttles++}`,
    limits,
  })

/** What throttling knows of an account: a hash of the address typed. */
const account = (email: string) => createHash('sha256').update(email).digest('hex')
const attempt = (email: string, ip: string, device: string | null = null): Attempt => ({
  account: account(email),
  ip,
  device,
})
const UNTRUSTED: Standing = { trusted: false, suspect: false }

/** The 429 a waiting attempt gets, with the seconds it has to wait. */
const throttled = (seconds?: number) => ({
  code: 'RATE_LIMIT_EXCEEDED',
  status: 429,
  details: { reason: 'sign_in_throttled', ...(seconds === undefined ? {} : { retryAfterSeconds: seconds }) },
  ...(seconds === undefined ? {} : { headers: { 'retry-after': String(seconds) } }),
})

t.test(
  'a pair waits from its fifth failure in a row: 30 s, doubling with each failure, at most 15 minutes',
  async (t) => {
    const th = throttle()
    const a = attempt('owner@example.com', '10.0.0.1')
    for (let i = 1; i <= 4; i++) {
      await th.failed(a, UNTRUSTED)
      t.same(await th.check(a), { trusted: false, suspect: false }, `failure ${i}: no wait yet`)
    }
    const waits: number[] = []
    for (let i = 5; i <= 11; i++) {
      await th.failed(a, UNTRUSTED) // as when each wait has run out and the next guess fails too
      const refused = await th.check(a).then(
        () => null,
        (err: { details: { retryAfterSeconds: number } }) => err,
      )
      t.match(refused, throttled(), `failure ${i}: the pair waits`)
      waits.push(refused!.details.retryAfterSeconds)
    }
    t.same(waits, [30, 60, 120, 240, 480, 900, 900])
  },
)

t.test('a success clears the pair: its wait ends and its count starts again', async (t) => {
  const th = throttle({ pairFreeFailures: 2 })
  const a = attempt('owner@example.com', '10.0.0.2')
  await th.failed(a, UNTRUSTED)
  await th.failed(a, UNTRUSTED)
  await t.rejects(th.check(a), throttled(30))
  await th.succeeded(a)
  t.same(await th.check(a), { trusted: false, suspect: false }, 'no wait after the success')
  await th.failed(a, UNTRUSTED)
  t.same(await th.check(a), { trusted: false, suspect: false }, 'one failure after it is the first of a new run')
  await th.failed(a, UNTRUSTED)
  await t.rejects(th.check(a), throttled(30), 'the second is the first wait again, not a doubled one')
})

t.test(
  "a pair's wait is its own: the account from another address, and another account from the address, go on",
  async (t) => {
    const th = throttle({ pairFreeFailures: 1 })
    await th.failed(attempt('owner@example.com', '10.0.0.3'), UNTRUSTED)
    await t.rejects(th.check(attempt('owner@example.com', '10.0.0.3')), throttled(30))
    t.same(
      await th.check(attempt('owner@example.com', '10.0.0.4')),
      { trusted: false, suspect: false },
      'the owner elsewhere',
    )
    t.same(
      await th.check(attempt('colleague@example.com', '10.0.0.3')),
      { trusted: false, suspect: false },
      'a colleague behind the same address',
    )
  },
)

t.test('an address past its failures for any accounts waits, except a device the account trusts', async (t) => {
  const th = throttle({ failuresPerIp: 3, pairFreeFailures: 1000 })
  for (const who of ['a', 'b', 'c']) await th.failed(attempt(`${who}@example.com`, '10.0.1.1'), UNTRUSTED)
  await t.rejects(
    th.check(attempt('d@example.com', '10.0.1.1')),
    throttled(),
    'a fourth account from the address waits',
  )
  t.same(
    await th.check(attempt('d@example.com', '10.0.1.2')),
    { trusted: false, suspect: false },
    'another address does not',
  )
  t.match(
    await th.check(attempt('d@example.com', '10.0.1.1', 'device-1')),
    { trusted: true },
    'a trusted device skips the address limit',
  )
})

t.test("an account failing from many addresses: past its limit only the account's trusted devices try", async (t) => {
  const th = throttle({ failuresPerAccount: 3, pairFreeFailures: 1000 })
  for (const ip of ['10.0.2.1', '10.0.2.2', '10.0.2.3']) await th.failed(attempt('owner@example.com', ip), UNTRUSTED)
  await t.rejects(th.check(attempt('owner@example.com', '10.0.2.4')), throttled(), 'a new address waits')
  t.same(
    await th.check(attempt('other@example.com', '10.0.2.4')),
    { trusted: false, suspect: false },
    'other accounts do not',
  )
  t.match(await th.check(attempt('owner@example.com', '10.0.2.4', 'device-1')), { trusted: true })
})

t.test(
  "unlocking an account that guesses from 22 addresses locked (110 failures) clears its count and every address's wait for it, and nothing of others",
  async (t) => {
    const th = throttle()
    const owner = (ip: string) => attempt('owner@example.com', ip)
    for (let n = 0; n < 22; n++) for (let i = 0; i < 5; i++) await th.failed(owner(`10.0.4.${n}`), UNTRUSTED)
    for (let i = 0; i < 5; i++) await th.failed(attempt('colleague@example.com', '10.0.4.0'), UNTRUSTED)
    await t.rejects(th.check(owner('10.0.5.1')), throttled(), 'the owner, on a device not yet trusted, is locked out')
    await t.rejects(th.check(owner('10.0.4.3')), throttled(), 'a guessing address too')

    t.same(await th.unlock(account('owner@example.com')), { failures: 110, locked: true, addresses: 22, waiting: 22 })
    t.same(
      await th.check(owner('10.0.5.1')),
      { trusted: false, suspect: false },
      'the owner signs in from anywhere again',
    )
    t.same(
      await th.check(owner('10.0.4.3')),
      { trusted: false, suspect: true },
      'a guessing address has no wait for the account, but its own failures still count against it',
    )
    await t.rejects(
      th.check(attempt('colleague@example.com', '10.0.4.0')),
      throttled(30),
      "another account's wait stays",
    )
    t.same(
      await th.unlock(account('owner@example.com')),
      { failures: 0, locked: false, addresses: 0, waiting: 0 },
      'nothing left to clear',
    )
  },
)

t.test("a trusted device's failures count against the device, not the pair, until it is trusted no more", async (t) => {
  const th = throttle({ failuresPerDevice: 2, pairFreeFailures: 1 })
  const a = attempt('owner@example.com', '10.0.3.1', 'device-1')
  const first = await th.check(a)
  t.same(first, { trusted: true, suspect: false })
  await th.failed(a, first)
  const second = await th.check(a)
  t.same(second, { trusted: true, suspect: false }, 'no pair wait, though one untrusted failure would start one')
  await th.failed(a, second)
  t.same(await th.check(a), { trusted: false, suspect: false }, 'two failures: the device is an ordinary client again')
  await th.failed(a, UNTRUSTED)
  await t.rejects(th.check(a), throttled(30), 'and its next failure makes the pair wait')
})

t.test(`an address is suspect from its ${SUSPECT_FAILURES}th failure in the window`, async (t) => {
  const th = throttle({ pairFreeFailures: 1000 })
  for (let i = 0; i < SUSPECT_FAILURES - 1; i++)
    await th.failed(attempt(`spray-${i}@example.com`, '10.0.4.1'), UNTRUSTED)
  t.match(
    await th.check(attempt('owner@example.com', '10.0.4.1')),
    { suspect: false },
    `${SUSPECT_FAILURES - 1} failures`,
  )
  await th.failed(attempt('last@example.com', '10.0.4.1'), UNTRUSTED)
  t.match(await th.check(attempt('owner@example.com', '10.0.4.1')), { suspect: true }, `${SUSPECT_FAILURES} failures`)
  t.match(await th.check(attempt('owner@example.com', '10.0.4.2')), { suspect: false }, 'another address is not')
})

t.test(
  'a suspect address holds at most passwordChecksPerIp places of the gate; trusted devices and clean addresses are not bound',
  async (t) => {
    const th = throttle({ passwordChecks: 10, passwordQueue: 10, passwordChecksPerIp: 2 })
    const a = attempt('owner@example.com', '10.0.5.1')
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    const suspect: Standing = { trusted: false, suspect: true }
    const running = [th.passwordCheck(a, suspect, () => held), th.passwordCheck(a, suspect, () => held)]
    await t.rejects(
      th.passwordCheck(a, suspect, async () => 'third'),
      {
        code: 'RATE_LIMIT_EXCEEDED',
        details: { reason: 'sign_in_busy', retryAfterSeconds: 1 },
        headers: { 'retry-after': '1' },
      },
      'a third at once is refused',
    )
    const others = [
      th.passwordCheck(a, { trusted: true, suspect: true }, async () => 'trusted'),
      th.passwordCheck(a, UNTRUSTED, async () => 'clean'),
    ]
    t.same(await Promise.all(others), ['trusted', 'clean'])
    release()
    await Promise.all(running)
    t.equal(
      await th.passwordCheck(a, suspect, async () => 'again'),
      'again',
      'places are given back when the checks end',
    )
  },
)

t.test('the gate runs at most N at once and queues the rest', async (t) => {
  const run = workGate(2, 10)
  let now = 0
  let most = 0
  const task = async () => {
    most = Math.max(most, ++now)
    await new Promise((r) => setTimeout(r, 5))
    now--
  }
  await Promise.all(Array.from({ length: 7 }, () => run(null, false, task)))
  t.equal(most, 2)
  t.equal(now, 0)
})

t.test('past the queue the gate answers 503; a failing task gives its slot and its place back', async (t) => {
  const run = workGate(1, 1, 1)
  let release!: () => void
  const blocker = run('a', false, () => new Promise<void>((r) => (release = r)))
  await t.rejects(
    run('a', false, async () => 'a again'),
    { code: 'RATE_LIMIT_EXCEEDED', status: 429 },
    'a key holding its one place',
  )
  const queued = run('b', false, async () => 'b')
  await t.rejects(
    run('c', false, async () => 'c'),
    { code: 'SERVICE_UNAVAILABLE', status: 503, details: { reason: 'sign_in_busy' }, headers: { 'retry-after': '1' } },
  )
  release()
  t.equal(await queued, 'b')
  await blocker
  await t.rejects(
    run('a', false, async () => {
      throw new Error('scrypt failed')
    }),
    /scrypt failed/,
  )
  t.equal(
    await run('a', false, async () => 'a works'),
    'a works',
    'the failed task left neither the slot nor the key held',
  )
})

t.test('a device cookie is trusted for the account it was issued for, and only as issued', async (t) => {
  const devices = deviceCookies(credentialTags({ deriveKey: () => Buffer.alloc(32, 5) }, 'device'))
  const owner = account('owner@example.com')
  const cookie = devices.issue(owner)
  t.match(cookie, /^atd_[0-9a-f]{32}_[A-Za-z0-9]{30}$/)
  const id = devices.trustedFor(cookie, owner)
  t.match(id, /^[A-Za-z0-9]{22}$/, 'its id')
  t.equal(devices.trustedFor(cookie, owner), id, 'the same id every time')
  t.not(devices.trustedFor(devices.issue(owner), owner), id, 'each cookie is a device of its own')
  t.equal(devices.trustedFor(cookie, account('other@example.com')), null, 'not for another account')
  t.equal(devices.trustedFor(cookie.slice(0, -1) + (cookie.endsWith('A') ? 'B' : 'A'), owner), null, 'not altered')
  const idAt = 'atd_'.length + 33
  t.equal(
    devices.trustedFor(cookie.slice(0, idAt) + (cookie[idAt] === 'x' ? 'y' : 'x') + cookie.slice(idAt + 1), owner),
    null,
    'not with another id',
  )
  const elsewhere = deviceCookies(credentialTags({ deriveKey: () => Buffer.alloc(32, 6) }, 'device'))
  t.equal(devices.trustedFor(elsewhere.issue(owner), owner), null, "not one another deployment's key made")
  t.equal(devices.trustedFor(undefined, owner), null, 'no cookie')
  t.equal(
    devices.trustedFor(`atd_${owner.slice(0, 32)}_${'A'.repeat(30)}`, owner),
    null,
    'not one made up in the right shape',
  )
})
