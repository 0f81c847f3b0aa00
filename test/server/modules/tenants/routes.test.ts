import http from 'node:http'
import { isIP, type AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { appOn, caller, testApp, type Called, type Caller, type TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import { operatorKey } from '../../../helpers/operator.js'
import { newId } from '../../../../common/ids.js'
import { createLogger } from '../../../../server/logger.js'
import { createKey } from '../../../../server/modules/api-keys/service.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { PLAN_TERMS } from '../../../../server/domain/plans.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { llmKeyContext, llmSettingsService } from '../../../../server/modules/tenants/settings.js'
import { hashPassword } from '../../../../server/modules/users/passwords.js'
import { insertUser } from '../../../../server/modules/users/store.js'
import type { Role } from '../../../../server/domain/permissions.js'
import { compilePolicy, refusalIn, type OutboundPolicy, type Resolver } from '../../../../server/platform/outbound.js'

const PUBLIC = '93.184.216.34'

/** Names answered from a table (never looked up for real); any other name does not exist. */
function dns(answers: Record<string, string[]>): Resolver {
  return async (host) => {
    const list = answers[host]
    if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })
    return list.map((address) => ({ address, family: isIP(address) }))
  }
}
const NAMES = {
  localhost: ['127.0.0.1', '::1'],
  'loopback.test': ['127.0.0.1'],
  'metadata.google.internal': ['169.254.169.254'],
  'metadata6.test': ['fd00:ec2::254'],
  'intranet.test': ['10.1.2.3'],
  'public.test': [PUBLIC],
  ollama: ['10.0.0.7'],
  'llm.example': [PUBLIC],
}

// One app (and database) for the file: every test makes its own tenants, which is the isolation
// the product promises anyway. Tests that move the clock or the outbound policy build their own.
// Self-hosted models live in 10.0.0.0/8 here, as a deployment would list them.
const app = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8' }, { resolver: dns(NAMES) })
const PASSWORD = 'correct horse battery'
const LLM_KEY = 'sk-test-0123456789abcdefWXYZ'
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** A tenant whose owner signs in with a password, and its all-permissions key. */
async function owner(ta: TestApp, plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'pro') {
  const email = `owner-${suffix()}@example.com`
  const created = await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan, email, password: PASSWORD })
  return { ...created, email, key: caller(ta.app, created.apiKey) }
}

/** A signed-in user of the tenant with the given role: a caller that sends their access token. */
async function user(ta: TestApp, tenantId: string, role: Role): Promise<{ userId: string; call: Caller }> {
  const email = `${role}-${suffix()}@example.com`
  const userId = newId()
  await ta.platform.db.system(async (sql) =>
    insertUser(sql, { id: userId, tenantId, email, name: role, role, passwordHash: await hashPassword(PASSWORD) }),
  )
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  return { userId, call: caller(ta.app, ex.body.data.accessToken) }
}

async function keyWith(ta: TestApp, tenantId: string, permissions: string[]): Promise<Caller> {
  const k = await ta.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(ta.platform.secrets), { tenantId, type: 'sdk', permissions }),
  )
  return caller(ta.app, k.key)
}

const auditOf = (ta: TestApp, tenantId: string) =>
  ta.platform.db.system(
    (sql) => sql<{ action: string; actor_type: string; details: Record<string, unknown> }[]>`
    select action, actor_type, details from audit_events where tenant_id = ${tenantId} order by id`,
  )

