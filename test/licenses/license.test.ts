// License keys: every way one can be right or wrong, verified offline with keys the test makes
// (no committed private key exists).
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import t from 'tap'
import { base64url, importJWK, SignJWT } from 'jose'
import { issueLicense } from '../../licenses/issue.js'
import { TRUSTED_KEYS, type TrustedKey } from '../../licenses/keys.js'
import { licenseSummary, verifyLicense, LICENSE_AUDIENCE, LICENSE_ISSUER, LICENSE_TYP, type LicenseResult } from '../../licenses/license.js'

const DAY = 86_400_000
function keyPair(kid: string): { privateKey: KeyObject; trusted: TrustedKey } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return { privateKey, trusted: { kid, publicKeyJwk: publicKey.export({ format: 'jwk' }) as TrustedKey['publicKeyJwk'] } }
}
const vendor = keyPair('test-1')
const keys = [vendor.trusted]
const issuedAt = new Date('2026-01-01T00:00:00Z')
const expiresAt = new Date('2027-01-01T00:00:00Z')
const base = { privateKey: vendor.privateKey, kid: 'test-1', customer: 'Acme', plan: 'enterprise' as const, maxTenants: 25, features: ['sso', 'byos'], airGapAllowed: true, issuedAt, expiresAt }
const license = await issueLicense(base)
const at = (iso: string | number) => ({ keys, now: new Date(iso) })
const reason = (r: LicenseResult) => (r.status === 'invalid' ? r.reason : r.status)

/** A token with our header and claims but signed as the test says (for the refusal cases). */
async function signed(over: { claims?: Record<string, unknown>; header?: Record<string, unknown>; key?: KeyObject }) {
  return new SignJWT({ customer: 'Acme', plan: 'pro', maxTenants: 1, features: [], airGapAllowed: false, ...over.claims })
    .setProtectedHeader({ alg: 'EdDSA', typ: LICENSE_TYP, kid: 'test-1', ...over.header } as { alg: string })
    .setIssuer(String(over.claims?.iss ?? LICENSE_ISSUER)).setAudience(String(over.claims?.aud ?? LICENSE_AUDIENCE)).setSubject('lic-1')
    .setIssuedAt(issuedAt.getTime() / 1000).setNotBefore(issuedAt.getTime() / 1000).setExpirationTime(expiresAt.getTime() / 1000)
    .sign(over.key ?? vendor.privateKey)
}

t.test('a valid license says whose it is, the plan, the limits and until when', async (t) => {
  const r = await verifyLicense(license, at('2026-06-01T00:00:00Z'))
  t.equal(r.status, 'valid')
  t.match(r, { license: { customer: 'Acme', plan: 'enterprise', maxTenants: 25, features: ['sso', 'byos'], airGapAllowed: true, expiresAt, issuedAt } })
  t.match(r.message, /Licensed to Acme \(enterprise, up to 25 tenants\) until 2027-01-01/)
  t.equal(licenseSummary(r), `license valid: ${r.message}`)
  t.notMatch(licenseSummary(r), license.slice(0, 20), 'no key material in the summary')
})

t.test('after expiry a grace period of 30 days runs, counted in days left; then it is expired', async (t) => {
  const exp = expiresAt.getTime()
  t.equal((await verifyLicense(license, at(exp))).status, 'valid', 'at the expiry')
  const grace = await verifyLicense(license, at(exp + 61_000))
  t.match(grace, { status: 'grace', daysLeft: 30, message: /expired on 2027-01-01; Atrium keeps working for 30 more day/ })
  t.match(await verifyLicense(license, at(exp + 29.5 * DAY)), { status: 'grace', daysLeft: 1 })
  t.equal((await verifyLicense(license, at(exp + 30 * DAY))).status, 'grace', 'the last moment of grace')
  const expired = await verifyLicense(license, at(exp + 30 * DAY + 1))
  t.match(expired, { status: 'expired', message: /grace period ended on 2027-01-31/ })
  t.match(await verifyLicense(license, { ...at(exp + 10 * DAY), graceDays: 7 }), { status: 'expired' }, 'a shorter grace when configured')
})

t.test('a license before its start date is not valid yet', async (t) => {
  t.equal(reason(await verifyLicense(license, at('2025-12-01T00:00:00Z'))), 'not_yet_valid')
  t.equal(reason(await verifyLicense(license, at(issuedAt.getTime() - 30_000))), 'valid', 'a clock half a minute behind is tolerated')
})

