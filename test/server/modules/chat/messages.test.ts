// Chat messages and their streamed replies: generated on the job runner by the tenant's model (the
// suite's OpenAI-compatible server), followed over real HTTP as Server-Sent Events, resumed with
// Last-Event-ID, and saved whole whether or not anyone is listening. Another tenant's session is 404
// on every route, the stream included.
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { testApp, type Caller } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { tenantWithLlm as llmTenant } from '../../../helpers/agents.js'
import { sseParser } from '../../../helpers/sse.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
await h.app.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
const llm = await fakeLlm(t)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Event {
  id: number
  event: string
  data: Record<string, unknown>
}

/** Reads a session's stream over HTTP until `stop` says so; the events it got. */
async function follow(
  apiKey: string,
  sessionId: string,
  stop: (e: Event, all: Event[]) => boolean,
  lastEventId?: number,
): Promise<Event[]> {
  const ac = new AbortController()
  const res = await fetch(`${base}/api/v1/chat/sessions/${sessionId}/stream`, {
    headers: {
      authorization: `Bearer ${apiKey}`,
      ...(lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {}),
    },
    signal: ac.signal,
  })
  if (res.status !== 200) throw new Error(`stream: ${res.status}`)
  const events: Event[] = []
  let stopped = false
  const parse = sseParser((m) => {
    if (stopped || m.id === undefined) return
    const e = { id: Number(m.id), event: m.event ?? 'message', data: JSON.parse(m.data) }
    events.push(e)
    stopped = stop(e, events)
  })
  const decoder = new TextDecoder()
  const reader = res.body!.getReader()
  while (!stopped) {
    const { value, done } = await reader.read()
    if (done) break
    parse(decoder.decode(value, { stream: true }))
  }
  if (stopped) ac.abort()
  return events
}

/** A tenant whose model is this file's fake provider. */
const tenantWithLlm = () => llmTenant(h, llm)

/** Every message of the session, once no reply is generating (all pages: a page may end at its byte budget). */
async function settled(call: Caller, sessionId: string) {
  for (let i = 0; i < 400; i++) {
    const all: { status: string; role: string; content: string }[] = []
    let cursor: string | null = null
    do {
      const r = await call('GET', `/api/v1/chat/sessions/${sessionId}/messages${cursor ? `?cursor=${cursor}` : ''}`)
      all.push(...r.body.data)
      cursor = r.body.meta.nextCursor
    } while (cursor)
    if (all.every((m) => m.status !== 'generating')) return all
    await sleep(25)
  }
  throw new Error('the reply did not finish')
}

t.test('a reply streams, is saved whole, and a stream resumed by Last-Event-ID continues exactly', async (t) => {
  const { apiKey, call } = await tenantWithLlm()
  const agentId = (
    await call('POST', '/api/v1/agents', {
      name: 'Guide',
      systemPrompt: 'You are a museum guide.',
      config: { autonomyLevel: 'low' },
    })
  ).body.data.id
  const sessionId = (await call('POST', '/api/v1/chat/sessions', { agentId })).body.data.id
  const reply = 'The atrium is the central hall of a Roman house, open to the sky in the middle.'
  const before = llm.requests.length
  llm.push({ text: reply, chunkDelayMs: 15, usage: { input: 30, output: 18 } })

  const posted = await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'What is an atrium?' })
  t.equal(posted.status, 201)
  t.match(posted.body.data, {
    message: { role: 'user', content: 'What is an atrium?', status: 'completed' },
    replyId: String,
  })
  const replyId = posted.body.data.replyId
  const busy = await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'and?' })
  t.equal(busy.status, 409, 'one reply at a time')
  t.match(busy.body.error, { code: 'CONFLICT', details: { replyId } })

  // Disconnect after a few deltas, then resume from the last one seen.
  const first = await follow(apiKey, sessionId, (_e, all) => all.filter((x) => x.event === 'message.delta').length >= 3)
  const rest = await follow(apiKey, sessionId, (e) => e.event === 'message.completed', first.at(-1)!.id)
  const all = [...first, ...rest]
  t.same(
    all.map((e) => e.id),
    all.map((_, i) => i + 1),
    'numbered without gaps or repeats across the reconnect',
  )
  const deltas = all.filter((e) => e.event === 'message.delta')
  t.ok(deltas.every((e) => e.data.messageId === replyId))
  t.equal(deltas.map((e) => e.data.delta).join(''), reply, 'the deltas make up the reply')
  t.match(all.at(-1)!.data, {
    message: {
      id: replyId,
      role: 'assistant',
      content: reply,
      status: 'completed',
      usage: { inputTokens: 30, outputTokens: 18 },
    },
  })

  const messages = await settled(call, sessionId)
  t.match(messages, [{ role: 'user' }, { id: replyId, content: reply, status: 'completed' }])
  t.equal((await call('GET', `/api/v1/chat/sessions/${sessionId}`)).body.data.messageCount, 2)
  const sent = llm.requests[before]!.body.messages
  t.match(
    sent,
    [
      { role: 'system', content: 'You are a museum guide.' },
      { role: 'user', content: 'What is an atrium?' },
    ],
    "the agent's prompt, then the history",
  )

  // The next message carries the history; nobody listens, and the reply is saved all the same.
  llm.push({ text: 'About 2,000 years ago.' })
  t.equal(
    (await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'How old is the idea?' })).status,
    201,
  )
  const after = await settled(call, sessionId)
  t.equal(after.at(-1)!.content, 'About 2,000 years ago.')
  t.same(
    llm.requests.at(-1)!.body.messages.map((m: { role: string }) => m.role),
    ['system', 'user', 'assistant', 'user'],
  )
})