t.test('GET /tenant shows the tenant of the credential with the limits of its plan', async (t) => {
  const ta = app
  const o = await owner(ta, 'pro')
  const byKey = await o.key('GET', '/api/v1/tenant')
  t.equal(byKey.status, 200)
  t.match(byKey.body.data, {
    id: o.tenantId,
    tenantId: o.tenantId,
    name: /^Acme /,
    plan: 'pro',
    status: 'active',
    createdAt: String,
    updatedAt: String,
  })
  t.same(byKey.body.data.limits, PLAN_TERMS.pro.limits)
  t.equal(byKey.body.data.limits.projectVersions, 20)

  const viewer = await user(ta, o.tenantId, 'viewer')
  const byViewer = await viewer.call('GET', '/api/v1/tenant')
  t.equal(byViewer.status, 200, 'any member of the tenant may read it')
  t.same(byViewer.body.data, { ...byKey.body.data })

  const narrow = await keyWith(ta, o.tenantId, ['export'])
  t.equal((await narrow('GET', '/api/v1/tenant')).status, 200, 'no permission is needed')

  const enterprise = await owner(ta, 'enterprise')
  const e = await enterprise.key('GET', '/api/v1/tenant')
  t.equal(e.body.data.plan, 'enterprise')
  t.equal(e.body.data.limits.projectVersions, null, 'unlimited is null')
  t.equal(e.body.data.id, enterprise.tenantId, 'each credential sees its own tenant')

  const anon = await ta.anonymous('GET', '/api/v1/tenant')
  t.equal(anon.status, 401)
  t.equal(anon.body.error.code, 'UNAUTHORIZED')
})

t.test('a platform operator key has no tenant to show', async (t) => {
  const admin = (await operatorKey(app)).call
  for (const [method, url] of [
    ['GET', '/api/v1/tenant'],
    ['GET', '/api/v1/tenant/settings/llm'],
  ] as const) {
    const r = await admin(method, url)
    t.equal(r.status, 403, url)
    t.equal(r.body.error.code, 'FORBIDDEN', url)
  }
})

t.test('renaming the tenant needs settings:write, trims the name and is audited', async (t) => {
  const ta = app
  const o = await owner(ta, 'pro')
  const renamed = await o.key('PATCH', '/api/v1/tenant', { name: '  Acme Research  ' })
  t.equal(renamed.status, 200)
  t.equal(renamed.body.data.name, 'Acme Research')
  t.equal((await o.key('GET', '/api/v1/tenant')).body.data.name, 'Acme Research')
  const same = await o.key('PATCH', '/api/v1/tenant', { name: 'Acme Research' })
  t.equal(same.status, 200, 'the same name again changes nothing')

  const member = await user(ta, o.tenantId, 'member')
  const refused = await member.call('PATCH', '/api/v1/tenant', { name: 'Mine' })
  t.equal(refused.status, 403)
  t.equal(refused.body.error.code, 'FORBIDDEN')
  t.equal(refused.body.error.details.required, 'settings:write')

  for (const body of [
    { name: '' },
    { name: '   ' },
    { name: 'x'.repeat(201) },
    {},
    { name: 'ok', plan: 'enterprise' },
  ]) {
    const r = await o.key('PATCH', '/api/v1/tenant', body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.error.code, 'VALIDATION_ERROR', JSON.stringify(body))
  }
  t.equal((await o.key('GET', '/api/v1/tenant')).body.data.plan, 'pro', "the plan is not the tenant's to choose")
  const events = (await auditOf(ta, o.tenantId)).filter((e) => e.action === 'tenant.updated')
  t.equal(events.length, 1, 'one event: the no-op recorded nothing')
  t.match(events[0]!.details, { fields: ['name'], to: 'Acme Research' })
})

t.test('LLM settings have defaults before the first change', async (t) => {
  const ta = app
  const o = await owner(ta)
  const r = await o.key('GET', '/api/v1/tenant/settings/llm')
  t.equal(r.status, 200)
  t.same(r.body.data, {
    provider: 'openai-compatible',
    baseUrl: null,
    model: null,
    defaults: { temperature: null, maxTokens: null },
    apiKey: { configured: false, lastFour: null },
    updatedAt: null,
    updatedBy: null,
  })
})

