// The chat-history export: the tenant's sessions and messages created in a range of UTC days, as one
// JSON document streamed page by page (pages of 3 here, so every export spans several) as the data of
// the response envelope; metadata
// on request; every rule of the range refused as VALIDATION_ERROR; never another tenant's messages;
// chat:read and export both needed; audited with what was sent; reading follows the reader, stops
// when it goes away, and a fault after the first bytes cuts the response short.
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { v7 } from 'uuid'
import { caller, testApp, type Caller } from '../../../helpers/app.js'
import { chatExportService } from '../../../../server/modules/chat/export-service.js'
import type { Actor } from '../../../../server/domain/actor.js'
import type { Db } from '../../../../server/platform/db.js'

const h = await testApp(t, {}, { chatExportPageRows: 3 })

interface Seeded {
  at: string
  role?: 'user' | 'assistant'
  content?: string
  status?: 'completed' | 'failed' | 'generating'
  error?: { code: string; message: string }
  usage?: { inputTokens: number; outputTokens: number }
}

/** Messages written straight into a session, at the times given (ids time-ordered like the app's). */
async function seed(tenantId: string, sessionId: string, messages: Seeded[]): Promise<string[]> {
  const rows = messages.map((m, i) => ({
    id: v7({ msecs: Date.parse(m.at), seq: i }),
    tenant_id: tenantId,
    session_id: sessionId,
    role: m.role ?? (i % 2 ? 'assistant' : 'user'),
    content: m.content ?? `message at ${m.at}`,
    status: m.status ?? 'completed',
    error: m.error ?? null,
    usage: m.usage ?? null,
    created_at: new Date(m.at),
    completed_at: m.status === 'generating' ? null : new Date(Date.parse(m.at) + 1000),
  }))
  await h.platform.db.tenant(tenantId, async (sql) => {
    for (const r of rows) {
      await sql`insert into chat_messages (id, tenant_id, session_id, role, content, status, error, usage, created_at, completed_at)
                values (${r.id}, ${r.tenant_id}, ${r.session_id}, ${r.role}, ${r.content}, ${r.status},
                        ${r.error ? sql.json(r.error) : null}, ${r.usage ? sql.json(r.usage) : null}, ${r.created_at}, ${r.completed_at})`
    }
    await sql`update chat_sessions set message_count = message_count + ${rows.length} where tenant_id = ${tenantId} and id = ${sessionId}`
  })
  return rows.map((r) => r.id)
}

const session = async (call: Caller, body: Record<string, unknown> = {}): Promise<string> =>
  (await call('POST', '/api/v1/chat/sessions', body)).body.data.id
const exportOf = (call: Caller, start: string, end: string, more: Record<string, unknown> = {}) =>
  call('POST', '/api/v1/chat/export', { dateRange: { start, end }, format: 'json', ...more })
/** The document of an export's answer: its envelope's data (meta checked where the envelope is). */
const documentOf = async (answer: ReturnType<typeof exportOf>) => (await answer).body.data

/** A tenant with one session of `count` messages of `chars` characters each, a second apart on 2026-03-01. */
async function longSession(count: number, chars: number) {
  const tn = await h.tenant()
  const id = await session(tn.call)
  await seed(
    tn.tenantId,
    id,
    Array.from({ length: count }, (_, i) => ({
      at: new Date(Date.parse('2026-03-01T10:00:00Z') + i * 1000).toISOString(),
      content: String(i % 10).repeat(chars),
    })),
  )
  return tn
}
const MARCH_1 = { dateRange: { start: '2026-03-01', end: '2026-03-01' } }

/** A tenantRead that fails as a lost connection does on its nth call (every call when 0). */
const failingOn = (nth: number, tenantRead: Db['tenantRead']): Db['tenantRead'] => {
  let n = 0
  return (tid, q) =>
    ++n === nth || nth === 0
      ? Promise.reject(Object.assign(new Error('connection closed'), { code: 'CONNECTION_CLOSED' }))
      : tenantRead(tid, q)
}

/** The app's database reads replaced for the rest of a test. */
/** Replaces db.tenantRead until the test ends, or until the returned function puts the real one back. */
function replaceTenantRead(t: Test, replace: (real: Db['tenantRead']) => Db['tenantRead']): () => void {
  const db = h.platform.db as { tenantRead: Db['tenantRead'] }
  const real = db.tenantRead
  db.tenantRead = replace(real)
  const restore = () => {
    db.tenantRead = real
  }
  t.teardown(restore)
  return restore
}

