// The license on the API: a header in grace and once expired; an expired license in production makes
// the API read-only (writes refused with license_expired) while reads, signing in and out, backups,
// the chat export and the health endpoints keep working. The clock is the test's: the server changes state while
// running, with no restart.
import t from 'tap'
import { createTenant } from '../../../server/modules/tenants/service.js'
import { appOn, caller, testApp, type TestApp } from '../../helpers/app.js'
import { DAY, testLicense, testVendor } from '../../helpers/license.js'
import { suffix, testPlatform } from '../../helpers/platform.js'

const vendor = testVendor()
const issuedAt = new Date(Date.now() - 100 * DAY)
const expiresAt = new Date(Math.floor(Date.now() / 1000 + 100 * 86_400) * 1000) // a license counts whole seconds
const graceEndsAt = expiresAt.getTime() + 30 * DAY
const LICENSE_KEY = await testLicense(vendor, { issuedAt, expiresAt })
const clock = { now: Date.now() }
const moments = {
  valid: () => (clock.now = expiresAt.getTime() - DAY),
  grace: () => (clock.now = expiresAt.getTime() + 10.5 * DAY), // 19.5 days of grace left: 20
  expired: () => (clock.now = graceEndsAt),
}

/** A production server on the test's services, trusting the test's key, on the test's clock. */
async function licensedApp(production: boolean): Promise<TestApp> {
  const platform = await testPlatform(
    t,
    { LICENSE_KEY },
    { production, license: { keys: vendor.keys, now: () => clock.now } },
  )
  return appOn(t, platform)
}
const prod = await licensedApp(true)
const PASSWORD = 'a long enough passphrase'
const email = `owner-${suffix()}@example.com`
moments.valid()
const owner = await createTenant(prod.platform, { name: 'Licensed', plan: 'enterprise', email, password: PASSWORD })
const call = (await prod.tenant()).call
const ownerCall = caller(prod.app, owner.apiKey)

t.test('a valid license adds no header and leaves the API writable', async (t) => {
  moments.valid()
  const r = await call('POST', '/api/v1/projects', { name: 'while valid' })
  t.equal(r.status, 201)
  t.equal(r.headers['x-atrium-license'], undefined)
})

t.test('in grace the API works and every /api/v1 response says how many days are left', async (t) => {
  moments.grace()
  const created = await call('POST', '/api/v1/projects', { name: 'in grace' })
  t.equal(created.status, 201)
  t.equal(created.headers['x-atrium-license'], 'grace; days-left=20')
  const list = await call('GET', '/api/v1/projects')
  t.equal(list.headers['x-atrium-license'], 'grace; days-left=20')
  t.equal(
    (await prod.anonymous('GET', '/api/v1/projects')).headers['x-atrium-license'],
    'grace; days-left=20',
    'errors too',
  )
  t.equal((await prod.anonymous('GET', '/healthz')).headers['x-atrium-license'], undefined, 'not on the ops endpoints')
})

t.test(
  'expired in production: every write under /api/v1 is 403 license_expired, with a message saying to renew',
  async (t) => {
    moments.valid()
    const project = (await call('POST', '/api/v1/projects', { name: 'before expiry' })).body.data
    moments.expired()
    const writes = [
      ['POST', '/api/v1/projects', { name: 'after expiry' }],
      ['PATCH', `/api/v1/projects/${project.id}`, { name: 'renamed' }],
      ['DELETE', `/api/v1/projects/${project.id}`, undefined],
      ['POST', '/api/v1/api-keys', { name: 'k', type: 'sdk', permissions: ['projects:read'] }],
      ['PATCH', '/api/v1/tenant', { name: 'renamed' }],
    ] as const
    for (const [method, url, body] of writes) {
      const r = await call(method, url, body)
      t.equal(r.status, 403, `${method} ${url}`)
      t.match(
        r.body.error,
        {
          code: 'FORBIDDEN',
          details: { reason: 'license_expired' },
          message:
            /grace period ended on .*read-only until the license is renewed; contact your Atrium vendor to renew/,
        },
        `${method} ${url}`,
      )
      t.equal(r.headers['x-atrium-license'], 'expired')
    }
    const after = await call('GET', `/api/v1/projects/${project.id}`)
    t.match(after.body.data, { name: 'before expiry' }, 'nothing changed')
    t.equal(
      (await prod.anonymous('POST', '/api/v1/projects', { name: 'x' })).status,
      401,
      'a request without credentials is still 401 first',
    )
  },
)