t.test('a PATCH changes only the fields sent and records which fields changed', async (t) => {
  const ta = app
  const o = await owner(ta, 'pro')
  const admin = await user(ta, o.tenantId, 'admin')
  const first = await admin.call('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'vllm',
    baseUrl: 'http://10.0.0.5:8000/v1',
    model: 'llama-3.1-70b',
    defaults: { temperature: 0.2 },
  })
  t.equal(first.status, 200)
  t.match(first.body.data, {
    provider: 'vllm',
    baseUrl: 'http://10.0.0.5:8000/v1',
    model: 'llama-3.1-70b',
    defaults: { temperature: 0.2, maxTokens: null },
    apiKey: { configured: false, lastFour: null },
    updatedBy: admin.userId,
    updatedAt: String,
  })
  const second = await o.key('PATCH', '/api/v1/tenant/settings/llm', {
    defaults: { maxTokens: 4096 },
    model: 'llama-3.1-70b',
  })
  t.same(second.body.data.defaults, { temperature: 0.2, maxTokens: 4096 }, 'the other default stays')
  t.equal(second.body.data.provider, 'vllm')
  t.equal(second.body.data.updatedBy, o.userId, "an API key's change is credited to the user it belongs to")
  const reset = await o.key('PATCH', '/api/v1/tenant/settings/llm', { defaults: { temperature: null }, baseUrl: null })
  t.same(reset.body.data.defaults, { temperature: null, maxTokens: 4096 })
  t.equal(reset.body.data.baseUrl, null)
  const noop = await o.key('PATCH', '/api/v1/tenant/settings/llm', { provider: 'vllm' })
  t.equal(noop.body.data.updatedAt, reset.body.data.updatedAt, 'nothing changed, nothing written')
  t.same((await o.key('GET', '/api/v1/tenant/settings/llm')).body.data, reset.body.data)

  const events = (await auditOf(ta, o.tenantId)).filter((e) => e.action === 'settings.llm_changed')
  t.same(
    events.map((e) => e.details.fields),
    [
      ['provider', 'baseUrl', 'model', 'defaults.temperature'],
      ['defaults.maxTokens'],
      ['baseUrl', 'defaults.temperature'],
    ],
  )
  t.same(
    events.map((e) => e.actor_type),
    ['user', 'api_key', 'api_key'],
  )
})

t.test('a PATCH that changes nothing on a tenant without settings stores nothing', async (t) => {
  const ta = app
  const o = await owner(ta, 'pro')
  const r = await o.key('PATCH', '/api/v1/tenant/settings/llm', { provider: 'openai-compatible', apiKey: null })
  t.equal(r.status, 200)
  t.equal(r.body.data.updatedAt, null)
  const rows = await ta.platform.db.system(
    (sql) => sql`select 1 from tenant_llm_settings where tenant_id = ${o.tenantId}`,
  )
  t.equal(rows.length, 0)
  t.same(await auditOf(ta, o.tenantId), [])
})

t.test('two first changes at once both apply', async (t) => {
  const ta = app
  const o = await owner(ta)
  const [a, b] = await Promise.all([
    o.key('PATCH', '/api/v1/tenant/settings/llm', { model: 'gpt-4o' }),
    o.key('PATCH', '/api/v1/tenant/settings/llm', { defaults: { maxTokens: 100 } }),
  ])
  t.equal(a.status, 200)
  t.equal(b.status, 200)
  const now = (await o.key('GET', '/api/v1/tenant/settings/llm')).body.data
  t.equal(now.model, 'gpt-4o')
  t.equal(now.defaults.maxTokens, 100)
})