t.test('an export holds the sessions with messages in the range, each with those messages oldest first', async (t) => {
  const { tenantId, call } = await h.tenant()
  const first = await session(call, { title: 'First' })
  const second = await session(call, { title: 'Second' })
  const outside = await session(call, { title: 'Only outside the range' })
  const [before, a1, a2, after] = await seed(tenantId, first, [
    { at: '2026-02-28T23:59:59.999Z' },
    { at: '2026-03-01T00:00:00.000Z', content: 'the first day starts at midnight UTC' },
    { at: '2026-03-03T23:59:59.999Z', role: 'assistant', content: 'ünïcödé, "quotes", \\ and a\nnewline' },
    { at: '2026-03-04T00:00:00.000Z' },
  ])
  // More than a page (3) in one session, and pages that end inside a session.
  const b = await seed(
    tenantId,
    second,
    ['01', '01', '02', '02', '02', '03', '03'].map((d, i) => ({ at: `2026-03-${d}T10:00:0${i}.000Z` })),
  )
  await seed(tenantId, outside, [{ at: '2026-01-15T12:00:00Z' }, { at: '2026-04-01T12:00:00Z' }])
  // The tenth message in key order: the fourth page starts with a session.
  const third = await session(call, { title: 'Third' })
  const c = await seed(tenantId, third, [{ at: '2026-03-02T00:00:00Z' }])

  const r = await exportOf(call, '2026-03-01', '2026-03-03')
  t.equal(r.status, 200)
  t.match(r.headers['content-type'], /^application\/json/)
  t.match(r.headers['content-disposition'], `attachment; filename="chat_export_${tenantId}_2026-03-01_2026-03-03.json"`)
  t.equal(r.headers['cache-control'], 'private, no-store')
  t.same(Object.keys(r.body), ['data', 'meta'], 'the envelope: the document as its data, then meta')
  t.match(r.body.meta, { request_id: String, timestamp: /Z$/ })
  t.equal(r.body.meta.request_id, r.headers['x-request-id'], "the request's id")
  const doc = r.body.data
  t.match(doc, {
    format: 1,
    tenantId,
    exportedAt: /Z$/,
    dateRange: { start: '2026-03-01', end: '2026-03-03' },
    counts: { sessions: 3, messages: 10 },
  })
  t.same(
    doc.sessions.map((s: { id: string; title: string }) => [s.id, s.title]),
    [
      [first, 'First'],
      [second, 'Second'],
      [third, 'Third'],
    ],
    'sessions by id, only those with messages in the range',
  )
  t.same(Object.keys(doc.sessions[0]), ['id', 'title', 'createdAt', 'messages'], 'no metadata unless asked')
  const ids = (s: { messages: { id: string }[] }) => s.messages.map((m) => m.id)
  t.same(ids(doc.sessions[0]), [a1, a2], 'both ends of the range are whole UTC days')
  t.notOk(ids(doc.sessions[0]).includes(before!) || ids(doc.sessions[0]).includes(after!))
  t.same(ids(doc.sessions[1]), b, 'oldest first, across pages')
  t.same(ids(doc.sessions[2]), c, 'a page that starts with a session')
  t.same(doc.sessions[0].messages[1], {
    id: a2,
    role: 'assistant',
    content: 'ünïcödé, "quotes", \\ and a\nnewline',
    createdAt: '2026-03-03T23:59:59.999Z',
  })

  const oneDay = await documentOf(exportOf(call, '2026-03-02', '2026-03-02'))
  t.same(
    oneDay.sessions.map((s: { id: string; messages: unknown[] }) => [s.id, s.messages.length]),
    [
      [second, 3],
      [third, 1],
    ],
  )
  const none = await exportOf(call, '2025-03-01', '2025-03-31')
  t.same(none.body.data.sessions, [])
  t.same(none.body.data.counts, { sessions: 0, messages: 0 })
  t.match(none.body.meta, { request_id: String, timestamp: /Z$/ }, 'an empty export is enveloped too')
})

