// The license at start: what production refuses (one line, exit 78), what development tolerates, and
// how a started server's license moves from valid to grace to expired by the clock alone.
import { mock } from 'node:test'
import t from 'tap'
import { captureLog } from '../../helpers/log.js'
import type { Config } from '../../../config/schema.js'
import { verifyLicense } from '../../../licenses/license.js'
import { createLicense, decideLicense, openLicense, REMINDER_INTERVAL_MS } from '../../../server/platform/license.js'
import { finished, spawnScript } from '../../helpers/cli.js'
import {
  DAY,
  licenseToken,
  productionEnv,
  spawnTrusting,
  testLicense,
  testVendor,
  type Vendor,
} from '../../helpers/license.js'

const vendor = testVendor('test-1')
const issuedAt = new Date('2026-01-01T00:00:00Z')
const expiresAt = new Date('2027-01-01T00:00:00Z')
const graceEndsAt = new Date(expiresAt.getTime() + 30 * DAY)
const midTerm = Date.parse('2026-06-01T00:00:00Z')
const license = await testLicense(vendor, { issuedAt, expiresAt, maxTenants: 3, airGapAllowed: false })

const settings = (over: { NODE_ENV?: Config['NODE_ENV']; LICENSE_KEY?: string; AIR_GAPPED?: boolean } = {}) => ({
  NODE_ENV: over.NODE_ENV ?? 'production',
  LICENSE_KEY: over.LICENSE_KEY ?? '',
  AIR_GAPPED: over.AIR_GAPPED ?? false,
})
const at = (ms: number) => ({ keys: vendor.keys, now: () => ms })

/** A token with the license's header and claims, changed and signed as the case needs. */
function signed(v: Vendor, claims: Record<string, unknown>) {
  return licenseToken({
    key: v.privateKey,
    issuedAt,
    expiresAt,
    claims: { airGapAllowed: true, ...claims },
    header: { kid: v.kid },
  })
}
/** The license with its claims changed after signing. */
function tampered(key: string) {
  const [h, p, s] = key.split('.')
  const claims = JSON.parse(Buffer.from(p!, 'base64url').toString())
  return [h, Buffer.from(JSON.stringify({ ...claims, maxTenants: 1000 })).toString('base64url'), s].join('.')
}

const refusals = async () => [
  { name: 'missing', key: '', reason: 'missing' },
  { name: 'malformed', key: 'not.a-license', reason: 'malformed' },
  { name: 'tampered', key: tampered(license), reason: 'bad_signature' },
  {
    name: 'signed by another key under a trusted kid',
    key: await testLicense(testVendor('test-1'), { issuedAt, expiresAt }),
    reason: 'bad_signature',
  },
  {
    name: 'signed by a key nobody trusts',
    key: await testLicense(testVendor('stranger'), { issuedAt, expiresAt }),
    reason: 'unknown_key',
  },
  { name: 'for another audience', key: await signed(vendor, { aud: 'atrium-saas' }), reason: 'wrong_audience' },
  { name: 'air-gapped site, license without air gap', key: license, reason: 'air_gap_not_allowed', airGapped: true },
  {
    name: 'not valid yet',
    key: await testLicense(vendor, { issuedAt: new Date(midTerm + 10 * DAY), expiresAt }),
    reason: 'not_yet_valid',
  },
]

t.test('production refuses a missing or invalid license, naming the reason and never the key', async (t) => {
  for (const c of await refusals()) {
    const d = await decideLicense(settings({ LICENSE_KEY: c.key, AIR_GAPPED: c.airGapped }), at(midTerm))
    t.match(
      d,
      { kind: 'refused', reason: c.reason, summary: new RegExp(`^license invalid \\(${c.reason}\\): `) },
      c.name,
    )
    if (d.kind === 'refused')
      for (const part of c.key.split('.'))
        if (part.length > 8) t.notOk(d.summary.includes(part.slice(0, 16)), `${c.name}: no part of the key`)
    await t.rejects(
      openLicense(settings({ LICENSE_KEY: c.key, AIR_GAPPED: c.airGapped }), captureLog().log, at(midTerm)),
      { name: 'LicenseRefused', summary: d.kind === 'refused' ? d.summary : '' },
      `${c.name}: the server does not open`,
    )
  }
})