t.test('expired in production: reads, signing in and out, backups and the chat export keep working', async (t) => {
  moments.valid()
  const project = (await ownerCall('POST', '/api/v1/projects', { name: 'to export' })).body.data
  moments.expired()
  const list = await call('GET', '/api/v1/projects')
  t.equal(list.status, 200)
  t.equal(list.headers['x-atrium-license'], 'expired')
  t.equal((await call('GET', '/api/v1/tenant')).status, 200)

  const login = await prod.anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  t.equal(login.status, 200, 'login')
  const exchanged = await prod.anonymous('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  t.equal(exchanged.status, 200, 'exchange')
  const refreshed = await prod.anonymous('POST', '/api/v1/auth/refresh', { token: login.body.data.token })
  t.equal(refreshed.status, 200, 'refresh')
  const access = { authorization: `Bearer ${refreshed.body.data.accessToken}` }
  t.equal((await prod.anonymous('GET', '/api/v1/auth/me', undefined, access)).status, 200, 'the signed-in user reads')
  t.equal((await prod.anonymous('GET', '/api/v1/projects', undefined, access)).status, 200)
  const backup = await ownerCall('POST', `/api/v1/projects/${project.id}/backup`, {})
  t.equal(backup.status, 201, 'a backup exports the data')
  t.equal(
    (await ownerCall('POST', '/api/v1/chat/export', { dateRange: { start: '2026-03-01', end: '2026-03-31' } })).status,
    200,
    'so does the chat export',
  )
  t.equal(
    (await prod.anonymous('POST', '/api/v1/auth/logout', { token: refreshed.body.data.token })).status,
    200,
    'logout',
  )
})

t.test('expired in production: the health and ops endpoints always answer', async (t) => {
  moments.expired()
  for (const url of ['/healthz', '/readyz', '/metrics']) {
    const r = await prod.anonymous('GET', url)
    t.equal(r.status, 200, url)
    t.equal(r.headers['x-atrium-license'], undefined, url)
  }
})

t.test(
  'a running server turns read-only when its license passes the end of grace, and writable again before',
  async (t) => {
    moments.grace()
    t.equal((await call('POST', '/api/v1/projects', { name: 'last day' })).status, 201)
    clock.now = graceEndsAt - 1
    t.equal(
      (await call('POST', '/api/v1/projects', { name: 'last moment' })).headers['x-atrium-license'],
      'grace; days-left=1',
    )
    clock.now = graceEndsAt
    t.equal(
      (await call('POST', '/api/v1/projects', { name: 'too late' })).status,
      403,
      'read-only from the end of grace, without a restart',
    )
    t.equal((await call('GET', '/api/v1/projects')).status, 200)
    moments.valid() // a clock set right (or a test moving back) is judged again too
    t.equal((await call('POST', '/api/v1/projects', { name: 'again' })).status, 201)
  },
)

t.test('metrics: the expiry for the alert weeks ahead, and read-only once the API is', async (t) => {
  const scrape = async () => (await prod.anonymous('GET', '/metrics')).raw.toString()
  moments.grace()
  let text = await scrape()
  t.match(text, new RegExp(`^atrium_license_expiry_timestamp_seconds ${expiresAt.getTime() / 1000}$`, 'm'))
  t.match(text, /^atrium_license_read_only 0$/m, 'in grace: writable')
  moments.expired()
  text = await scrape()
  t.match(text, /^atrium_license_read_only 1$/m)
  const unlicensed = await testApp(t)
  text = (await unlicensed.anonymous('GET', '/metrics')).raw.toString()
  t.notMatch(text, /^atrium_license_expiry_timestamp_seconds /m, 'no license, no expiry')
  t.match(text, /^atrium_license_read_only 0$/m)
})

t.test('development never turns read-only: an expired license is only reported', async (t) => {
  const dev = await licensedApp(false)
  moments.expired()
  const { call } = await dev.tenant()
  const r = await call('POST', '/api/v1/projects', { name: 'dev' })
  t.equal(r.status, 201)
  t.equal(r.headers['x-atrium-license'], 'expired')
})

t.test('unlicensed development adds no header and restricts nothing', async (t) => {
  const dev = await testApp(t)
  const { call } = await dev.tenant()
  const r = await call('POST', '/api/v1/projects', { name: 'dev' })
  t.equal(r.status, 201)
  t.equal(r.headers['x-atrium-license'], undefined)
})

t.test(
  "a process clock 90 days behind the database's does not revive an expired license; the lag is a metric",
  async (t) => {
    // Ended with its grace 30 days ago; by a clock 90 days behind it would be valid for a month more.
    const key = await testLicense(vendor, {
      issuedAt: new Date(Date.now() - 200 * DAY),
      expiresAt: new Date(Date.now() - 60 * DAY),
    })
    const platform = await testPlatform(
      t,
      { LICENSE_KEY: key },
      { production: true, license: { keys: vendor.keys, now: () => Date.now() - 90 * DAY } },
    )
    const behind = await appOn(t, platform)
    t.equal(platform.time.source(), 'database')
    const { call } = await behind.tenant()
    const write = await call('POST', '/api/v1/projects', { name: 'revived?' })
    t.equal(write.status, 403)
    t.equal(write.body.error.details.reason, 'license_expired')
    t.equal(write.headers['x-atrium-license'], 'expired')
    const metrics = (await behind.anonymous('GET', '/metrics')).raw.toString()
    const lag = Number(/^atrium_clock_behind_seconds (\d+)/m.exec(metrics)?.[1])
    t.ok(lag >= 90 * 86_400 - 60 && lag < 90 * 86_400 + 60, `atrium_clock_behind_seconds ${lag}`)
  },
)