t.test(
  "includeMetadata adds the sessions' bindings and the messages' status, error, usage and completion",
  async (t) => {
    const { tenantId, call } = await h.tenant()
    const agentId = (
      await call('POST', '/api/v1/agents', { name: 'a', systemPrompt: 'Be brief.', config: { autonomyLevel: 'low' } })
    ).body.data.id
    const projectId = (await call('POST', '/api/v1/projects', { name: 'p' })).body.data.id
    const id = await session(call, { title: 'Bound', agentId, projectId })
    const [question, answer, failed] = await seed(tenantId, id, [
      { at: '2026-05-01T08:00:00Z', role: 'user', content: 'hello' },
      { at: '2026-05-01T08:00:01Z', role: 'assistant', content: 'hi', usage: { inputTokens: 12, outputTokens: 3 } },
      {
        at: '2026-05-01T08:00:02Z',
        role: 'assistant',
        content: '',
        status: 'failed',
        error: { code: 'LLM_TIMEOUT', message: 'The model provider did not answer in time' },
      },
    ])
    await seed(tenantId, id, [{ at: '2026-06-01T08:00:00Z' }])
    const s = (await call('GET', `/api/v1/chat/sessions/${id}`)).body.data

    const doc = await documentOf(exportOf(call, '2026-05-01', '2026-05-01', { includeMetadata: true }))
    t.same(doc.sessions[0], {
      id,
      title: 'Bound',
      createdAt: s.createdAt,
      agentId,
      projectId,
      updatedAt: s.updatedAt,
      messageCount: 4,
      messages: [
        {
          id: question,
          role: 'user',
          content: 'hello',
          createdAt: '2026-05-01T08:00:00.000Z',
          status: 'completed',
          error: null,
          usage: null,
          completedAt: '2026-05-01T08:00:01.000Z',
        },
        {
          id: answer,
          role: 'assistant',
          content: 'hi',
          createdAt: '2026-05-01T08:00:01.000Z',
          status: 'completed',
          error: null,
          usage: { inputTokens: 12, outputTokens: 3 },
          completedAt: '2026-05-01T08:00:02.000Z',
        },
        {
          id: failed,
          role: 'assistant',
          content: '',
          createdAt: '2026-05-01T08:00:02.000Z',
          status: 'failed',
          error: { code: 'LLM_TIMEOUT', message: 'The model provider did not answer in time' },
          usage: null,
          completedAt: '2026-05-01T08:00:03.000Z',
        },
      ],
    })
    const plain = await documentOf(exportOf(call, '2026-05-01', '2026-05-01', { includeMetadata: false }))
    t.same(plain.sessions[0].messages[1], {
      id: answer,
      role: 'assistant',
      content: 'hi',
      createdAt: '2026-05-01T08:00:01.000Z',
    })
    const defaulted = await documentOf(
      call('POST', '/api/v1/chat/export', { dateRange: { start: '2026-05-01', end: '2026-05-01' } }),
    )
    t.same(defaulted.sessions, plain.sessions, 'format defaults to json, includeMetadata to false')
  },
)

t.test('every rule of the request is a VALIDATION_ERROR naming its field', async (t) => {
  const { call } = await h.tenant()
  const refused = async (body: unknown, field: string, more: Record<string, unknown> = {}) => {
    const r = await call('POST', '/api/v1/chat/export', body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.match(r.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field }], ...more } }, JSON.stringify(body))
  }
  const range = (start: string, end: string) => ({ dateRange: { start, end } })
  await refused(range('2026-02-30', '2026-03-01'), 'body.dateRange.start')
  await refused(range('2026-02-01', '2025-02-29'), 'body.dateRange.end')
  await refused(range('2026-3-1', '2026-03-02'), 'body.dateRange.start')
  await refused(range('2026-03-01T00:00:00Z', '2026-03-02'), 'body.dateRange.start')
  await refused(range('2026-03-02', '2026-03-01'), 'body.dateRange.start', { rule: 'order' })
  await refused(range('2025-01-01', '2026-01-02'), 'body.dateRange.start', { rule: 'maxDays', limit: 366, days: 367 })
  await refused({ ...range('2026-03-01', '2026-03-02'), format: 'csv' }, 'body.format')
  await refused({ ...range('2026-03-01', '2026-03-02'), includeMetadata: 'yes' }, 'body.includeMetadata')
  await refused({ ...range('2026-03-01', '2026-03-02'), sessions: [] }, 'body.sessions')
  await refused({ dateRange: { start: '2026-03-01' } }, 'body.dateRange.end')
  await refused({}, 'body.dateRange')
  t.same(
    (await call('GET', '/api/v1/audit-log?action=chat.exported')).body.data,
    [],
    'a refused export is not audited: nothing was sent',
  )
  t.equal((await exportOf(call, '2024-01-01', '2024-12-31')).status, 200, '366 days of a leap year')
  t.equal((await exportOf(call, '2025-01-01', '2026-01-01')).status, 200, '366 days')
})