t.test('the API key is write-only: sealed at rest, bound to its tenant, never returned or logged', async (t) => {
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  // The same platform, logging everything (trace) into memory.
  const ta = await appOn(t, { ...app.platform, log: createLogger('trace', sink) })
  const o = await owner(ta, 'pro')
  const set = await o.key('PATCH', '/api/v1/tenant/settings/llm', { provider: 'openai', apiKey: `  ${LLM_KEY}\n` })
  t.equal(set.status, 200)
  t.same(set.body.data.apiKey, { configured: true, lastFour: 'WXYZ' })
  const got = await o.key('GET', '/api/v1/tenant/settings/llm')
  t.same(got.body.data.apiKey, { configured: true, lastFour: 'WXYZ' })
  for (const r of [set, got]) t.notOk(r.raw.toString().includes(LLM_KEY.slice(3, 20)), 'not in a response')

  const [row] = await ta.platform.db.system(
    (sql) => sql<{ api_key_sealed: string; api_key_last_four: string }[]>`
    select api_key_sealed, api_key_last_four from tenant_llm_settings where tenant_id = ${o.tenantId}`,
  )
  t.match(row!.api_key_sealed, /^atrium:v1:/)
  t.notOk(row!.api_key_sealed.includes(LLM_KEY), 'the column holds ciphertext')
  t.notOk(
    row!.api_key_sealed.includes(Buffer.from(LLM_KEY).toString('base64url').slice(0, 12)),
    'not merely encoded either',
  )
  const secrets = ta.platform.secrets
  t.equal(
    secrets.decrypt(row!.api_key_sealed, llmKeyContext(o.tenantId)),
    LLM_KEY,
    'decrypts (trimmed) with its own context',
  )
  const other = await owner(ta)
  t.throws(
    () => secrets.decrypt(row!.api_key_sealed, llmKeyContext(other.tenantId)),
    { name: 'SecretDecryptError' },
    'not as another tenant',
  )
  t.throws(
    () => secrets.decrypt(row!.api_key_sealed, { ...llmKeyContext(o.tenantId), field: 'base_url' }),
    { name: 'SecretDecryptError' },
    'not as another field',
  )

  // Copied into another tenant's row, the sealed key is useless there.
  await other.key('PATCH', '/api/v1/tenant/settings/llm', { model: 'm' })
  await ta.platform.db.system(
    (sql) =>
      sql`update tenant_llm_settings set api_key_sealed = ${row!.api_key_sealed} where tenant_id = ${other.tenantId}`,
  )
  const llm = llmSettingsService({
    db: ta.platform.db,
    secrets,
    policy: compilePolicy({ allowedCidrs: [], airGapped: false }),
  })
  t.teardown(() => llm.close())
  t.equal((await llm.connection(o.tenantId)).apiKey, LLM_KEY, 'the server itself can use the key')
  await t.rejects(llm.connection(other.tenantId), { name: 'SecretDecryptError' })

  const events = await auditOf(ta, o.tenantId)
  t.same(
    events.map((e) => e.details),
    [{ fields: ['provider', 'apiKey'] }],
  )
  t.notOk(JSON.stringify(events).includes(LLM_KEY.slice(3, 20)), 'not in the audit log')
  t.ok(lines.length > 0, 'the logs were captured')
  t.notOk(lines.join('').includes(LLM_KEY.slice(3, 20)), 'not in the logs')

  const rotated = await o.key('PATCH', '/api/v1/tenant/settings/llm', { apiKey: 'sk-another-key-ending-1234' })
  t.same(rotated.body.data.apiKey, { configured: true, lastFour: '1234' })
  const cleared = await o.key('PATCH', '/api/v1/tenant/settings/llm', { apiKey: null })
  t.same(cleared.body.data.apiKey, { configured: false, lastFour: null })
  t.equal(cleared.body.data.provider, 'openai', 'clearing the key keeps the rest')
  const [after] = await ta.platform.db.system(
    (sql) => sql`select api_key_sealed, api_key_last_four from tenant_llm_settings where tenant_id = ${o.tenantId}`,
  )
  t.same(after, { api_key_sealed: null, api_key_last_four: null })
  t.equal((await llm.connection(o.tenantId)).apiKey, null)
})

t.test('a short key shows no last four: four characters would give too much of it away', async (t) => {
  const ta = app
  const o = await owner(ta)
  const r = await o.key('PATCH', '/api/v1/tenant/settings/llm', { provider: 'vllm', apiKey: 'EMPTY' })
  t.same(r.body.data.apiKey, { configured: true, lastFour: null })
})