t.test('a stream that joins mid-reply gets what was sent before it, then the rest as it comes, in order', async (t) => {
  const { apiKey, call } = await tenantWithLlm()
  const sessionId = (await call('POST', '/api/v1/chat/sessions', {})).body.data.id
  const reply = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ')
  llm.push({ text: reply, chunkDelayMs: 10 })
  t.equal((await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'Count.' })).status, 201)
  // The first stream watches from the start; the second opens once a few deltas have gone out
  // live, before their rows are written: what it missed comes from the rows, then it goes live.
  let joined: Promise<Event[]> | null = null
  const early = await follow(apiKey, sessionId, (e, all) => {
    if (!joined && all.length >= 3) joined = follow(apiKey, sessionId, (x) => x.event === 'message.completed')
    return e.event === 'message.completed'
  })
  const late = await joined!
  for (const events of [early, late]) {
    t.same(
      events.map((e) => e.id),
      events.map((_, i) => i + 1),
      'every event once, in order',
    )
    t.equal(
      events
        .filter((e) => e.event === 'message.delta')
        .map((e) => e.data.delta)
        .join(''),
      reply,
    )
  }
})

t.test('a provider failure ends the reply failed with an error event', async (t) => {
  const { apiKey, call } = await tenantWithLlm()
  const sessionId = (await call('POST', '/api/v1/chat/sessions')).body.data.id
  llm.push({ status: 401 })
  const { replyId } = (await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'hi' })).body.data
  const events = await follow(apiKey, sessionId, (e) => e.event === 'error')
  t.match(events.at(-1), { event: 'error', data: { messageId: replyId, code: 'LLM_KEY_REJECTED' } })
  const messages = await settled(call, sessionId)
  t.match(messages.at(-1), { id: replyId, status: 'failed', error: { code: 'LLM_KEY_REJECTED' } })
  t.equal(
    (await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'again' })).status,
    201,
    'the session is free again',
  )
  await settled(call, sessionId)
})

t.test('deleting a session ends the streams that follow it; a reconnect is 404', async (t) => {
  const { apiKey, call } = await tenantWithLlm()
  const sessionId = (await call('POST', '/api/v1/chat/sessions')).body.data.id
  llm.push({ text: 'Soon gone.' })
  await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'hi' })
  await settled(call, sessionId)
  let caughtUp!: () => void
  const seen = new Promise<void>((r) => (caughtUp = r))
  // Never stops by itself: it returns when the server ends the stream.
  const following = follow(apiKey, sessionId, (e) => {
    if (e.event === 'message.completed') caughtUp()
    return false
  })
  await seen
  t.equal((await call('DELETE', `/api/v1/chat/sessions/${sessionId}`)).status, 200)
  const events = await following
  t.equal(events.at(-1)!.event, 'message.completed', 'the stream ended, after everything it had')
  const again = await fetch(`${base}/api/v1/chat/sessions/${sessionId}/stream`, {
    headers: { authorization: `Bearer ${apiKey}`, 'last-event-id': String(events.at(-1)!.id) },
  })
  t.equal(again.status, 404, 'a reconnect is 404')
  t.match(await again.json(), { error: { code: 'RESOURCE_NOT_FOUND' } })
})

