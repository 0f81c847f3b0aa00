// An operator lifting an address's sign-in lock (unlock.ts): the throttle forgets the account's
// failures and its addresses' waits, and each organization with an account for the address has it
// in its audit log. Counters in Redis when the tests have one, in memory otherwise.
import pino from 'pino'
import { Registry } from 'prom-client'
import t from 'tap'
import { accountKey, loginThrottle } from '../../../../server/modules/sign-in/throttle.js'
import { unlockSignIn } from '../../../../server/modules/sign-in/unlock.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { openCounters } from '../../../../server/platform/counters.js'
import { suffix, testPlatform } from '../../../helpers/platform.js'

const platform = await testPlatform(t)
const UNTRUSTED = { trusted: false, suspect: false }

function lockedThrottle() {
  const counters = openCounters({
    redis: platform.cache.redis,
    log: pino({ level: 'silent' }),
    registry: new Registry(),
  })
  return loginThrottle({
    counters,
    keyPrefix: `atrium:test:${suffix()}`,
    limits: { failuresPerAccount: 4, pairFreeFailures: 2 },
  })
}

const auditedUnlocks = (userIds: string[]) =>
  platform.db.system(
    (sql) => sql<{ tenant_id: string; actor_type: string; target_id: string; details: Record<string, unknown> }[]>`
      select tenant_id, actor_type, target_id, details from audit_events where action = 'auth.sign_in_unlocked' and target_id in ${sql(userIds)} order by tenant_id`,
  )

t.test(
  'unlocking an address clears its lock and audits it in each organization with an account for it (whose plan keeps a log), found as the address is typed',
  async (t) => {
    const email = `owner-${suffix()}@example.com`
    const first = await createTenant(platform, {
      name: `First ${suffix()}`,
      plan: 'pro',
      email,
      password: 'correct horse battery',
    })
    const second = await createTenant(platform, {
      name: `Second ${suffix()}`,
      plan: 'growth',
      email,
      password: 'another long passphrase',
    })
    const throttle = lockedThrottle()
    const at = (ip: string) => ({ account: accountKey(email), ip, device: null })
    for (const ip of ['198.51.100.1', '198.51.100.2'])
      for (let i = 0; i < 2; i++) await throttle.failed(at(ip), UNTRUSTED)
    await t.rejects(
      throttle.check(at('198.51.100.9')),
      { code: 'RATE_LIMIT_EXCEEDED', details: { reason: 'sign_in_throttled' } },
      'locked out',
    )

    const r = await unlockSignIn({ db: platform.db, throttle }, `  ${email.toUpperCase()} `)
    t.same(r, {
      failures: 4,
      locked: true,
      addresses: 2,
      waiting: 2,
      accounts: [
        { tenantId: first.tenantId, userId: first.userId },
        { tenantId: second.tenantId, userId: second.userId },
      ].sort((a, b) => (a.userId < b.userId ? -1 : 1)),
    })
    t.same(await throttle.check(at('198.51.100.9')), UNTRUSTED, 'the owner signs in again')
    t.same(await throttle.check(at('198.51.100.1')), UNTRUSTED, "a failing address's wait is gone too")
    const audited = await auditedUnlocks([first.userId, second.userId])
    t.same(
      audited.map((a) => [a.tenant_id, a.target_id]).sort(),
      [
        [first.tenantId, first.userId],
        [second.tenantId, second.userId],
      ].sort(),
    )
    for (const a of audited)
      t.match(a, {
        actor_type: 'system',
        details: { failures: 4, locked: true, addresses: 2, waiting: 2, by: 'admin-cli' },
      })
  },
)

t.test(
  'an address without an account is unlocked all the same (the throttle counts made-up addresses too), and nothing is audited',
  async (t) => {
    const email = `nobody-${suffix()}@example.com`
    const throttle = lockedThrottle()
    for (let i = 0; i < 4; i++)
      await throttle.failed({ account: accountKey(email), ip: `198.51.100.${i}`, device: null }, UNTRUSTED)
    t.same(await unlockSignIn({ db: platform.db, throttle }, email), {
      failures: 4,
      locked: true,
      addresses: 4,
      waiting: 0,
      accounts: [],
    })
    t.same(await throttle.check({ account: accountKey(email), ip: '198.51.100.9', device: null }), UNTRUSTED)
  },
)
