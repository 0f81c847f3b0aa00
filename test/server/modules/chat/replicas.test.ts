// A chat reply across two server processes on one PostgreSQL and one Redis, as two replicas behind a
// Service: the message is posted to A, which generates the reply; the stream is read from B by a
// real EventSource client (the `eventsource` package) through a proxy that cuts the connection in
// the middle of the reply. The client reconnects by itself with Last-Event-ID, and the deltas it
// got make up the saved reply exactly, none twice. A later client that resumes from an event in
// the middle gets exactly the events after it.
import t from 'tap'
import { assertWholeReply, follow, gate } from '../../../helpers/chat-stream.js'
import { adminTenant, serverProcess } from '../../../helpers/cli.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { faultProxy } from '../../../helpers/fault-proxy.js'
import { services, testEnv } from '../../../helpers/platform.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test(
  'posted to one replica, streamed from the other through a cut and a resume: the deltas are the saved reply, none twice',
  {
    skip:
      services.databaseUrl && services.redisUrl
        ? false
        : 'needs TEST_DATABASE_URL and TEST_REDIS_URL: replicas share PostgreSQL and hear each other through Redis pub/sub (without Redis each process has only its own in-process bus)',
  },
  async (t) => {
    const llm = await fakeLlm(t)
    const env = await testEnv(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
    const { apiKey } = await adminTenant(t, env, 'Replicas', 'enterprise')

    // A alone at first, so that A's job runner is the one that takes the reply.
    const a = await serverProcess(t, env)
    const llmSet = await a.call(apiKey, 'PATCH', '/api/v1/tenant/settings/llm', {
      provider: 'openai-compatible',
      baseUrl: llm.url,
      model: 'm',
      apiKey: 'sk-replicas-test-00000',
    })
    t.match(llmSet, { status: 200 }, 'LLM settings saved on A')
    const sessionId = (await a.call(apiKey, 'POST', '/api/v1/chat/sessions', { title: 'replicas' })).body.data.id

    // 80 pieces, some of them several bytes long in UTF-8 (split anywhere by TCP on the way). The
    // reply waits before its first piece until the stream is open on B, and at HOLD_AT until the
    // client has reconnected: the cut lands in the middle of the reply, and the reply goes on
    // after the reconnect, however fast or slow the machine.
    const words = Array.from(
      { length: 80 },
      (_, i) => ['café', 'naïve', 'über', '日本語', '—', 'ø', 'résumé', '🙂', 'atrium', 'hall'][i % 10]! + i,
    )
    const text = words.join(' ') + '.'
    const HOLD_AT = 50
    const streamOpen = gate()
    const reconnected = gate()
    llm.push({
      text,
      chunkDelayMs: 12,
      hold: (piece) => (piece === 0 ? streamOpen.opened : piece === HOLD_AT ? reconnected.opened : undefined),
    })

    const posted = await a.call(apiKey, 'POST', `/api/v1/chat/sessions/${sessionId}/messages`, {
      content: 'Say eighty words.',
    })
    t.match(posted, { status: 201 }, 'message posted to A')
    const replyId: string = posted.body.data.replyId
    for (let i = 0; i < 400 && !llm.requests.length; i++) await sleep(25)
    t.equal(llm.requests.length, 1, "A's job runner called the model")

    const b = await serverProcess(t, env)
    const proxy = await faultProxy(t, { host: '127.0.0.1', port: b.port })
    let cut = false
    let before = { deltas: 0, text: '' }
    const stream = follow(`http://127.0.0.1:${proxy.port}/api/v1/chat/sessions/${sessionId}/stream`, apiKey, {
      until: (e) => e.event === 'message.completed' || e.event === 'error',
      onOpen: (n) => (n === 1 ? streamOpen.open() : reconnected.open()),
      onEvent: (e) => {
        if (cut || e.event !== 'message.delta') return
        before = { deltas: before.deltas + 1, text: before.text + e.data.delta }
        // After a few deltas (or a few words, should the writer have joined many pieces into one).
        if (before.deltas >= 3 || before.text.split(' ').length > 10) {
          cut = true
          proxy.cut()
          proxy.restore()
        }
      },
    })
    const events = await stream.events

    // The client lost its connection mid-reply and resumed on its own, sending the last id it had.
    t.ok(cut, 'the proxy cut the stream')
    t.ok(stream.failures.length >= 1, 'the client saw the connection fail')
    t.equal(stream.requests[0], undefined, 'the first request has no Last-Event-ID')
    t.ok(stream.requests.length >= 2, 'the client reconnected by itself')
    t.equal(
      stream.requests[1],
      String(stream.failures[0]!.lastId),
      'the reconnect carried Last-Event-ID: the last event before the cut',
    )
    t.ok(stream.failures[0]!.lastId > 0, 'some events came before the cut')
    t.ok(
      events.some((e) => e.connection === 1 && e.event === 'message.delta'),
      'deltas before the cut',
    )
    t.ok(
      events.some((e) => e.connection >= 2 && e.event === 'message.delta'),
      'deltas after the reconnect: it happened mid-reply',
    )

    // Each event once, in order, numbered without gaps across the reconnect; the deltas the text.
    const deltas = assertWholeReply(t, events, text)
    t.ok(
      deltas.every((e) => e.data.messageId === replyId),
      'every delta is of the reply',
    )
    const completed = events.at(-1)!

    // The saved reply, read from either replica, is the same text and the same message.
    for (const [name, server] of [
      ['A', a],
      ['B', b],
    ] as const) {
      const messages = (await server.call(apiKey, 'GET', `/api/v1/chat/sessions/${sessionId}/messages`)).body.data
      const saved = messages.find((m: { id: string }) => m.id === replyId)
      t.match(saved, { role: 'assistant', status: 'completed', content: text }, `the saved reply on ${name}`)
      t.same(completed.data.message, saved, `message.completed carries the saved message (${name})`)
    }

    // A client that had seen the events up to one in the middle gets exactly the rest (from A).
    const mid = events[Math.floor(events.length / 2)]!.id
    const resumed = follow(`${a.base}/api/v1/chat/sessions/${sessionId}/stream`, apiKey, {
      lastEventId: mid,
      until: (e) => e.event === 'message.completed' || e.id >= completed.id,
    })
    const rest = await resumed.events
    t.equal(resumed.requests.length, 1, 'one connection')
    t.same(
      rest.map(({ id, event, data }) => ({ id, event, data })),
      events.filter((e) => e.id > mid).map(({ id, event, data }) => ({ id, event, data })),
      `exactly the events after ${mid}`,
    )
  },
)