t.test(
  'deleting a session while its reply generates stops the model call instead of letting it run to the end',
  async (t) => {
    let written = 0
    const counting = await fakeLlm(t, { onChunk: () => written++ })
    const { call } = await llmTenant(h, counting)
    const sessionId = (await call('POST', '/api/v1/chat/sessions')).body.data.id
    let deleted!: () => void
    const gone = new Promise<void>((r) => (deleted = r))
    const pieces = 300
    // Held after a few pieces until the session is gone; then the rest would take about 1.5 s.
    counting.push({
      text: Array.from({ length: pieces }, (_, i) => `w${i}`).join(' '),
      chunkDelayMs: 5,
      hold: (i) => (i === 3 ? gone : undefined),
    })
    const { replyId } = (await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'Go on.' })).body
      .data
    while (written < 3) await sleep(10)
    t.equal((await call('DELETE', `/api/v1/chat/sessions/${sessionId}`)).status, 200)
    deleted()
    // The reply's next write fails (its session is gone), which aborts the call; the retry finds nothing to finish.
    let status = ''
    for (let i = 0; i < 600 && status !== 'completed' && status !== 'failed'; i++) {
      await sleep(25)
      status =
        (
          await h.platform.db.sql<
            { status: string }[]
          >`select status from jobs where queue = 'chat.reply' and payload->>'replyId' = ${replyId}`
        )[0]?.status ?? ''
    }
    t.equal(status, 'completed')
    t.ok(written < pieces, `the provider stopped being read after ${written} of ${pieces} pieces`)
    t.equal((await call('GET', `/api/v1/chat/sessions/${sessionId}/messages`)).status, 404)
  },
)

t.test('refusals: no model, too long, blank', async (t) => {
  const bare = await h.tenant('free')
  const s = (await bare.call('POST', '/api/v1/chat/sessions')).body.data.id
  const unconfigured = await bare.call('POST', `/api/v1/chat/sessions/${s}/messages`, { content: 'hi' })
  t.equal(unconfigured.status, 409)
  t.equal(unconfigured.body.error.code, 'LLM_NOT_CONFIGURED')
  const long = await bare.call('POST', `/api/v1/chat/sessions/${s}/messages`, { content: 'x'.repeat(4001) })
  t.equal(long.status, 413)
  t.match(long.body.error, { code: 'PAYLOAD_TOO_LARGE', details: { limit: 4000 } })
  t.equal(
    (await bare.call('POST', `/api/v1/chat/sessions/${s}/messages`, { content: '   ' })).body.error.code,
    'VALIDATION_ERROR',
  )
  t.same((await bare.call('GET', `/api/v1/chat/sessions/${s}/messages`)).body.data, [], 'nothing was written')
})

t.test(
  "a message as the specification sends it, with sessionId, content and projectId, binds a session's project",
  async (t) => {
    const { call } = await tenantWithLlm()
    const projectId = (await call('POST', '/api/v1/projects', { name: 'Spec' })).body.data.id
    // A client written from the specification: a session with an empty body, then messages with all three fields.
    const sessionId = (await call('POST', '/api/v1/chat/sessions', {})).body.data.id
    llm.push({ text: 'Hello from the spec.' })
    const sent = await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, {
      sessionId,
      content: 'Hello',
      projectId,
    })
    t.equal(sent.status, 201)
    t.same(Object.keys(sent.body.data), ['message', 'replyId'], 'the answer keeps its fields')
    t.match(sent.body.data.message, { sessionId, role: 'user', content: 'Hello', status: 'completed' })
    t.match((await call('GET', `/api/v1/chat/sessions/${sessionId}`)).body.data, { projectId, messageCount: 2 })
    await settled(call, sessionId)

    // The same project again, the session's id in capitals (the same UUID), or neither field: taken.
    llm.push({ text: 'Again.' })
    const again = await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, {
      sessionId: sessionId.toUpperCase(),
      content: 'Again',
      projectId: projectId.toUpperCase(),
    })
    t.equal(again.status, 201)
    await settled(call, sessionId)
    llm.push({ text: 'Plain.' })
    t.equal((await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'Plain' })).status, 201)
    await settled(call, sessionId)
    t.equal((await call('GET', `/api/v1/chat/sessions/${sessionId}`)).body.data.projectId, projectId)
  },
)

