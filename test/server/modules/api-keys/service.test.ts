import t from 'tap'
import { apiKeyAuthenticator, createKey } from '../../../../server/modules/api-keys/service.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { suffix, testPlatform } from '../../../helpers/platform.js'

const { db } = await testPlatform(t)
const { tenantId } = await createTenant(db, { name: 'Keys', plan: 'growth', email: `k-${suffix()}@example.com` })
const authenticator = apiKeyAuthenticator(db)
const authenticate = async (token: string) => {
  const known = authenticator.fromMemory(token)
  return known === undefined ? authenticator.lookUp(token) : known
}

t.test('a created key authenticates as its tenant with its permissions and plan', async (t) => {
  const k = await db.system((sql) => createKey(sql, { tenantId, type: 'sdk', permissions: ['projects:read', 'projects:read'] }))
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
  for (const input of bad) await t.rejects(db.system((sql) => createKey(sql, input)), { code: 'VALIDATION_ERROR' }, JSON.stringify(input))
})

t.test('tokens that are not keys of ours are not principals', async (t) => {
  t.equal(await authenticate('not-a-key'), null)
  t.equal(await authenticate('svc_ci_' + 'Z'.repeat(32)), null)
})

t.test('a key that expires while cached stops working at its expiry', async (t) => {
  const k = await db.system((sql) => createKey(sql, { tenantId, type: 'ci', permissions: ['*'], expiresAt: new Date(Date.now() + 1500) }))
  t.ok(await authenticate(k.key), 'works, and is now cached')
  await new Promise((r) => setTimeout(r, 1600))
  t.equal(await authenticate(k.key), null)
})

t.test('the authenticator says which tokens it can answer without a lookup', async (t) => {
  const fresh = apiKeyAuthenticator(db)
  const k = await db.system((sql) => createKey(sql, { tenantId, type: 'sdk', permissions: ['projects:read'] }))
  t.equal(fresh.fromMemory('not-a-key'), null, 'not a key: refused without a lookup')
  t.equal(fresh.fromMemory(k.key), undefined, 'not yet seen: needs a lookup')
  t.match(await fresh.lookUp(k.key), { id: k.id })
  t.match(fresh.fromMemory(k.key), { id: k.id }, 'cached after a successful lookup')
  const unknown = 'svc_ci_' + 'Q'.repeat(32)
  t.equal(await fresh.lookUp(unknown), null)
  t.equal(fresh.fromMemory(unknown), undefined, 'failures are not cached')
})