t.test('a changed license, another signer, an unknown key, another audience or issuer are refused', async (t) => {
  const [h, p, s] = license.split('.')
  const payload = JSON.parse(new TextDecoder().decode(base64url.decode(p!)))
  const tampered = `${h}.${base64url.encode(JSON.stringify({ ...payload, maxTenants: 10_000 }))}.${s}`
  t.equal(reason(await verifyLicense(tampered, at('2026-06-01'))), 'bad_signature', 'tampered payload')
  const impostor = keyPair('test-1')
  t.equal(reason(await verifyLicense(await signed({ key: impostor.privateKey }), at('2026-06-01'))), 'bad_signature', 'same kid, another key')
  t.equal(reason(await verifyLicense(await signed({ header: { kid: 'nobody' } }), at('2026-06-01'))), 'unknown_key')
  t.equal(reason(await verifyLicense(await signed({ claims: { aud: 'atrium-cloud' } }), at('2026-06-01'))), 'wrong_audience')
  t.equal(reason(await verifyLicense(await signed({ claims: { iss: 'someone-else' } }), at('2026-06-01'))), 'wrong_issuer')
  t.equal(reason(await verifyLicense(await signed({ header: { typ: 'JWT' } }), at('2026-06-01'))), 'wrong_type')
  t.equal(reason(await verifyLicense(await signed({}), at('2026-06-01'))), 'valid', 'the same token made correctly passes')
})

t.test('alg none and HS256 tokens are refused', async (t) => {
  const claims = base64url.encode(JSON.stringify({ iss: LICENSE_ISSUER, aud: LICENSE_AUDIENCE, sub: 'x', customer: 'Acme', plan: 'enterprise', maxTenants: 1000, features: [], airGapAllowed: true, iat: 1, nbf: 1, exp: 4e9 }))
  const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: LICENSE_TYP, kid: 'test-1' }))}.${claims}.`
  t.equal(reason(await verifyLicense(none, at('2026-06-01'))), 'bad_signature')
  // HS256 keyed with the public key's bytes: the classic confusion attack.
  const hsKey = new TextEncoder().encode(vendor.trusted.publicKeyJwk.x)
  const hs = await new SignJWT(JSON.parse(new TextDecoder().decode(base64url.decode(claims)))).setProtectedHeader({ alg: 'HS256', typ: LICENSE_TYP, kid: 'test-1' }).sign(hsKey)
  t.equal(reason(await verifyLicense(hs, at('2026-06-01'))), 'bad_signature')
})

t.test('claims this version cannot read are refused rather than half-understood', async (t) => {
  for (const claims of [{ plan: 'platinum' }, { maxTenants: 0 }, { maxTenants: 2.5 }, { features: 'sso' }, { customer: ' ' }, { airGapAllowed: 'yes' }]) {
    t.equal(reason(await verifyLicense(await signed({ claims }), at('2026-06-01'))), 'bad_claims', JSON.stringify(claims))
  }
})

t.test('an air-gapped site needs a license that allows it', async (t) => {
  const connectedOnly = await issueLicense({ ...base, airGapAllowed: false })
  const r = await verifyLicense(connectedOnly, { ...at('2026-06-01'), airGapped: true })
  t.match(r, { status: 'invalid', reason: 'air_gap_not_allowed', message: /does not allow air-gapped/ })
  t.equal((await verifyLicense(connectedOnly, at('2026-06-01'))).status, 'valid', 'fine when connected')
  t.equal((await verifyLicense(license, { ...at('2026-06-01'), airGapped: true })).status, 'valid')
})

t.test('no key and garbage get messages an admin can act on', async (t) => {
  t.match(await verifyLicense('', { keys }), { reason: 'missing', message: /No license key is set \(LICENSE_KEY\)/ })
  t.match(await verifyLicense(undefined, { keys }), { reason: 'missing' })
  t.match(await verifyLicense('not-a-license', { keys }), { reason: 'malformed', message: /paste it again/ })
  t.match(await verifyLicense(`${license}x`, at('2026-06-01')), { status: 'invalid' }, 'a character too many')
})

t.test('the committed trusted keys are real Ed25519 public keys and no license signed by the tests passes them', async (t) => {
  t.ok(TRUSTED_KEYS.length >= 1)
  for (const k of TRUSTED_KEYS) {
    t.match(k.publicKeyJwk, { kty: 'OKP', crv: 'Ed25519' })
    t.ok(await importJWK(k.publicKeyJwk, 'EdDSA'), k.kid)
  }
  const r = await verifyLicense(await issueLicense({ ...base, kid: TRUSTED_KEYS[0]!.kid }), { now: new Date('2026-06-01') })
  t.equal(reason(r), 'bad_signature', 'only the vendor\'s private key signs for the shipped kid')
})