t.test('invalid LLM settings are VALIDATION_ERROR and change nothing', async (t) => {
  const ta = app
  const o = await owner(ta)
  await o.key('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'ollama',
    baseUrl: 'http://ollama:11434',
    apiKey: LLM_KEY,
  })
  const before = (await o.key('GET', '/api/v1/tenant/settings/llm')).body.data
  const bad: [string, unknown][] = [
    ['empty body', {}],
    ['unknown field', { region: 'eu' }],
    ['unknown provider', { provider: 'anthropic-direct' }],
    ['not a URL', { baseUrl: 'not a url' }],
    ['not http(s)', { baseUrl: 'ftp://llm.example/v1' }],
    ['file URL', { baseUrl: 'file:///etc/passwd' }],
    ['credentials in the URL', { baseUrl: 'https://user:secret@llm.example/v1' }],
    ['user name in the URL', { baseUrl: 'https://user@llm.example/v1' }],
    ['URL too long', { baseUrl: `https://llm.example/${'a'.repeat(2048)}` }],
    ['empty URL', { baseUrl: '' }],
    ['blank model', { model: '  ' }],
    ['temperature above 2', { defaults: { temperature: 2.5 } }],
    ['temperature below 0', { defaults: { temperature: -0.1 } }],
    ['temperature as text', { defaults: { temperature: '1' } }],
    ['maxTokens 0', { defaults: { maxTokens: 0 } }],
    ['maxTokens over a million', { defaults: { maxTokens: 1_000_001 } }],
    ['maxTokens fractional', { defaults: { maxTokens: 10.5 } }],
    ['unknown default', { defaults: { topP: 1 } }],
    ['empty key', { apiKey: '' }],
    ['blank key', { apiKey: '   ' }],
    ['key with a space inside', { apiKey: 'sk-abc def-0123456789' }],
    ['key with a line break inside', { apiKey: 'sk-abc\r\nX-Injected: 1' }],
    ['key too long', { apiKey: 'k'.repeat(501) }],
    ['key as a number', { apiKey: 12345678901234 }],
  ]
  for (const [name, body] of bad) {
    const r = await o.key('PATCH', '/api/v1/tenant/settings/llm', body)
    t.equal(r.status, 400, name)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', name)
  }
  const credentials = await o.key('PATCH', '/api/v1/tenant/settings/llm', {
    baseUrl: 'https://user:s3cr3t-pw@llm.example/v1',
  })
  t.notOk(JSON.stringify(credentials.body).includes('s3cr3t-pw'), 'the refused URL is not echoed back')
  t.same((await o.key('GET', '/api/v1/tenant/settings/llm')).body.data, before)
  const edges = await o.key('PATCH', '/api/v1/tenant/settings/llm', {
    defaults: { temperature: 2, maxTokens: 1_000_000 },
    baseUrl: 'https://LLM.example:8443/v1/',
  })
  t.equal(edges.status, 200, 'the bounds themselves are allowed')
})

t.test('reading LLM settings needs settings:read; changing them needs settings:write', async (t) => {
  const ta = app
  const o = await owner(ta)
  const viewer = await user(ta, o.tenantId, 'viewer')
  t.equal((await viewer.call('GET', '/api/v1/tenant/settings/llm')).status, 200)
  const refused = await viewer.call('PATCH', '/api/v1/tenant/settings/llm', { model: 'x' })
  t.equal(refused.status, 403)
  t.equal(refused.body.error.code, 'FORBIDDEN')
  t.equal(refused.body.error.details.required, 'settings:write')
  const member = await user(ta, o.tenantId, 'member')
  t.equal((await member.call('PATCH', '/api/v1/tenant/settings/llm', { apiKey: LLM_KEY })).body.error.code, 'FORBIDDEN')

  const projectsOnly = await keyWith(ta, o.tenantId, ['projects:read'])
  const noRead = await projectsOnly('GET', '/api/v1/tenant/settings/llm')
  t.equal(noRead.body.error.code, 'FORBIDDEN')
  t.equal(noRead.body.error.details.required, 'settings:read')
  const writer = await keyWith(ta, o.tenantId, ['settings:write'])
  t.equal((await writer('PATCH', '/api/v1/tenant/settings/llm', { model: 'by key' })).status, 200)
  t.equal(
    (await writer('GET', '/api/v1/tenant/settings/llm')).body.error.code,
    'FORBIDDEN',
    'write does not imply read',
  )
})

