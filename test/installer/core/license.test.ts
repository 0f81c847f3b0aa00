// The license as the installer shows it: pass, warn in grace, fail otherwise, with the vendor's
// message as the fix; and at the prompt, refused when it is not the license as issued.
import t from 'tap'
import { licenseAnswerProblem, licenseCheck } from '../../../installer/core/license.js'
import { testLicense, testVendor } from '../../helpers/license.js'

const vendor = testVendor('k1')
const keys = vendor.keys
const key = await testLicense(vendor, {
  plan: 'pro',
  maxTenants: 3,
  airGapAllowed: false,
  issuedAt: new Date('2026-01-01'),
  expiresAt: new Date('2027-01-01'),
})

t.test('a valid license passes and says whose it is', async (t) => {
  t.match(await licenseCheck(key, { keys, now: new Date('2026-05-01') }), {
    id: 'license',
    status: 'pass',
    found: /Licensed to Acme \(pro, up to 3 tenants\)/,
    fix: '',
  })
})

t.test('in its grace period it warns; past it, it fails', async (t) => {
  t.match(await licenseCheck(key, { keys, now: new Date('2027-01-10') }), {
    status: 'warn',
    fix: /keeps working for 21 more day/,
  })
  t.match(await licenseCheck(key, { keys, now: new Date('2027-03-01') }), { status: 'fail', fix: /grace period ended/ })
})

t.test('a missing, foreign or connected-only license fails with what to do', async (t) => {
  t.match(await licenseCheck('', { keys }), { status: 'fail', found: 'missing', fix: /LICENSE_KEY/ })
  t.match(
    await licenseCheck(key, { now: new Date('2026-05-01') }),
    { status: 'fail', found: 'unknown key' },
    'not signed by a shipped key',
  )
  t.match(await licenseCheck(key, { keys, now: new Date('2026-05-01'), airGapped: true }), {
    status: 'fail',
    found: 'air gap not allowed',
    required: /allows air-gapped use/,
    fix: /does not allow air-gapped/,
  })
})

t.test(
  'at the prompt, a key that is not the license as issued is refused; its state is left to the checks',
  async (t) => {
    const now = { keys, now: new Date('2026-05-01') }
    t.equal(await licenseAnswerProblem(key, now), null)
    t.equal(await licenseAnswerProblem(key, { ...now, airGapped: true }), null, 'not allowing air-gapped use')
    t.equal(await licenseAnswerProblem(key, { keys, now: new Date('2028-01-01') }), null, 'expired')
    t.equal(await licenseAnswerProblem(key, { now: now.now }), null, 'signed with a key this installer does not know')
    for (const cut of [key.slice(0, -1), key.slice(0, -40), `${key}x`, key.split('.').slice(0, 2).join('.')])
      t.match(
        await licenseAnswerProblem(cut, now),
        /^The license key is not a license \(it is cut short/,
        `${cut.length} characters`,
      )
    t.match(await licenseAnswerProblem(key.slice(0, -3), { now: now.now }), /cut short/, 'by its length, any key')
    t.match(await licenseAnswerProblem('not-a-license', now), /cut short, has extra characters/)
  },
)

t.test(
  'judged by the time the clock check found: a clock set back cannot pass a license that has expired, and an unconfirmed clock is said',
  async (t) => {
    const local = new Date('2026-12-01')
    const behind = { offsetMs: -90 * 86_400_000, source: 'the S3 endpoint' }
    t.match(await licenseCheck(key, { keys, now: local }), { status: 'pass' }, 'by this clock alone it passes')
    t.match(await licenseCheck(key, { keys, now: local }, behind), {
      status: 'fail',
      found:
        /grace period ended on 2027-01-31: .* \(judged by the S3 endpoint's clock, which this machine's is 90 days behind\)$/,
      fix: /grace period ended/,
    })
    t.match(await licenseCheck(key, { keys, now: local }, { offsetMs: null, source: 'the S3 endpoint' }), {
      status: 'pass',
      found: /^Licensed to Acme .*\(by this machine's clock, which no reference clock answered to confirm\)$/,
    })
    t.match(
      await licenseCheck(key, { keys, now: local }, { offsetMs: 2_000, source: 'the S3 endpoint' }),
      { status: 'pass', found: /^Licensed to Acme \(pro, up to 3 tenants\) until 2027-01-01$/ },
      'a clock within the tolerance is not mentioned',
    )
    t.match(
      await licenseCheck(key, { keys, now: new Date('2027-02-15') }, { offsetMs: 60 * 86_400_000, source: 'x' }),
      { status: 'pass', found: /judged by x's clock, which this machine's is 60 days ahead of\)$/ },
      'a clock set forward does not expire a license the reference says is valid',
    )
  },
)