t.test(
  "a message's sessionId must be the path's, its projectId the tenant's and the session's: refused, nothing written",
  async (t) => {
    const a = await tenantWithLlm()
    const b = await tenantWithLlm()
    const projectOfA = (await a.call('POST', '/api/v1/projects', { name: 'A' })).body.data.id
    const projectOfB = (await b.call('POST', '/api/v1/projects', { name: 'B' })).body.data.id
    const otherOfB = (await b.call('POST', '/api/v1/projects', { name: 'B2' })).body.data.id
    const unbound = (await b.call('POST', '/api/v1/chat/sessions')).body.data.id
    const bound = (await b.call('POST', '/api/v1/chat/sessions', { projectId: projectOfB })).body.data.id
    const modelCalls = llm.requests.length
    const send = (id: string, body: Record<string, unknown>) =>
      b.call('POST', `/api/v1/chat/sessions/${id}/messages`, { content: 'hi', ...body })

    const mismatch = await send(unbound, { sessionId: bound })
    t.equal(mismatch.status, 400)
    t.match(mismatch.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'body.sessionId' }] } })

    const foreign = await send(unbound, { sessionId: unbound, projectId: projectOfA })
    t.equal(foreign.status, 404, "another tenant's project is as one that does not exist")
    t.match(foreign.body.error, { code: 'RESOURCE_NOT_FOUND', details: { resource: 'project', id: projectOfA } })
    const ghost = await send(unbound, { projectId: randomUUID() })
    t.match(ghost.body.error, { code: 'RESOURCE_NOT_FOUND', details: { resource: 'project' } })
    // The same refusal a session's creation gives.
    t.match((await b.call('POST', '/api/v1/chat/sessions', { projectId: projectOfA })).body.error, {
      code: 'RESOURCE_NOT_FOUND',
      details: { resource: 'project', id: projectOfA },
    })

    const moved = await send(bound, { projectId: otherOfB })
    t.equal(moved.status, 400)
    t.match(moved.body.error, {
      code: 'VALIDATION_ERROR',
      message: /belongs to project/,
      details: { errors: [{ field: 'body.projectId' }], projectId: projectOfB },
    })

    const unknown = await send(unbound, { sessionId: unbound, senderName: 'x' })
    t.equal(unknown.status, 400)
    t.match(unknown.body.error, {
      code: 'VALIDATION_ERROR',
      details: { errors: [{ field: 'body.senderName', message: 'is not a known field' }] },
    })

    for (const id of [unbound, bound]) {
      t.same((await b.call('GET', `/api/v1/chat/sessions/${id}/messages`)).body.data, [], 'no message was saved')
      t.match((await b.call('GET', `/api/v1/chat/sessions/${id}`)).body.data, { messageCount: 0 })
    }
    t.equal((await b.call('GET', `/api/v1/chat/sessions/${unbound}`)).body.data.projectId, null, 'nor a project bound')
    t.equal((await b.call('GET', `/api/v1/chat/sessions/${bound}`)).body.data.projectId, projectOfB)
    t.equal(llm.requests.length, modelCalls, 'and no model called')
  },
)