t.test('each tenant sees and changes only its own LLM settings', async (t) => {
  const ta = app
  const a = await owner(ta)
  const b = await owner(ta)
  await a.key('PATCH', '/api/v1/tenant/settings/llm', { provider: 'azure-openai', model: 'a-model', apiKey: LLM_KEY })
  const seenByB = await b.key('GET', '/api/v1/tenant/settings/llm')
  t.equal(seenByB.body.data.model, null)
  t.equal(seenByB.body.data.apiKey.configured, false)
  await b.key('PATCH', '/api/v1/tenant/settings/llm', { model: 'b-model' })
  t.equal((await a.key('GET', '/api/v1/tenant/settings/llm')).body.data.model, 'a-model')
  const header = await b.key('GET', '/api/v1/tenant/settings/llm', undefined, { 'x-tenant-id': a.tenantId })
  t.equal(header.body.error.code, 'VALIDATION_ERROR', 'a tenant header is refused, never followed')
})

t.test('a free-plan tenant changes settings too (its plan keeps no audit log)', async (t: Test) => {
  const ta = app
  const o = await owner(ta, 'free')
  const r = await o.key('PATCH', '/api/v1/tenant/settings/llm', { model: 'small' })
  t.equal(r.status, 200)
  t.same(await auditOf(ta, o.tenantId), [])
  t.equal(
    (
      await ta.anonymous(
        'GET',
        '/api/v1/tenant/settings/llm',
        undefined,
        bearer('svc_sdk_notakeynotakeynotakeynotakey12'),
      )
    ).body.error.code,
    'UNAUTHORIZED',
  )
})

const setBaseUrl = (call: Caller, baseUrl: string) =>
  call('PATCH', '/api/v1/tenant/settings/llm', { provider: 'vllm', baseUrl })

/** 400 VALIDATION_ERROR on the baseUrl field, saying why. */
function refusedBaseUrl(t: Test, r: Called, why: RegExp, what: string) {
  t.equal(r.status, 400, `${what}: 400 (${JSON.stringify(r.body?.error)})`)
  t.equal(r.body?.error?.code, 'VALIDATION_ERROR', `${what}: VALIDATION_ERROR`)
  t.equal(r.body?.error?.details?.errors?.[0]?.field, 'baseUrl', `${what}: the field is named`)
  t.match(r.body?.error?.details?.errors?.[0]?.message, why, `${what}: the reason is given`)
}
const NEVER = (cls: string) => new RegExp(`may not be called: ${cls} addresses are never reachable`)
const OUTSIDE = (cls: string) => new RegExp(`may not be called: ${cls} address outside OUTBOUND_ALLOWED_NETWORKS`)

