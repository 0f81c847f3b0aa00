// License keys: every way one can be right or wrong, verified offline with keys the test makes
// (the committed key's private half exists nowhere in the repository).
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import t from 'tap'
import { base64url, importJWK } from 'jose'
import { issueLicense } from '../../licenses/issue.js'
import { TRUSTED_KEYS, type TrustedKey } from '../../licenses/keys.js'
import { licenseSummary, verifyLicense, LICENSE_TYP, type LicenseResult } from '../../licenses/license.js'
import { licenseToken, type TokenParts } from '../helpers/license.js'

const DAY = 86_400_000
function keyPair(kid: string): { privateKey: KeyObject; trusted: TrustedKey } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return {
    privateKey,
    trusted: { kid, publicKeyJwk: publicKey.export({ format: 'jwk' }) as TrustedKey['publicKeyJwk'] },
  }
}
const vendor = keyPair('test-1')
const keys = [vendor.trusted]
const issuedAt = new Date('2026-01-01T00:00:00Z')
const expiresAt = new Date('2027-01-01T00:00:00Z')
const base = {
  privateKey: vendor.privateKey,
  kid: 'test-1',
  customer: 'Acme',
  plan: 'enterprise' as const,
  maxTenants: 25,
  features: ['sso', 'byos'],
  airGapAllowed: true,
  issuedAt,
  expiresAt,
}
const license = await issueLicense(base)
const at = (when: string | number) => ({ keys, now: new Date(when) })
const midTerm = at('2026-06-01T00:00:00Z')
const reason = (r: LicenseResult) => (r.status === 'invalid' ? r.reason : r.status)
const seconds = (d: Date) => d.getTime() / 1000

/** A token with our header and claims, changed and signed as the test says (for the refusal cases). */
function signed(over: Partial<Pick<TokenParts, 'claims' | 'header' | 'key'>>) {
  return licenseToken({
    key: over.key ?? vendor.privateKey,
    issuedAt,
    expiresAt,
    claims: over.claims,
    header: { kid: 'test-1', ...over.header },
  })
}

t.test('a valid license says whose it is, the plan, the limits and until when', async (t) => {
  const r = await verifyLicense(license, midTerm)
  t.equal(r.status, 'valid')
  t.match(r, {
    license: {
      customer: 'Acme',
      plan: 'enterprise',
      maxTenants: 25,
      features: ['sso', 'byos'],
      airGapAllowed: true,
      issuedAt,
      notBefore: issuedAt,
      expiresAt,
      graceEndsAt: new Date(expiresAt.getTime() + 30 * DAY),
    },
  })
  t.match(
    r,
    { license: { id: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/ } },
    'the license id is a UUID',
  )
  t.match(r.message, /Licensed to Acme \(enterprise, up to 25 tenants\) until 2027-01-01/)
})

t.test('the summary is one line with the status and, when invalid, the reason; never the key', async (t) => {
  const valid = await verifyLicense(license, midTerm)
  t.equal(licenseSummary(valid), `license valid: ${valid.message}`)
  t.equal(
    licenseSummary(await verifyLicense('', { keys })),
    'license invalid (missing): No license key is set (LICENSE_KEY): contact your Atrium vendor for one',
  )
  for (const r of [
    valid,
    await verifyLicense(license, at(expiresAt.getTime() + DAY)),
    await verifyLicense(`${license}x`, midTerm),
  ]) {
    const line = licenseSummary(r)
    t.notMatch(line, /\n/, 'one line')
    for (const part of license.split('.')) t.notOk(line.includes(part.slice(0, 16)), 'no part of the key')
  }
})

t.test('after expiry a grace period runs, counted in days left; then the license is expired', async (t) => {
  const exp = expiresAt.getTime()
  const graceEnd = exp + 30 * DAY
  t.equal((await verifyLicense(license, at(exp - 1))).status, 'valid', 'the last moment before the expiry')
  t.match(
    await verifyLicense(license, at(exp)),
    {
      status: 'grace',
      daysLeft: 30,
      message: /expired on 2027-01-01; Atrium keeps working for 30 more day\(s\): contact your Atrium vendor to renew/,
    },
    'at the expiry',
  )
  t.match(
    await verifyLicense(license, at(exp + 10.5 * DAY)),
    { status: 'grace', daysLeft: 20 },
    'a part day counts as a day left',
  )
  t.match(await verifyLicense(license, at(graceEnd - 1)), { status: 'grace', daysLeft: 1 }, 'the last moment of grace')
  t.match(
    await verifyLicense(license, at(graceEnd)),
    {
      status: 'expired',
      message: /expired on 2027-01-01 and its grace period ended on 2027-01-31: contact your Atrium vendor to renew/,
    },
    'at the end of grace',
  )
  t.match(
    await verifyLicense(license, at(exp + 400 * DAY)),
    { status: 'expired', license: { customer: 'Acme' } },
    'long after',
  )
})

