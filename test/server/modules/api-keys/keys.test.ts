import t from 'tap'
import {
  apiKeyTags,
  generateKey,
  hashKey,
  isLegacyKey,
  looksLikeKey,
} from '../../../../server/modules/api-keys/keys.js'
import { isPermission } from '../../../../server/domain/permissions.js'

const tags = apiKeyTags({ deriveKey: () => Buffer.alloc(32, 1) })

t.test('keys carry their type prefix, 32 random base62 characters and the 8-character tag of the rest', async (t) => {
  for (const type of ['sdk', 'ci', 'admin'] as const) {
    const k = generateKey(type, tags)
    t.match(k.key, new RegExp(`^svc_${type}_[A-Za-z0-9]{40}$`))
    t.ok(tags.verify(k.key), 'the tag verifies')
    t.notOk(isLegacyKey(k.key))
    t.equal(k.prefix, k.key.slice(0, `svc_${type}_`.length + 4))
    t.equal(k.lastFour, k.key.slice(-4))
    t.ok(looksLikeKey(k.key))
  }
})

t.test('only the hash is kept, and it identifies the key', async (t) => {
  const k = generateKey('ci', tags)
  t.same(k.hash, hashKey(k.key))
  t.equal(k.hash.length, 32)
  t.notSame(hashKey(k.key + 'x'), k.hash)
})

t.test('keys do not repeat and use the whole alphabet', async (t) => {
  const keys = Array.from({ length: 500 }, () => generateKey('sdk', tags).key)
  t.equal(new Set(keys).size, 500)
  const chars = new Set(keys.join('').replace(/svc_sdk_/g, ''))
  t.equal(chars.size, 62)
})

t.test('things that are not keys are not looked up', async (t) => {
  for (const s of [
    'svc_sdk_short',
    'svc_root_' + 'a'.repeat(32),
    'svc_ci_' + 'a'.repeat(31) + '!',
    'svc_ci_' + 'a'.repeat(33),
    'svc_ci_' + 'a'.repeat(41),
    '',
  ])
    t.notOk(looksLikeKey(s), s)
  t.ok(looksLikeKey('svc_ci_' + 'a'.repeat(32)) && isLegacyKey('svc_ci_' + 'a'.repeat(32)), 'the format before tags')
})

t.test('permission names', async (t) => {
  for (const p of ['*', 'projects:read', 'projects:write', 'export']) t.ok(isPermission(p), p)
  for (const p of ['projects', 'admin', 'projects:*', '']) t.notOk(isPermission(p), p)
})