t.test('an LLM base URL the server may not call is VALIDATION_ERROR and is not stored', async (t) => {
  const ta = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '' }, { resolver: dns(NAMES) })
  const o = await ta.tenant()
  const cases: [string, RegExp][] = [
    ['http://127.0.0.1:11434/v1', OUTSIDE('loopback')],
    ['http://2130706433:8000/v1', OUTSIDE('loopback')],
    ['http://[::1]:8000/v1', OUTSIDE('loopback')],
    ['http://[::ffff:127.0.0.1]:8000/v1', OUTSIDE('loopback')],
    ['http://localhost:8000/v1', OUTSIDE('loopback')],
    ['http://loopback.test:8000/v1', OUTSIDE('loopback')],
    ['http://169.254.169.254/latest/meta-data/', NEVER('metadata')],
    ['http://0xA9FEA9FE/', NEVER('metadata')],
    ['http://[fd00:ec2::254]/', NEVER('metadata')],
    ['http://[::ffff:169.254.169.254]/', NEVER('metadata')],
    ['http://metadata.google.internal/computeMetadata/v1/', NEVER('metadata')],
    ['http://metadata6.test/', NEVER('metadata')],
    ['http://169.254.10.1/v1', NEVER('link-local')],
    ['http://[fe80::1]/v1', NEVER('link-local')],
    ['http://0.0.0.0:8000/v1', NEVER('unspecified')],
    ['http://10.0.0.5:8000/v1', OUTSIDE('private')],
    ['http://172.16.0.1/v1', OUTSIDE('private')],
    ['http://192.168.1.10/v1', OUTSIDE('private')],
    ['http://100.64.0.1/v1', OUTSIDE('private')],
    ['http://[fd12:3456::1]/v1', OUTSIDE('private')],
    ['http://intranet.test/v1', OUTSIDE('private')],
    ['http://nowhere.test/v1', /nowhere\.test does not resolve to an address/],
  ]
  for (const [url, why] of cases) {
    const r = await setBaseUrl(o.call, url)
    refusedBaseUrl(t, r, why, url)
    if (!url.includes('nowhere'))
      t.equal(r.body?.error?.details?.reason, 'outbound_refused', `${url}: the outbound policy said no`)
  }
  const named = await setBaseUrl(o.call, 'http://loopback.test:8000/v1')
  t.notMatch(named.body.error.message, /127\.0\.0\.1/, 'the address a name resolved to is not disclosed')
  t.equal((await o.call('GET', '/api/v1/tenant/settings/llm')).body.data.baseUrl, null, 'nothing was stored')
})

t.test('an LLM base URL inside OUTBOUND_ALLOWED_NETWORKS or on a public address is accepted', async (t) => {
  const o = await app.tenant()
  for (const url of [
    'http://10.0.0.5:8000/v1',
    'http://intranet.test/v1',
    'http://ollama:11434',
    `https://${PUBLIC}/v1`,
    'https://public.test/v1',
  ]) {
    const r = await setBaseUrl(o.call, url)
    t.equal(r.status, 200, `${url}: ${JSON.stringify(r.body?.error)}`)
    t.equal(r.body.data.baseUrl, url)
  }
  refusedBaseUrl(
    t,
    await setBaseUrl(o.call, 'http://192.168.1.10/v1'),
    OUTSIDE('private'),
    'a private address outside the listed network',
  )

  const everywhere = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '0.0.0.0/0,::/0' }, { resolver: dns(NAMES) })
  const e = await everywhere.tenant()
  t.equal((await setBaseUrl(e.call, 'http://127.0.0.1:11434/v1')).status, 200, 'loopback once it is listed')
  for (const url of ['http://169.254.169.254/', 'http://metadata.google.internal/'])
    refusedBaseUrl(
      t,
      await setBaseUrl(e.call, url),
      NEVER('metadata'),
      `${url}: metadata stays refused whatever is listed`,
    )
})

t.test(
  'air-gapped, an LLM base URL must be inside OUTBOUND_ALLOWED_NETWORKS, and a name under OUTBOUND_ALLOWED_DOMAINS',
  async (t) => {
    const ta = await testApp(
      t,
      {
        AIR_GAPPED: 'true',
        OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8',
        OUTBOUND_ALLOWED_DOMAINS: 'intranet.test,public.test',
      },
      { resolver: dns(NAMES) },
    )
    const o = await ta.tenant()
    const AIR_GAPPED = /may not be called: air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable/
    const refusals: [string, RegExp, string][] = [
      [
        'https://llm.example/v1',
        /may not be called: air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up/,
        'a name outside the listed domains',
      ],
      ['https://public.test/v1', AIR_GAPPED, 'a listed name with a public address'],
      [`https://${PUBLIC}/v1`, AIR_GAPPED, 'a public address'],
      ['http://192.168.1.10/v1', AIR_GAPPED, 'a private address outside the listed network'],
    ]
    for (const [url, why, what] of refusals) refusedBaseUrl(t, await setBaseUrl(o.call, url), why, what)
    t.equal((await setBaseUrl(o.call, 'http://intranet.test/v1')).status, 200, 'a name inside the listed network')
    t.equal((await setBaseUrl(o.call, 'http://10.0.0.5:8000/v1')).status, 200, 'an address inside it')
  },
)