t.test("an export never holds another tenant's sessions or messages", async (t) => {
  const a = await h.tenant()
  const b = await h.tenant()
  const ofA = await session(a.call, { title: 'secret' })
  const messagesOfA = await seed(a.tenantId, ofA, [{ at: '2026-03-01T09:00:00Z', content: 'A only' }])
  const ofB = await session(b.call, { title: 'mine' })
  const messagesOfB = await seed(b.tenantId, ofB, [{ at: '2026-03-01T09:00:00Z', content: 'B only' }])
  const r = await exportOf(b.call, '2026-01-01', '2026-12-31', { includeMetadata: true })
  t.same(
    r.body.data.sessions.map((s: { id: string; messages: { id: string }[] }) => [s.id, s.messages.map((m) => m.id)]),
    [[ofB, messagesOfB]],
  )
  t.notMatch(r.raw.toString(), ofA)
  t.notMatch(r.raw.toString(), messagesOfA[0]!)
  t.notMatch(r.raw.toString(), 'A only')
  t.equal(r.body.data.tenantId, b.tenantId)
})

t.test('an export needs both chat:read and export', async (t) => {
  const { call } = await h.tenant()
  const keyWith = async (permissions: string[]) =>
    caller(
      h.app,
      (await call('POST', '/api/v1/api-keys', { name: permissions.join(' '), type: 'sdk', permissions })).body.data.key,
    )
  const body = { dateRange: { start: '2026-03-01', end: '2026-03-01' } }
  const noExport = await (await keyWith(['chat:read']))('POST', '/api/v1/chat/export', body)
  t.equal(noExport.status, 403)
  t.match(noExport.body.error, { code: 'FORBIDDEN', details: { required: 'export' } })
  const noChat = await (await keyWith(['export', 'projects:read']))('POST', '/api/v1/chat/export', body)
  t.match(noChat.body.error, { code: 'FORBIDDEN', details: { required: 'chat:read' } })
  t.equal((await (await keyWith(['chat:read', 'export']))('POST', '/api/v1/chat/export', body)).status, 200)
})

t.test('an export is audited with its range and counts, never its content', async (t) => {
  const { tenantId, call } = await h.tenant()
  const id = await session(call)
  await seed(tenantId, id, [{ at: '2026-03-01T09:00:00Z', content: 'private words' }, { at: '2026-03-01T09:00:01Z' }])
  t.equal((await exportOf(call, '2026-03-01', '2026-03-31', { includeMetadata: true })).status, 200)
  const events = (await call('GET', '/api/v1/audit-log?action=chat.exported')).body.data
  t.equal(events.length, 1)
  t.match(events[0], {
    action: 'chat.exported',
    actor: { type: 'api_key' },
    details: {
      dateRange: { start: '2026-03-01', end: '2026-03-31' },
      format: 'json',
      includeMetadata: true,
      outcome: 'completed',
      sessions: 1,
      messages: 2,
    },
  })
  t.notMatch(JSON.stringify(events[0]), 'private words')
})

t.test('a fault before the first byte is the error envelope', async (t) => {
  const { call } = await h.tenant()
  const restore = replaceTenantRead(t, (real) => failingOn(0, real))
  const r = await exportOf(call, '2026-03-01', '2026-03-01')
  t.equal(r.status, 503)
  t.match(r.body.error, { code: 'SERVICE_UNAVAILABLE', details: { dependency: 'database' } })
  restore()
  t.same(
    (await call('GET', '/api/v1/audit-log?action=chat.exported')).body.data,
    [],
    'nor one that failed before its first byte',
  )
})

/** A key of the tenant's, as the service sees it. */
const actorIn = (tenantId: string): Actor => ({
  tenantId,
  principal: {
    kind: 'api_key',
    id: v7(),
    tenantId,
    plan: 'enterprise',
    userId: null,
    role: null,
    sessionId: null,
    permissions: new Set(['*']),
  },
  origin: { ip: '127.0.0.1', userAgent: 'test' },
})