t.test("the grace period is the verifier's to choose", async (t) => {
  const exp = expiresAt.getTime()
  t.match(await verifyLicense(license, { ...at(exp + 6 * DAY), graceDays: 7 }), {
    status: 'grace',
    daysLeft: 1,
    license: { graceEndsAt: new Date(exp + 7 * DAY) },
  })
  t.match(await verifyLicense(license, { ...at(exp + 7 * DAY), graceDays: 7 }), { status: 'expired' })
  t.equal(
    (await verifyLicense(license, { ...at(exp), graceDays: 0 })).status,
    'expired',
    'no grace: expired at the expiry',
  )
  t.equal((await verifyLicense(license, { ...at(exp), graceDays: -5 })).status, 'expired', 'a negative grace is none')
})

t.test('a license before its start date is not valid yet, and says from when it is', async (t) => {
  const r = await verifyLicense(license, at('2025-12-01T00:00:00Z'))
  t.match(r, {
    status: 'invalid',
    reason: 'not_yet_valid',
    message: /not valid until 2026-01-01: check this machine's clock/,
    license: { customer: 'Acme' },
  })
  t.match(
    await verifyLicense(await signed({ claims: { plan: 'platinum' } }), at('2025-12-01')),
    { reason: 'not_yet_valid', message: /not valid until its start date/ },
    'also when its claims are unreadable',
  )
  t.equal(
    reason(await verifyLicense(license, at(issuedAt.getTime() - 30_000))),
    'valid',
    'a clock half a minute behind is tolerated',
  )
  t.equal(
    reason(await verifyLicense(license, at(issuedAt.getTime() - 61_000))),
    'not_yet_valid',
    'a clock more than a minute behind is not',
  )
})

t.test('a changed license, another signer or an unknown key is refused', async (t) => {
  const [h, p, s] = license.split('.')
  const payload = JSON.parse(new TextDecoder().decode(base64url.decode(p!)))
  const tampered = `${h}.${base64url.encode(JSON.stringify({ ...payload, maxTenants: 10_000 }))}.${s}`
  t.match(
    await verifyLicense(tampered, midTerm),
    { status: 'invalid', reason: 'bad_signature', message: /altered or not issued by the vendor/ },
    'tampered payload',
  )
  t.notOk(
    ((await verifyLicense(tampered, midTerm)) as { license?: unknown }).license,
    'nothing of an unsigned payload is reported',
  )
  const impostor = keyPair('test-1')
  t.equal(
    reason(await verifyLicense(await signed({ key: impostor.privateKey }), midTerm)),
    'bad_signature',
    'same kid, another key',
  )
  t.match(await verifyLicense(await signed({ header: { kid: 'nobody' } }), midTerm), {
    reason: 'unknown_key',
    message: /upgrade Atrium or contact your Atrium vendor/,
  })
  t.equal(
    reason(await verifyLicense(await signed({ header: { kid: undefined } }), midTerm)),
    'unknown_key',
    'no kid at all',
  )
  t.equal(reason(await verifyLicense(await signed({}), midTerm)), 'valid', 'the same token made correctly passes')
})

t.test('a license for another audience, from another issuer or of another type is refused', async (t) => {
  t.match(await verifyLicense(await signed({ claims: { aud: 'atrium-cloud' } }), midTerm), {
    reason: 'wrong_audience',
    message: /not for Atrium on-premise/,
  })
  t.match(await verifyLicense(await signed({ claims: { iss: 'someone-else' } }), midTerm), {
    reason: 'wrong_issuer',
    message: /not issued by Atrium licensing/,
  })
  t.equal(
    reason(await verifyLicense(await signed({ claims: { iss: undefined } }), midTerm)),
    'wrong_issuer',
    'no issuer',
  )
  t.match(await verifyLicense(await signed({ header: { typ: 'JWT' } }), midTerm), {
    reason: 'wrong_type',
    message: /not an Atrium license key/,
  })
  t.equal(
    reason(await verifyLicense(await signed({ header: { typ: 'at+jwt', kid: 'server-key' } }), midTerm)),
    'wrong_type',
    'an access token pasted by mistake',
  )
})

