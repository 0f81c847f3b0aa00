import t from 'tap'
import { apiKeyTags } from '../../../server/modules/api-keys/keys.js'
import { createKey } from '../../../server/modules/api-keys/service.js'
import { caller, testApp } from '../../helpers/app.js'

const h = await testApp(t)
const owner = await h.tenant()
const db = h.platform.db

const keyWith = async (permissions: string[], extra: { type?: 'sdk' | 'ci'; expiresAt?: Date } = {}) =>
  db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), {
      tenantId: owner.tenantId,
      type: extra.type ?? 'sdk',
      permissions,
      expiresAt: extra.expiresAt,
    }),
  )

t.test('no credential is UNAUTHORIZED', async (t) => {
  const r = await h.anonymous('GET', '/api/v1/projects')
  t.equal(r.status, 401)
  t.equal(r.body.error.code, 'UNAUTHORIZED')
})

t.test('a malformed Authorization header is UNAUTHORIZED', async (t) => {
  for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', owner.apiKey, `Token ${owner.apiKey}`]) {
    const r = await h.anonymous('GET', '/api/v1/projects', undefined, { authorization: header })
    t.equal(r.status, 401, header.slice(0, 12))
    t.equal(r.body.error.code, 'UNAUTHORIZED')
  }
})

t.test('an unknown, altered or non-key token is UNAUTHORIZED', async (t) => {
  const altered = owner.apiKey.slice(0, -1) + (owner.apiKey.endsWith('A') ? 'B' : 'A')
  for (const token of [
    'svc_ci_' + 'x'.repeat(32),
    altered,
    'svc_root_' + 'x'.repeat(32),
    'eyJhbGciOiJub25lIn0.e30.',
    'x'.repeat(5000),
  ]) {
    const r = await caller(h.app, token)('GET', '/api/v1/projects')
    t.equal(r.status, 401, token.slice(0, 12))
    t.equal(r.body.error.code, 'UNAUTHORIZED')
  }
})

t.test('a valid key works and its prefix type is kept', async (t) => {
  const k = await keyWith(['projects:read'])
  t.match(k.key, /^svc_sdk_[A-Za-z0-9]{40}$/)
  t.equal((await caller(h.app, k.key)('GET', '/api/v1/projects')).status, 200)
})

t.test('a revoked key is UNAUTHORIZED', async (t) => {
  const k = await keyWith(['projects:read'])
  await db.system((sql) => sql`update api_keys set revoked_at = now() where id = ${k.id}`)
  const r = await caller(h.app, k.key)('GET', '/api/v1/projects')
  t.equal(r.status, 401)
  t.equal(r.body.error.code, 'UNAUTHORIZED')
})

t.test('an expired key is UNAUTHORIZED', async (t) => {
  const k = await keyWith(['projects:read'], { expiresAt: new Date(Date.now() + 60_000) })
  await db.system((sql) => sql`update api_keys set expires_at = now() - interval '1 second' where id = ${k.id}`)
  const r = await caller(h.app, k.key)('GET', '/api/v1/projects')
  t.equal(r.status, 401)
  t.equal(r.body.error.code, 'UNAUTHORIZED')
})

t.test("a suspended tenant's keys are UNAUTHORIZED", async (t) => {
  const other = await h.tenant()
  await db.system((sql) => sql`update tenants set status = 'suspended' where id = ${other.tenantId}`)
  const r = await other.call('GET', '/api/v1/projects')
  t.equal(r.status, 401)
  t.equal(r.body.error.code, 'UNAUTHORIZED')
})

t.test('a key without the route permission is FORBIDDEN and changes nothing', async (t) => {
  const reader = caller(h.app, (await keyWith(['projects:read'])).key)
  const r = await reader('POST', '/api/v1/projects', { name: 'not allowed' })
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.same(r.body.error.details, { required: 'projects:write' })
  const none = caller(h.app, (await keyWith(['export'])).key)
  t.equal((await none('GET', '/api/v1/projects')).body.error.code, 'FORBIDDEN')
  const list = await owner.call('GET', '/api/v1/projects')
  t.notOk(list.body.data.some((p: { name: string }) => p.name === 'not allowed'))
})

t.test('a platform operator key is FORBIDDEN on tenant routes', async (t) => {
  const admin = await db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), { tenantId: null, type: 'admin', permissions: ['*'] }),
  )
  t.match(admin.key, /^svc_admin_/)
  const r = await caller(h.app, admin.key)('GET', '/api/v1/projects')
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
})

t.test('a request carrying a tenant header is VALIDATION_ERROR, whatever its value', async (t) => {
  for (const header of ['x-tenant-id', 'tenant-id', 'x-tenant', 'X-Atrium-Tenant']) {
    const r = await owner.call('GET', '/api/v1/projects', undefined, { [header]: owner.tenantId })
    t.equal(r.status, 400, header)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', header)
    t.match(r.body.error.details.errors, [{ field: `headers.${header.toLowerCase()}` }])
  }
  const bad = await owner.call('POST', '/api/v1/projects', { name: 'via header' }, { 'x-tenant-id': owner.tenantId })
  t.equal(bad.status, 400)
  t.notOk(
    (await owner.call('GET', '/api/v1/projects')).body.data.some((p: { name: string }) => p.name === 'via header'),
    'nothing written',
  )
})

t.test('unauthenticated beats a tenant header: no tenant is named to strangers', async (t) => {
  const r = await h.anonymous('GET', '/api/v1/projects', undefined, { 'x-tenant-id': owner.tenantId })
  t.equal(r.status, 401)
})

t.test('operations endpoints need no credential', async (t) => {
  for (const url of ['/healthz', '/readyz', '/metrics', '/openapi.json'])
    t.equal((await h.anonymous('GET', url)).status, 200, url)
})

t.test('an encoded or absolute-form path meets the same rules as the plain one', async (t) => {
  const reader = caller(h.app, (await keyWith(['projects:read'])).key)
  for (const url of ['/%61pi/v1/projects', 'http://atrium.example/api/v1/projects']) {
    const anon = await h.anonymous('GET', url)
    t.equal(anon.status, 401, `${url}: no credential`)
    t.equal(anon.headers['x-ratelimit-limit'], '1000', `${url}: rate limited`)
    const denied = await reader('POST', url, { name: 'sneaky' })
    t.equal(denied.status, 403, `${url}: permission checked`)
    const tenantHeader = await owner.call('GET', url, undefined, { 'x-tenant-id': owner.tenantId })
    t.equal(tenantHeader.status, 400, `${url}: tenant header refused`)
  }
})
