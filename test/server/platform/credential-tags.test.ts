// Credential tags (credential-tags.ts): what lets memory alone refuse a credential not issued here.
import { createHash } from 'node:crypto'
import t from 'tap'
import { credentialTags, TAG_LENGTH } from '../../../server/platform/credential-tags.js'

const asked: string[] = []
/** A master key that derives one key per purpose, as secrets.ts does (with HKDF). */
const master = (fill: number) => ({
  deriveKey: (purpose: string) => (asked.push(purpose), createHash('sha256').update(`${fill}:${purpose}`).digest()),
})
const BODY = 'ats_Sm9uZXNfYW5kX3RoZV9yZXN0X29mX3RoZV9ib2R5XzQz'

t.test('a credential is its body and an 8-character base62 tag, the same for the same body', async (t) => {
  const tags = credentialTags(master(1), 'session')
  const signed = tags.sign(BODY)
  t.equal(signed.slice(0, -TAG_LENGTH), BODY)
  t.match(signed.slice(-TAG_LENGTH), /^[A-Za-z0-9]{8}$/)
  t.equal(tags.sign(BODY), signed, 'deterministic')
  t.not(
    tags.sign(`${BODY}x`),
    `${signed.slice(0, -TAG_LENGTH)}x${signed.slice(-TAG_LENGTH)}`,
    'another body, another tag',
  )
  t.ok(tags.verify(signed))
})

t.test('the key is derived per kind of credential: a tag of one kind does not verify as another', async (t) => {
  asked.length = 0
  const session = credentialTags(master(1), 'session')
  const apiKey = credentialTags(master(1), 'api-key')
  t.same(asked, ['credential-tag:session', 'credential-tag:api-key'])
  t.notOk(apiKey.verify(session.sign(BODY)))
  t.notOk(session.verify(apiKey.sign(BODY)))
})

t.test("another master key's tags do not verify", async (t) => {
  t.notOk(credentialTags(master(1), 'session').verify(credentialTags(master(2), 'session').sign(BODY)))
})

t.test('any one character changed, in the body or the tag, and the credential does not verify', async (t) => {
  const tags = credentialTags(master(1), 'session')
  const signed = tags.sign(BODY)
  const altered = [...signed].map((c, i) => signed.slice(0, i) + (c === 'A' ? 'B' : 'A') + signed.slice(i + 1))
  t.equal(altered.length, BODY.length + TAG_LENGTH)
  t.same(
    altered.filter((a) => tags.verify(a)),
    [],
    'none of them verifies',
  )
  t.notOk(tags.verify(signed.slice(0, -1)), 'nor with its last character cut')
  t.notOk(tags.verify(`${signed}A`), 'nor with one more')
})

t.test('nothing that could not hold a tag verifies', async (t) => {
  const tags = credentialTags(master(1), 'session')
  for (const s of ['', 'A', 'A'.repeat(TAG_LENGTH), tags.sign('').slice(0, TAG_LENGTH)])
    t.notOk(tags.verify(s), JSON.stringify(s))
})