t.test('the connection to the model goes only where the outbound policy allows, judged when it connects', async (t) => {
  let hits = 0
  const model = http.createServer((_req, res) => {
    hits++
    res.end('{"data":[]}')
  })
  await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => model.close(() => resolve())))
  const port = (model.address() as AddressInfo).port
  const o = await app.tenant()
  const service = (policy: OutboundPolicy, resolver: Resolver) => {
    const llm = llmSettingsService({
      db: app.platform.db,
      secrets: app.platform.secrets,
      policy: compilePolicy(policy, resolver),
    })
    t.teardown(() => llm.close())
    return llm
  }
  const store = (baseUrl: string) =>
    app.platform.db.system(
      (sql) => sql`
      insert into tenant_llm_settings (tenant_id, base_url) values (${o.tenantId}, ${baseUrl})
      on conflict (tenant_id) do update set base_url = excluded.base_url`,
    )
  const refused = async (llm: ReturnType<typeof llmSettingsService>, why: RegExp, what: string) => {
    const c = await llm.connection(o.tenantId)
    const err = await c.fetch(`${c.baseUrl}/models`).then(
      () => null,
      (e: unknown) => e,
    )
    t.match(refusalIn(err)?.reason, why, what)
  }

  // Stored before this check existed (or under a looser policy): refused when it is used.
  await store(`http://127.0.0.1:${port}/v1`)
  await refused(
    service({ allowedCidrs: [], airGapped: false }, dns({})),
    /loopback address outside OUTBOUND_ALLOWED_NETWORKS/,
    'a stored loopback URL',
  )
  // A name that was public when it was set and now resolves to this host (DNS rebinding).
  const rebinding = dns({ 'rebind.test': ['127.0.0.1'] })
  await store(`http://rebind.test:${port}/v1`)
  await refused(
    service({ allowedCidrs: [], airGapped: false }, rebinding),
    /loopback address outside OUTBOUND_ALLOWED_NETWORKS/,
    'a name that moved to loopback',
  )
  t.equal(hits, 0, 'nothing reached the model server')

  await refused(
    service({ allowedCidrs: ['127.0.0.0/8'], airGapped: true }, rebinding),
    /air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS/,
    'air-gapped, a name outside the listed domains',
  )
  const allowed = await service(
    { allowedCidrs: ['127.0.0.0/8'], allowedDomains: ['rebind.test'], airGapped: true },
    rebinding,
  ).connection(o.tenantId)
  const r = await allowed.fetch(`${allowed.baseUrl}/models`)
  t.equal(r.status, 200, 'inside OUTBOUND_ALLOWED_NETWORKS it connects')
  t.same(await r.json(), { data: [] })
  t.equal(hits, 1)
})

t.test('the OpenAPI document describes the tenant routes with their schemas and errors', async (t) => {
  const doc = (await app.anonymous('GET', '/openapi.json')).body
  const get = doc.paths['/api/v1/tenant'].get
  t.ok(
    get.responses['200'].content['application/json'].schema.properties.data.properties.limits.properties
      .projectVersions,
    'the plan gates',
  )
  const patch = doc.paths['/api/v1/tenant/settings/llm'].patch
  const body = patch.requestBody.content['application/json'].schema
  t.same(Object.keys(body.properties).sort(), ['apiKey', 'baseUrl', 'defaults', 'model', 'provider'])
  const data = patch.responses['200'].content['application/json'].schema.properties.data
  t.same(
    Object.keys(data.properties.apiKey.properties).sort(),
    ['configured', 'lastFour'],
    'the key itself is never in a response',
  )
  for (const code of ['400', '401', '403', '429', '500']) t.ok(patch.responses[code], `PATCH declares ${code}`)
  t.ok(doc.paths['/api/v1/tenant'].patch.responses['403'])
  t.ok(doc.paths['/api/v1/tenant/settings/llm'].get.responses['403'])
})