t.test('production refuses to start: one line on stderr naming the reason, exit code 78', async (t) => {
  // server/main.ts as it ships (its trusted keys): the key is missing, garbled or not the vendor's.
  const shipped = [
    { key: '', reason: 'missing', says: /No license key is set \(LICENSE_KEY\)/ },
    { key: 'eyJhbGciOiJFZERTQSJ9.garbage', reason: 'malformed', says: /paste it again/ },
    {
      key: await testLicense({ ...vendor, kid: 'atrium-2026-1' }),
      reason: 'bad_signature',
      says: /altered or not issued by the vendor/,
    },
    {
      key: await testLicense(testVendor('atrium-1999-1')),
      reason: 'unknown_key',
      says: /a key this version does not know/,
    },
  ]
  // The same server trusting the test's key, for what only a vendor-signed key can get wrong.
  const trusting = [
    {
      key: await signed(vendor, { aud: 'atrium-saas', exp: Date.now() / 1000 + 365 * 86400 }),
      reason: 'wrong_audience',
      says: /not for Atrium on-premise/,
    },
    {
      key: await testLicense(vendor, { airGapAllowed: false }),
      reason: 'air_gap_not_allowed',
      says: /does not allow air-gapped installations/,
      env: { AIR_GAPPED: 'true' },
    },
  ]
  const runs = [
    ...shipped.map((c) => ({
      ...c,
      run: finished(spawnScript('server/main.ts', [], productionEnv(t, { LICENSE_KEY: c.key }))),
    })),
    ...trusting.map((c) => ({
      ...c,
      run: finished(spawnTrusting(vendor, ['serve'], productionEnv(t, { LICENSE_KEY: c.key, ...c.env }))),
    })),
  ]
  for (const c of runs) {
    const r = await c.run
    t.equal(r.code, 78, `${c.reason}: exit code 78\n${r.stderr}`)
    const lines = r.stderr.trim().split('\n')
    t.equal(lines.length, 1, `${c.reason}: one line`)
    t.match(lines[0], new RegExp(`^license error: license invalid \\(${c.reason}\\): `), c.reason)
    t.match(lines[0], c.says, c.reason)
    if (c.key) t.notOk(r.stderr.includes(c.key.split('.')[1]!.slice(0, 16)), `${c.reason}: the key is not printed`)
    t.notMatch(r.stdout, /listening/, `${c.reason}: it never listened`)
  }
})

t.test('development without LICENSE_KEY runs unlicensed with a warning', async (t) => {
  for (const env of ['development', 'test'] as const) {
    const c = captureLog()
    const l = await openLicense(settings({ NODE_ENV: env }), c.log)
    t.teardown(() => l.close())
    t.same(l.status(), { status: 'unlicensed' }, env)
    t.equal(l.maxTenants, null, `${env}: no tenant limit`)
    t.equal(l.readOnly(), false)
    t.match(c.at('warn'), [{ msg: /running unlicensed \(development\): no LICENSE_KEY is set/ }], env)
  }
})

t.test('development with an invalid LICENSE_KEY logs an error and runs unlicensed', async (t) => {
  const c = captureLog()
  const l = await openLicense(settings({ NODE_ENV: 'development', LICENSE_KEY: tampered(license) }), c.log, at(midTerm))
  t.teardown(() => l.close())
  t.equal(l.claims, null)
  t.equal(l.maxTenants, null)
  t.match(c.at('error'), [
    {
      msg: /^license invalid \(bad_signature\): .*; running unlicensed \(development\): production refuses to start with this key$/,
    },
  ])
})