// The service on its own: what it reads while a reader takes the document, or goes away, or the
// database fails mid-way.
t.test('the export reads a page only when the reader wants more, and stops when it goes away', async (t) => {
  // 20 messages of 40 KB, 2 a page: every page is more than the stream buffers.
  const { tenantId, call } = await longSession(20, 40_000)
  const reads: number[] = []
  const counting = {
    ...h.platform.db,
    tenantRead: ((tid, q) => (reads.push(Date.now()), h.platform.db.tenantRead(tid, q))) as Db['tenantRead'],
  }
  const service = chatExportService({ db: counting, pageRows: 2 })
  const actor = actorIn(tenantId)
  const warned: unknown[] = []
  const log = { warn: (o: unknown) => void warned.push(o), error: (o: unknown) => void warned.push(o) } as never
  const meta = { request_id: 'req-1', timestamp: '2026-03-02T00:00:00.000Z' }

  const { stream } = await service.open(actor, MARCH_1, log, meta)
  t.equal(reads.length, 1, 'the first page is read before the response starts')
  await new Promise((r) => setTimeout(r, 50))
  t.equal(reads.length, 1, 'nothing more until the reader asks')
  const chunk = await new Promise<Buffer>((resolve) => stream.once('readable', () => resolve(stream.read() as Buffer)))
  t.match(chunk.toString(), /^\{"data":\{"format":1,/)
  await new Promise((r) => setTimeout(r, 50))
  t.ok(reads.length <= 3, `a page or two ahead of the reader at most (read ${reads.length} of 10)`)
  stream.destroy()
  await new Promise((r) => setTimeout(r, 100))
  const stopped = reads.length
  t.ok(stopped < 10, 'reading stopped when the reader went away')
  const events = (await call('GET', '/api/v1/audit-log?action=chat.exported')).body.data
  t.match(events[0].details, { outcome: 'cancelled' })
  t.ok(events[0].details.messages < 20)

  // The whole document, read to the end: all 20, valid JSON.
  reads.length = 0
  const whole = await service.open(actor, MARCH_1, log, meta)
  const chunks: Buffer[] = []
  for await (const c of whole.stream) chunks.push(c as Buffer)
  const { data: doc, meta: closing } = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  t.equal(doc.counts.messages, 20)
  t.equal(doc.sessions[0].messages[19].content, '9'.repeat(40_000))
  t.same(closing, meta, 'meta closes the envelope')
  t.equal(reads.length, 11, 'ten full pages, then one more read finds none')
  t.same(warned, [])
})

t.test('a fault after the first bytes cuts the response short and is logged', async (t) => {
  const { tenantId, call } = await longSession(6, 70_000)
  const failing = { ...h.platform.db, tenantRead: failingOn(2, h.platform.db.tenantRead) }
  const service = chatExportService({ db: failing, pageRows: 2 })
  const actor = actorIn(tenantId)
  const warned: { msg: string; o: Record<string, unknown> }[] = []
  const log = {
    warn: (o: Record<string, unknown>, msg: string) => void warned.push({ o, msg }),
    error: () => {},
  } as never
  const { stream } = await service.open(actor, MARCH_1, log, { request_id: 'req-2', timestamp: '' })
  let text = ''
  const ended = await new Promise<'end' | 'close'>((resolve) => {
    stream.on('data', (c: Buffer) => (text += c.toString()))
    stream.once('end', () => resolve('end'))
    stream.once('close', () => resolve('close'))
    stream.once('error', () => resolve('close'))
  })
  t.equal(ended, 'close', 'destroyed, not ended')
  t.ok(text.length > 0, 'the first bytes went out')
  t.throws(() => JSON.parse(text), 'the JSON is incomplete')
  t.notMatch(text, '"meta"', 'the envelope is not closed')
  t.equal(warned.length, 1)
  t.match(warned[0], { msg: /cut short/, o: { err: { code: 'CONNECTION_CLOSED' }, sessions: 1, messages: 2 } })
  const events = (await call('GET', '/api/v1/audit-log?action=chat.exported')).body.data
  t.match(events[0].details, { outcome: 'failed', messages: 2 })
})

t.test('over HTTP, a fault after the first bytes aborts the transfer rather than ending it', async (t) => {
  const { apiKey } = await longSession(6, 70_000)
  await h.app.listen({ port: 0, host: '127.0.0.1' })
  replaceTenantRead(t, (real) => failingOn(2, real))
  const res = await fetch(`http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/api/v1/chat/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(MARCH_1),
  })
  t.equal(res.status, 200)
  const reader = res.body!.getReader()
  const first = await reader.read()
  t.match(Buffer.from(first.value!).toString(), /^\{"data":\{"format":1,/, 'the envelope began')
  const rest = (async () => {
    for (;;) if ((await reader.read()).done) return
  })()
  await t.rejects(rest, 'the client sees the transfer end before its end')
})
