import t from 'tap'
import {
  newLoginId, newVerificationCode, pkceChallenge, safeEqual, statusOf, VERIFICATION_ALPHABET,
} from '../../../../server/modules/cli-auth/service.js'

t.test('the PKCE S256 challenge matches the RFC 7636 appendix B example', async (t) => {
  t.equal(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'), 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')
})

t.test('a loginId is 32 random bytes in base64url (256 bits), never repeated', async (t) => {
  const ids = new Set(Array.from({ length: 1000 }, newLoginId))
  t.equal(ids.size, 1000)
  const malformed = [...ids].filter((id) => !/^[A-Za-z0-9_-]{43}$/.test(id) || Buffer.from(id, 'base64url').length !== 32)
  t.same(malformed, [], '43 base64url characters holding 32 bytes')
})

t.test('a verification code is 8 letters of the consonant alphabet, shown XXXX-XXXX, every letter in use', async (t) => {
  const seen = new Set<string>()
  for (let i = 0; i < 500; i++) {
    const code = newVerificationCode()
    if (!/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/.test(code)) t.fail(`bad code ${code}`)
    for (const c of code.replace('-', '')) seen.add(c)
  }
  t.equal([...seen].sort().join(''), VERIFICATION_ALPHABET, 'all 20 letters occur, no others')
})

t.test('status: expiry turns pending and approved into expired; consumed stays consumed', async (t) => {
  const at = new Date('2030-01-01T00:10:00Z')
  const before = new Date(at.getTime() + 1)
  const after = new Date(at.getTime())
  t.equal(statusOf({ status: 'pending', expires_at: before }, at), 'pending')
  t.equal(statusOf({ status: 'approved', expires_at: before }, at), 'approved')
  t.equal(statusOf({ status: 'pending', expires_at: after }, at), 'expired', 'expired at the instant of expiry')
  t.equal(statusOf({ status: 'approved', expires_at: after }, at), 'expired')
  t.equal(statusOf({ status: 'consumed', expires_at: after }, at), 'consumed')
})

t.test('safeEqual compares strings of any length', async (t) => {
  t.ok(safeEqual('a'.repeat(64), 'a'.repeat(64)))
  t.notOk(safeEqual('a'.repeat(64), 'a'.repeat(63) + 'b'))
  t.notOk(safeEqual('abc', 'abcd'))
  t.notOk(safeEqual('', 'x'))
})