t.test('a valid license runs and is logged at start with whose it is and its limits', async (t) => {
  const c = captureLog()
  const l = await openLicense(settings({ LICENSE_KEY: license }), c.log, at(midTerm))
  t.teardown(() => l.close())
  t.same(l.status(), { status: 'valid' })
  t.equal(l.maxTenants, 3)
  t.same(
    c.at('info').map((x) => x.license),
    [
      {
        status: 'valid',
        customer: 'Acme',
        plan: 'enterprise',
        expiresAt: expiresAt.toISOString(),
        maxTenants: 3,
        readOnly: false,
      },
    ],
  )
  t.match(c.at('info')[0]!.msg, /Licensed to Acme \(enterprise, up to 3 tenants\) until 2027-01-01/)
  t.same(c.at('warn'), [])
})

t.test('in grace the server warns at start and again every day, until it is closed', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] })
  t.teardown(() => mock.timers.reset())
  const c = captureLog()
  const l = await openLicense(settings({ LICENSE_KEY: license }), c.log, at(expiresAt.getTime() + 10.5 * DAY))
  t.same(l.status(), { status: 'grace', daysLeft: 20 })
  t.match(c.at('warn'), [
    {
      msg: /expired on 2027-01-01; Atrium keeps working for 20 more day\(s\): contact your Atrium vendor to renew/,
      license: { status: 'grace', daysLeft: 20 },
    },
  ])
  mock.timers.tick(REMINDER_INTERVAL_MS - 1)
  t.equal(c.at('warn').length, 1, 'not before a day has passed')
  mock.timers.tick(1)
  t.equal(c.at('warn').length, 2, 'again a day later')
  l.close()
  mock.timers.tick(3 * REMINDER_INTERVAL_MS)
  t.equal(c.at('warn').length, 2, 'no reminder after close')
})

t.test('an expired license never stops the server: production runs read-only, development only says so', async (t) => {
  const after = at(graceEndsAt.getTime() + DAY)
  t.match(await decideLicense(settings({ LICENSE_KEY: license }), after), {
    kind: 'licensed',
    claims: { customer: 'Acme' },
  })
  const c = captureLog()
  const prod = await openLicense(settings({ LICENSE_KEY: license }), c.log, after)
  t.teardown(() => prod.close())
  t.equal(prod.readOnly(), true)
  t.match(c.at('error'), [
    {
      msg: /grace period ended on 2027-01-31: Atrium is read-only until the license is renewed; contact your Atrium vendor to renew/,
      license: { status: 'expired', readOnly: true },
    },
  ])
  const dev = await openLicense(settings({ NODE_ENV: 'development', LICENSE_KEY: license }), captureLog().log, after)
  t.teardown(() => dev.close())
  t.equal(dev.status().status, 'expired')
  t.equal(dev.readOnly(), false)
  t.match(dev.message(), /production would be read-only/)
})

t.test(
  'a running license follows the clock: valid, grace with the days left, then expired and read-only',
  async (t) => {
    let now = midTerm
    const verified = await verifyLicense(license, { keys: vendor.keys, now: new Date(now) })
    if (verified.status !== 'valid') throw new Error(verified.message)
    const l = createLicense(verified.license, { enforced: true, now: () => now })
    const moments = [
      { at: expiresAt.getTime() - 1, status: 'valid' },
      { at: expiresAt.getTime(), status: 'grace', daysLeft: 30 },
      { at: expiresAt.getTime() + 10.5 * DAY, status: 'grace', daysLeft: 20 },
      { at: graceEndsAt.getTime() - 1, status: 'grace', daysLeft: 1 },
      { at: graceEndsAt.getTime(), status: 'expired' },
    ]
    for (const m of moments) {
      now = m.at
      t.same(
        l.status(),
        { status: m.status, ...(m.daysLeft ? { daysLeft: m.daysLeft } : {}) },
        new Date(m.at).toISOString(),
      )
      t.equal(l.readOnly(), m.status === 'expired')
      // The same bounds as a fresh verification at that moment.
      t.match(await verifyLicense(license, { keys: vendor.keys, now: new Date(m.at) }), {
        status: m.status,
        ...(m.daysLeft ? { daysLeft: m.daysLeft } : {}),
      })
    }
  },
)