t.test("another tenant's session is 404 on every route, the stream included, and stays as it was", async (t) => {
  const a = await tenantWithLlm()
  const b = await tenantWithLlm() // its own model configured: a message would otherwise be taken
  const sessionId = (await a.call('POST', '/api/v1/chat/sessions', { title: 'mine' })).body.data.id
  llm.push({ text: 'A reply of my own.' })
  t.equal((await a.call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'hello' })).status, 201)
  const events = await follow(a.apiKey, sessionId, (e) => e.event === 'message.completed')
  const messages = await settled(a.call, sessionId)
  const session = (await a.call('GET', `/api/v1/chat/sessions/${sessionId}`)).body.data
  const modelCalls = llm.requests.length

  // Answered exactly as a session that does not exist is (only the id differs).
  const ghost = randomUUID()
  const routes = (id: string) =>
    [
      ['GET', `/api/v1/chat/sessions/${id}`],
      ['PATCH', `/api/v1/chat/sessions/${id}`, { title: 'theirs' }],
      ['DELETE', `/api/v1/chat/sessions/${id}`],
      ['GET', `/api/v1/chat/sessions/${id}/messages`],
      ['POST', `/api/v1/chat/sessions/${id}/messages`, { content: 'hi from B' }],
    ] as const
  const stream = (id: string, lastEventId?: string) =>
    fetch(`${base}/api/v1/chat/sessions/${id}/stream`, {
      headers: { authorization: `Bearer ${b.apiKey}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    })
  for (const [i, [method, url, body]] of routes(sessionId).entries()) {
    const r = await b.call(method, url, body)
    t.equal(r.status, 404, `${method} ${url}`)
    t.match(r.body.error, { code: 'RESOURCE_NOT_FOUND', details: { resource: 'session', id: sessionId } })
    const [, ghostUrl, ghostBody] = routes(ghost)[i]!
    t.equal(
      JSON.stringify(r.body.error),
      JSON.stringify((await b.call(method, ghostUrl, ghostBody)).body.error).replaceAll(ghost, sessionId),
      'as for no session at all',
    )
  }
  for (const lastEventId of [undefined, '1']) {
    const r = await stream(sessionId, lastEventId)
    t.equal(r.status, 404, `GET .../stream${lastEventId ? ' with Last-Event-ID' : ''}`)
    t.match(r.headers.get('content-type'), /^application\/json/, 'an error in the envelope, not a stream')
    const error = ((await r.json()) as { error: unknown }).error
    t.match(error, { code: 'RESOURCE_NOT_FOUND', details: { resource: 'session', id: sessionId } })
    const none = ((await (await stream(ghost, lastEventId)).json()) as { error: unknown }).error
    t.equal(JSON.stringify(error), JSON.stringify(none).replaceAll(ghost, sessionId), 'as for no session at all')
  }
  t.same((await b.call('GET', '/api/v1/chat/sessions')).body.data, [], 'B lists none of it')

  // Nothing of A's changed: the session, its messages, its stream; no model call was made for B.
  t.same((await a.call('GET', `/api/v1/chat/sessions/${sessionId}`)).body.data, session)
  t.same((await a.call('GET', `/api/v1/chat/sessions/${sessionId}/messages`)).body.data, messages)
  t.same(await follow(a.apiKey, sessionId, (e) => e.id === events.at(-1)!.id), events)
  t.equal(llm.requests.length, modelCalls)
})

t.test('a page of messages stops at its byte budget and goes on with the next cursor', async (t) => {
  const { call } = await tenantWithLlm()
  const sessionId = (await call('POST', '/api/v1/chat/sessions')).body.data.id
  // Five replies of 900,000 characters (one piece each): 4.5 MB of text, over a page's 4 MiB.
  for (let i = 0; i < 5; i++) {
    llm.push({ text: `${i}`.repeat(900_000) })
    t.equal((await call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: `long ${i}` })).status, 201)
    await settled(call, sessionId)
  }
  const first = await call('GET', `/api/v1/chat/sessions/${sessionId}/messages?limit=200`)
  t.ok(
    first.body.data.length < 10,
    `the page holds ${first.body.data.length} of 10 messages (${first.raw.length} bytes)`,
  )
  t.ok(first.body.meta.nextCursor, 'and says where to go on')
  const all = [...first.body.data]
  for (let cursor = first.body.meta.nextCursor; cursor;) {
    const next = await call('GET', `/api/v1/chat/sessions/${sessionId}/messages?limit=200&cursor=${cursor}`)
    all.push(...next.body.data)
    cursor = next.body.meta.nextCursor
  }
  t.same(
    all.map((m: { role: string; content: string }) => (m.role === 'user' ? m.content : m.content.length)),
    ['long 0', 900_000, 'long 1', 900_000, 'long 2', 900_000, 'long 3', 900_000, 'long 4', 900_000],
    'every message once, oldest first',
  )
})
