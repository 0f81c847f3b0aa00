import t from 'tap'
import {
  newLoginId,
  newVerificationCode,
  pkceChallenge,
  safeEqual,
  statusOf,
  VERIFICATION_ALPHABET,
} from '../../../../server/modules/cli-auth/service.js'
import { credentialTags } from '../../../../server/platform/credential-tags.js'

t.test('the PKCE S256 challenge matches the RFC 7636 appendix B example', async (t) => {
  t.equal(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'), 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')
})

t.test('a loginId is 26 random bytes in base64url (208 bits) and its tag, never repeated', async (t) => {
  const tags = credentialTags({ deriveKey: () => Buffer.alloc(32, 3) }, 'cli-login')
  const ids = new Set(Array.from({ length: 1000 }, () => newLoginId(tags)))
  t.equal(ids.size, 1000)
  const malformed = [...ids].filter(
    (id) =>
      !/^[A-Za-z0-9_-]{43}$/.test(id) || Buffer.from(id.slice(0, 35), 'base64url').length !== 26 || !tags.verify(id),
  )
  t.same(malformed, [], '43 characters: 26 bytes in base64url, then the tag')
  const elsewhere = credentialTags({ deriveKey: () => Buffer.alloc(32, 4) }, 'cli-login')
  t.notOk(elsewhere.verify(newLoginId(tags)), "another deployment's tag does not verify")
})

t.test(
  'a verification code is 8 letters of the consonant alphabet, shown XXXX-XXXX, every letter in use',
  async (t) => {
    const seen = new Set<string>()
    for (let i = 0; i < 500; i++) {
      const code = newVerificationCode()
      if (!/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/.test(code)) t.fail(`bad code ${code}`)
      for (const c of code.replace('-', '')) seen.add(c)
    }
    t.equal([...seen].sort().join(''), VERIFICATION_ALPHABET, 'all 20 letters occur, no others')
  },
)

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
