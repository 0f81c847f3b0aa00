// Chat sessions: created, listed, read, renamed and deleted; bound to the tenant's own agent and
// project only (another tenant's session is 404 on every route: messages.test.ts, with its stream);
// the plan bounds how many there are.
import t from 'tap'
import { caller, testApp } from '../../../helpers/app.js'

const h = await testApp(t)

t.test('a session is created, listed, read, renamed and deleted', async (t) => {
  const { call } = await h.tenant()
  const untitled = await call('POST', '/api/v1/chat/sessions')
  t.equal(untitled.status, 201)
  t.match(untitled.body.data, {
    id: String,
    title: 'New chat',
    agentId: null,
    projectId: null,
    messageCount: 0,
    createdAt: /Z$/,
    updatedAt: /Z$/,
  })

  const projectId = (await call('POST', '/api/v1/projects', { name: 'p' })).body.data.id
  const agentId = (
    await call('POST', '/api/v1/agents', { name: 'a', systemPrompt: 'Be brief.', config: { autonomyLevel: 'low' } })
  ).body.data.id
  const bound = await call('POST', '/api/v1/chat/sessions', { title: '  Planning ', agentId, projectId })
  t.match(bound.body.data, { title: 'Planning', agentId, projectId })
  t.same((await call('GET', `/api/v1/chat/sessions/${bound.body.data.id}`)).body.data, bound.body.data)

  const renamed = await call('PATCH', `/api/v1/chat/sessions/${bound.body.data.id}`, { title: 'Roadmap' })
  t.equal(renamed.body.data.title, 'Roadmap')
  t.equal(
    (await call('PATCH', `/api/v1/chat/sessions/${bound.body.data.id}`, { title: '  ' })).body.error.code,
    'VALIDATION_ERROR',
  )

  const first = await call('GET', '/api/v1/chat/sessions?limit=1')
  t.equal(first.body.data[0].id, bound.body.data.id, 'newest first')
  const second = await call('GET', `/api/v1/chat/sessions?limit=1&cursor=${first.body.meta.nextCursor}`)
  t.equal(second.body.data[0].id, untitled.body.data.id)
  t.equal(second.body.meta.nextCursor, null)

  const messages = await call('GET', `/api/v1/chat/sessions/${bound.body.data.id}/messages`)
  t.same(messages.body.data, [])

  // Deleting the agent unbinds the session; the conversation stays.
  await call('DELETE', `/api/v1/agents/${agentId}`)
  t.equal((await call('GET', `/api/v1/chat/sessions/${bound.body.data.id}`)).body.data.agentId, null)

  t.equal((await call('DELETE', `/api/v1/chat/sessions/${bound.body.data.id}`)).status, 200)
  t.equal((await call('GET', `/api/v1/chat/sessions/${bound.body.data.id}`)).status, 404)
})

t.test("another tenant's agent or project cannot be bound: 404, and nothing half-written", async (t) => {
  const a = await h.tenant()
  const b = await h.tenant()
  const agentOfA = (
    await a.call('POST', '/api/v1/agents', { name: 'a', systemPrompt: '', config: { autonomyLevel: 'low' } })
  ).body.data.id
  const projectOfA = (await a.call('POST', '/api/v1/projects', { name: 'p' })).body.data.id
  t.match((await b.call('POST', '/api/v1/chat/sessions', { agentId: agentOfA })).body.error, {
    code: 'RESOURCE_NOT_FOUND',
    details: { resource: 'agent' },
  })
  t.match((await b.call('POST', '/api/v1/chat/sessions', { projectId: projectOfA })).body.error, {
    code: 'RESOURCE_NOT_FOUND',
    details: { resource: 'project' },
  })
  t.equal((await b.call('GET', '/api/v1/chat/sessions')).body.data.length, 0)
})

t.test('chat needs its own permissions', async (t) => {
  const { call } = await h.tenant()
  const key = await call('POST', '/api/v1/api-keys', { name: 'reader', type: 'sdk', permissions: ['chat:read'] })
  const reader = caller(h.app, key.body.data.key)
  t.equal((await reader('GET', '/api/v1/chat/sessions')).status, 200)
  const denied = await reader('POST', '/api/v1/chat/sessions', { title: 'x' })
  t.equal(denied.status, 403)
  t.match(denied.body.error, { code: 'FORBIDDEN', details: { required: 'chat:write' } })
  const none = caller(
    h.app,
    (await call('POST', '/api/v1/api-keys', { name: 'projects', type: 'sdk', permissions: ['projects:read'] })).body
      .data.key,
  )
  t.match((await none('GET', '/api/v1/chat/sessions')).body.error, {
    code: 'FORBIDDEN',
    details: { required: 'chat:read' },
  })
})

t.test('the plan bounds the number of sessions', async (t) => {
  const { tenantId, call } = await h.tenant('free')
  // Fill to one short of the free plan's 100 directly, then the API takes the last one and refuses the next.
  await h.platform.db.tenant(
    tenantId,
    (sql) =>
      sql`insert into chat_sessions (id, tenant_id, title) select gen_random_uuid(), ${tenantId}, 'filled' from generate_series(1, 99)`,
  )
  t.equal((await call('POST', '/api/v1/chat/sessions')).status, 201)
  const over = await call('POST', '/api/v1/chat/sessions')
  t.equal(over.status, 413)
  t.match(over.body.error, { code: 'QUOTA_EXCEEDED', details: { limit: 100, used: 100 } })
})
