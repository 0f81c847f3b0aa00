// Agents: created, listed, read, changed and deleted, with the configuration's rules.
import t from 'tap'
import { testApp } from '../../../helpers/app.js'

const h = await testApp(t)

t.test('an agent is created, listed, read, changed and deleted', async (t) => {
  const { call } = await h.tenant()
  const created = await call('POST', '/api/v1/agents', {
    name: '  Reviewer ',
    systemPrompt: 'Review code.',
    config: { autonomyLevel: 'medium', temperature: 0.2 },
  })
  t.equal(created.status, 201)
  t.match(created.body.data, {
    id: String,
    name: 'Reviewer',
    systemPrompt: 'Review code.',
    config: {
      autonomyLevel: 'medium',
      model: null,
      temperature: 0.2,
      maxSteps: 10,
      tools: ['list_files', 'read_file'],
    },
    createdAt: /Z$/,
    updatedAt: /Z$/,
  })
  const id = created.body.data.id
  t.same((await call('GET', `/api/v1/agents/${id}`)).body.data, created.body.data)

  const patched = await call('PATCH', `/api/v1/agents/${id}`, { config: { autonomyLevel: 'high', model: 'llama3' } })
  t.equal(patched.status, 200)
  t.match(
    patched.body.data.config,
    { autonomyLevel: 'high', model: 'llama3', tools: ['list_files', 'read_file', 'write_file', 'delete_file'] },
    "a new level without tools takes the level's",
  )
  const narrowed = await call('PATCH', `/api/v1/agents/${id}`, { config: { tools: ['read_file'] } })
  t.same(narrowed.body.data.config.tools, ['read_file'])

  for (let i = 0; i < 3; i++)
    await call('POST', '/api/v1/agents', { name: `a${i}`, systemPrompt: '', config: { autonomyLevel: 'low' } })
  const page1 = await call('GET', '/api/v1/agents?limit=2')
  t.equal(page1.body.data.length, 2)
  const page2 = await call('GET', `/api/v1/agents?limit=2&cursor=${page1.body.meta.nextCursor}`)
  t.equal(page2.body.data.length, 2)
  t.equal(page2.body.meta.nextCursor, null)

  t.equal((await call('DELETE', `/api/v1/agents/${id}`)).status, 200)
  t.equal((await call('GET', `/api/v1/agents/${id}`)).status, 404)
  const audit = await call('GET', '/api/v1/audit-log?action=agent.*')
  t.equal(audit.status, 200)
  t.same(
    audit.body.data.map((e: { action: string }) => e.action).filter((a: string) => a !== 'agent.created'),
    ['agent.deleted', 'agent.updated', 'agent.updated'],
    'changes are audited, newest first',
  )
})

t.test('bad configurations are refused with the rule that was broken', async (t) => {
  const { call } = await h.tenant()
  const bad = async (body: unknown) => (await call('POST', '/api/v1/agents', body)).body.error
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'reckless' } }), {
    code: 'VALIDATION_ERROR',
  })
  t.match(
    await bad({ name: 'x', systemPrompt: '', config: {} }),
    { code: 'VALIDATION_ERROR' },
    'autonomyLevel is required',
  )
  t.match(await bad({ name: '  ', systemPrompt: '', config: { autonomyLevel: 'low' } }), { code: 'VALIDATION_ERROR' })
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'low', maxSteps: 51 } }), {
    code: 'VALIDATION_ERROR',
  })
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'low', temperature: 3 } }), {
    code: 'VALIDATION_ERROR',
  })
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'medium', tools: ['write_file'] } }), {
    code: 'VALIDATION_ERROR',
    message: /needs a higher autonomy level/,
  })
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'high', tools: ['shell'] } }), {
    code: 'VALIDATION_ERROR',
  })
  t.match(await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'high' }, extra: 1 }), {
    code: 'VALIDATION_ERROR',
  })
  t.match(
    await bad({ name: 'x', systemPrompt: '', config: { autonomyLevel: 'medium', tools: ['web_search'] } }),
    { code: 'FEATURE_DISABLED', details: { feature: 'web_search', setting: 'WEB_SEARCH_URL' } },
    'no search endpoint here',
  )
})

t.test('permissions: a viewer reads agents but cannot change or run them', async (t) => {
  const { call } = await h.tenant()
  const key = await call('POST', '/api/v1/api-keys', { name: 'viewer', type: 'sdk', permissions: ['agents:read'] })
  t.equal(key.status, 201)
  const viewer = (await import('../../../helpers/app.js')).caller(h.app, key.body.data.key)
  t.equal((await viewer('GET', '/api/v1/agents')).status, 200)
  const denied = await viewer('POST', '/api/v1/agents', {
    name: 'x',
    systemPrompt: '',
    config: { autonomyLevel: 'low' },
  })
  t.equal(denied.status, 403)
  t.match(denied.body.error, { code: 'FORBIDDEN', details: { required: 'agents:write' } })
})

t.test('air-gapped: web search is refused when asked for, and not offered', async (t) => {
  const gapped = await testApp(t, { AIR_GAPPED: 'true', WEB_SEARCH_URL: 'https://search.example.com/search' })
  const { call } = await gapped.tenant()
  const r = await call('POST', '/api/v1/agents', {
    name: 'x',
    systemPrompt: '',
    config: { autonomyLevel: 'medium', tools: ['read_file', 'web_search'] },
  })
  t.equal(r.status, 403)
  t.match(r.body.error, {
    code: 'FEATURE_DISABLED',
    details: { feature: 'web_search', reason: 'air-gapped', setting: 'AIR_GAPPED' },
  })
  const plain = await call('POST', '/api/v1/agents', {
    name: 'y',
    systemPrompt: '',
    config: { autonomyLevel: 'medium' },
  })
  t.same(plain.body.data.config.tools, ['list_files', 'read_file'], 'the default tools leave it out')

  const open = await testApp(t, { WEB_SEARCH_URL: 'https://search.example.com/search' })
  const o = await open.tenant()
  const withSearch = await o.call('POST', '/api/v1/agents', {
    name: 'z',
    systemPrompt: '',
    config: { autonomyLevel: 'medium' },
  })
  t.same(
    withSearch.body.data.config.tools,
    ['list_files', 'read_file', 'web_search'],
    'offered where a search endpoint is set',
  )
})