t.test('alg none and HS256 tokens are refused', async (t) => {
  const genuine = JSON.parse(new TextDecoder().decode(base64url.decode(license.split('.')[1]!)))
  const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: LICENSE_TYP, kid: 'test-1' }))}.${base64url.encode(JSON.stringify({ ...genuine, maxTenants: 1000 }))}.`
  t.equal(reason(await verifyLicense(none, midTerm)), 'bad_signature', 'alg none')
  // HS256 keyed with the public key's bytes: the classic key confusion attack.
  const hs = await signed({ header: { alg: 'HS256' }, key: new TextEncoder().encode(vendor.trusted.publicKeyJwk.x) })
  t.equal(reason(await verifyLicense(hs, midTerm)), 'bad_signature', 'HS256')
})

t.test('claims this version cannot read are refused rather than half-understood', async (t) => {
  const cases: Record<string, unknown>[] = [
    { plan: 'platinum' },
    { plan: undefined },
    { maxTenants: 0 },
    { maxTenants: 2.5 },
    { maxTenants: '5' },
    { features: 'sso' },
    { features: [1] },
    { features: undefined },
    { customer: ' ' },
    { customer: 42 },
    { airGapAllowed: 'yes' },
    { sub: 'lic-1' },
    { sub: undefined },
    { nbf: undefined },
    { iat: 'yesterday' },
    { exp: 1e13 },
    { exp: seconds(issuedAt) },
    { exp: undefined },
  ]
  for (const claims of cases) {
    const r = await verifyLicense(await signed({ claims }), midTerm)
    t.match(
      r,
      { status: 'invalid', reason: 'bad_claims', message: /content this version cannot read/ },
      JSON.stringify(claims),
    )
  }
})

t.test('an air-gapped site needs a license that allows it', async (t) => {
  const connectedOnly = await issueLicense({ ...base, airGapAllowed: false })
  t.match(await verifyLicense(connectedOnly, { ...midTerm, airGapped: true }), {
    status: 'invalid',
    reason: 'air_gap_not_allowed',
    message: /does not allow air-gapped installations; contact your Atrium vendor for one that does/,
    license: { airGapAllowed: false },
  })
  t.equal((await verifyLicense(connectedOnly, midTerm)).status, 'valid', 'fine when connected')
  t.equal(
    (await verifyLicense(license, { ...midTerm, airGapped: true })).status,
    'valid',
    'fine when the license allows it',
  )
})

t.test('no key and garbage get messages an admin can act on', async (t) => {
  t.match(await verifyLicense('', { keys }), {
    status: 'invalid',
    reason: 'missing',
    message: /No license key is set \(LICENSE_KEY\)/,
  })
  t.match(await verifyLicense(' \n', { keys }), { reason: 'missing' }, 'only whitespace')
  t.match(await verifyLicense(undefined, { keys }), { reason: 'missing' }, 'unset')
  for (const garbage of ['not-a-license', 'a.b.c', 'eyJhbGciOiJFZERTQSJ9', `${base64url.encode('{"alg":')}.e30.sig`]) {
    t.match(
      await verifyLicense(garbage, { keys }),
      { status: 'invalid', reason: 'malformed', message: /paste it again exactly as received/ },
      garbage,
    )
  }
  const [h, p] = license.split('.')
  t.equal(reason(await verifyLicense(`${h}.${p}.#!`, midTerm)), 'malformed', 'a signature that is not base64url')
  t.equal(reason(await verifyLicense(`${license}x`, midTerm)), 'bad_signature', 'a character too many')
})

t.test('a key pasted with line breaks or surrounding spaces still verifies', async (t) => {
  const wrapped = `  ${license.match(/.{1,64}/g)!.join('\n')}\n`
  t.equal((await verifyLicense(wrapped, midTerm)).status, 'valid')
})

t.test('options that make no sense fall back rather than throw', async (t) => {
  const forever = await issueLicense({ ...base, issuedAt: new Date('2000-01-01'), expiresAt: new Date('2999-01-01') })
  t.equal(
    reason(await verifyLicense(forever, { keys, now: new Date('not a date') })),
    'valid',
    'an invalid now is the current time',
  )
  t.equal(
    reason(await verifyLicense(license, { keys, graceDays: Number.NaN, now: expiresAt })),
    'expired',
    'NaN grace is none',
  )
})

t.test(
  'the committed trusted key is a real Ed25519 public key, and licenses the tests sign do not pass it',
  async (t) => {
    t.equal(TRUSTED_KEYS.length, 1)
    const [shipped] = TRUSTED_KEYS
    t.equal(shipped!.kid, 'atrium-2026-1')
    t.same(Object.keys(shipped!.publicKeyJwk).sort(), ['crv', 'kty', 'x'], 'a public key only (no "d")')
    t.match(shipped!.publicKeyJwk, { kty: 'OKP', crv: 'Ed25519' })
    t.ok(await importJWK(shipped!.publicKeyJwk, 'EdDSA'), 'jose imports it')
    const r = await verifyLicense(await issueLicense({ ...base, kid: shipped!.kid }), { now: midTerm.now })
    t.equal(reason(r), 'bad_signature', "only the vendor's private key signs for the shipped kid")
  },
)
