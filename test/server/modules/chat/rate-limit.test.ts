// Messages and streams count against the API rate limit like any other request: a stream is one
// request when it opens (and again at each reconnect), a message one when it is posted. Past the
// limit both are 429 RATE_LIMIT_EXCEEDED with the X-RateLimit-* headers and Retry-After, while
// another tenant's key goes on as before.
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { tenantWithLlm } from '../../../helpers/agents.js'

const MAX = 5
const WINDOW = 3600 // longer than the test, so that the window never turns in the middle of it
const h = await testApp(
  t,
  { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32', RATE_LIMIT_MAX: String(MAX), RATE_LIMIT_WINDOW_SECONDS: String(WINDOW) },
  { jobs: { pollMs: 50 } },
)
await h.app.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
const llm = await fakeLlm(t)

/**
 * Opens a session's stream and closes it once the answer's head is in: its status and headers, and its body when it is
 * not a stream.
 */
async function openStream(apiKey: string, sessionId: string) {
  const ac = new AbortController()
  const res = await fetch(`${base}/api/v1/chat/sessions/${sessionId}/stream`, {
    headers: { authorization: `Bearer ${apiKey}` },
    signal: ac.signal,
  })
  const streaming = res.headers.get('content-type')?.startsWith('text/event-stream') ?? false
  const body = streaming ? null : await res.json()
  ac.abort()
  return {
    status: res.status,
    headers: Object.fromEntries(res.headers) as Record<string, string | undefined>,
    streaming,
    body: body as { error: { code: string; details: Record<string, unknown> } } | null,
  }
}

t.test(
  'messages and streams count against the limit and are refused past it; another tenant is unaffected',
  async (t) => {
    const a = await tenantWithLlm(h, llm) // 1: setting its model
    const b = await h.tenant()
    const sessionId = (await a.call('POST', '/api/v1/chat/sessions')).body.data.id // 2

    const opened = await openStream(a.apiKey, sessionId) // 3
    t.equal(opened.status, 200)
    t.ok(opened.streaming)
    t.equal(opened.headers['x-ratelimit-limit'], String(MAX), 'a stream carries the headers')
    t.equal(opened.headers['x-ratelimit-remaining'], String(MAX - 3), 'and opening it counted')

    llm.push({ text: 'counted' })
    const posted = await a.call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'one' }) // 4
    t.equal(posted.status, 201)
    t.equal(posted.headers['x-ratelimit-remaining'], String(MAX - 4), 'posting a message counted')
    t.equal(
      (await openStream(a.apiKey, sessionId)).headers['x-ratelimit-remaining'],
      '0',
      'so did opening the stream again',
    ) // 5

    const refusals = {
      'POST messages': await a.call('POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'two' }),
      'GET stream': await openStream(a.apiKey, sessionId),
    }
    for (const [name, r] of Object.entries(refusals)) {
      t.equal(r.status, 429, name)
      t.match(r.body!.error, { code: 'RATE_LIMIT_EXCEEDED', details: { limit: MAX, windowSeconds: WINDOW } }, name)
      t.equal(r.headers['x-ratelimit-limit'], String(MAX), `${name}: X-RateLimit-Limit`)
      t.equal(r.headers['x-ratelimit-remaining'], '0', `${name}: X-RateLimit-Remaining`)
      const reset = Number(r.headers['x-ratelimit-reset'])
      const retry = Number(r.headers['retry-after'])
      t.ok(reset >= 1 && reset <= WINDOW, `${name}: X-RateLimit-Reset in seconds (${reset})`)
      t.ok(retry >= 1 && retry <= WINDOW, `${name}: Retry-After in seconds (${retry})`)
    }
    t.notOk(refusals['GET stream'].streaming, 'the refused stream is an error in the envelope, not a stream')

    // The refused message was not taken: only the first one is there (its reply settled or not).
    const stored = await h.platform.db.tenant(
      a.tenantId,
      (sql) =>
        sql<{ content: string }[]>`select content from chat_messages where session_id = ${sessionId} and role = 'user'`,
    )
    t.same(
      stored.map((m) => m.content),
      ['one'],
    )

    // Another tenant's key has its own budget.
    const other = await b.call('POST', '/api/v1/chat/sessions')
    t.equal(other.status, 201)
    t.equal(other.headers['x-ratelimit-remaining'], String(MAX - 1))
    t.equal((await openStream(b.apiKey, other.body.data.id)).status, 200)
  },
)
