import pino from 'pino'
import t from 'tap'
import { apiKeyTags, hashKey } from '../../../../server/modules/api-keys/keys.js'
import { legacyKeys } from '../../../../server/modules/api-keys/legacy.js'
import { apiKeyAuthenticator, createKey } from '../../../../server/modules/api-keys/service.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { newId, randomBase62 } from '../../../../common/ids.js'
import { suffix, testPlatform } from '../../../helpers/platform.js'

const platform = await testPlatform(t)
const { db } = platform
const { tenantId } = await createTenant(platform, { name: 'Keys', plan: 'growth', email: `k-${suffix()}@example.com` })
const tags = apiKeyTags(platform.secrets)
const legacy = legacyKeys(db, pino({ level: 'silent' }))
const authenticator = apiKeyAuthenticator({ db, tags, legacy })
const authenticate = async (token: string) => {
  const known = authenticator.fromMemory(token)
  return known === undefined ? authenticator.lookUp(token) : known
}

t.test('a created key authenticates as its tenant with its permissions and plan', async (t) => {
  const k = await db.system((sql) =>
    createKey(sql, apiKeyTags(platform.secrets), {
      tenantId,
      type: 'sdk',
      permissions: ['projects:read', 'projects:read'],
    }),
  )
  const p = await authenticate(k.key)
  t.match(p, { kind: 'api_key', id: k.id, tenantId, plan: 'growth' })
  t.same([...p!.permissions], ['projects:read'], 'duplicates dropped')
  const [row] = await db.system((sql) => sql`select secret_hash, prefix, last_four from api_keys where id = ${k.id}`)
  t.notMatch(JSON.stringify(row), new RegExp(k.key.slice(8)), 'the key itself is not stored')
})

t.test('invalid key requests are VALIDATION_ERROR', async (t) => {
  const bad = [
    { tenantId, type: 'admin' as const, permissions: ['*'] },
    { tenantId: null, type: 'ci' as const, permissions: ['*'] },
    { tenantId, type: 'ci' as const, permissions: ['projects:delete-everything'] },
    { tenantId, type: 'ci' as const, permissions: ['*'], expiresAt: new Date(Date.now() - 1000) },
  ]
  for (const input of bad)
    await t.rejects(
      db.system((sql) => createKey(sql, apiKeyTags(platform.secrets), input)),
      { code: 'VALIDATION_ERROR' },
      JSON.stringify(input),
    )
})

t.test('tokens that are not keys of ours are not principals', async (t) => {
  t.equal(await authenticate('not-a-key'), null)
  t.equal(await authenticate('svc_ci_' + 'Z'.repeat(32)), null)
})

t.test('a key that expires while cached stops working at its expiry', async (t) => {
  const k = await db.system((sql) =>
    createKey(sql, apiKeyTags(platform.secrets), {
      tenantId,
      type: 'ci',
      permissions: ['*'],
      expiresAt: new Date(Date.now() + 1500),
    }),
  )
  t.ok(await authenticate(k.key), 'works, and is now cached')
  await new Promise((r) => setTimeout(r, 1600))
  t.equal(await authenticate(k.key), null)
})

t.test('the authenticator says which tokens it can answer without a lookup', async (t) => {
  const fresh = apiKeyAuthenticator({ db, tags, legacy })
  const k = await db.system((sql) =>
    createKey(sql, apiKeyTags(platform.secrets), { tenantId, type: 'sdk', permissions: ['projects:read'] }),
  )
  t.equal(fresh.fromMemory('not-a-key'), null, 'not a key: refused without a lookup')
  t.equal(fresh.fromMemory(k.key), undefined, 'not yet seen: needs a lookup')
  t.match(await fresh.lookUp(k.key), { id: k.id })
  t.match(fresh.fromMemory(k.key), { id: k.id }, 'cached after a successful lookup')
  const revoked = await db.system((sql) =>
    createKey(sql, tags, { tenantId, type: 'sdk', permissions: ['projects:read'] }),
  )
  await db.system((sql) => sql`update api_keys set revoked_at = now() where id = ${revoked.id}`)
  t.equal(fresh.fromMemory(revoked.key), undefined, 'a real key needs a lookup to tell it is revoked')
  t.equal(await fresh.lookUp(revoked.key), null)
  t.equal(fresh.fromMemory(revoked.key), null, 'found dead: refused from memory for a while, no lookup per request')
})

t.test('a made-up key is refused from memory, whatever its spelling: its tag was not made here', async (t) => {
  const real = await db.system((sql) => createKey(sql, tags, { tenantId, type: 'ci', permissions: ['*'] }))
  t.match(real.key, /^svc_ci_[A-Za-z0-9]{40}$/, 'a key is 32 random characters and an 8-character tag')
  const body = real.key.slice(0, -8)
  const forged = [
    `svc_ci_${randomBase62(40)}`,
    `${body}${'A'.repeat(8)}`, // the real key's body, another tag
    `svc_sdk_${real.key.slice('svc_ci_'.length)}`, // the tag of another type
    tags.sign(`svc_ci_${randomBase62(32)}`).replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')),
  ]
  for (const f of forged) t.equal(authenticator.fromMemory(f), null, f)
  const elsewhere = apiKeyTags({ deriveKey: () => Buffer.alloc(32, 7) })
  t.equal(
    authenticator.fromMemory(elsewhere.sign(`svc_ci_${randomBase62(32)}`)),
    null,
    'a key tagged by another deployment',
  )
})

t.test('keys made before tags keep working; made-up ones of that format are refused from memory', async (t) => {
  const old = `svc_ci_${randomBase62(32)}`
  const id = newId()
  await db.system(
    (sql) => sql`
    insert into api_keys (id, tenant_id, type, prefix, last_four, secret_hash, permissions)
    values (${id}, ${tenantId}, 'ci', ${old.slice(0, 11)}, ${old.slice(-4)}, ${hashKey(old)}, ${['projects:read']})`,
  )
  const fresh = apiKeyAuthenticator({ db, tags, legacy })
  t.equal(fresh.fromMemory(old), undefined, 'before the set is first read, every old-format key is looked up')
  await legacy.reload()
  t.equal(fresh.fromMemory(`svc_ci_${randomBase62(32)}`), null, 'once read, one outside it is refused from memory')
  t.equal(fresh.fromMemory(old), undefined, 'among them now: looked up')
  t.match(await fresh.lookUp(old), { id, tenantId })
  t.equal(fresh.fromMemory(`svc_ci_${randomBase62(32)}`), null, 'a made-up key of the old format')
  await db.system((sql) => sql`update api_keys set revoked_at = now() where id = ${id}`)
  await legacy.reload()
  t.equal(
    apiKeyAuthenticator({ db, tags, legacy }).fromMemory(old),
    null,
    'revoked: gone from the set at the next read',
  )
})
