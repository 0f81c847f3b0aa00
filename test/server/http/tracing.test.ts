// A request's trace, as a real OpenTelemetry Collector receives it (test/helpers/otel-collector.ts):
// one server span named by the route template, whose children are the request's queries (and its
// Redis commands when Redis is configured); the request id in the span, the trace id in the
// request's log line; a caller's W3C traceparent continued; TRACING_SAMPLE_RATIO=0 keeping only
// what a caller asked to be kept; and with no TRACING_OTLP_ENDPOINT, nothing at all.
import { randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import { loggedApp, needsCollector, otelCollector, type ReceivedSpan } from '../../helpers/otel-collector.js'
import { services, suffix } from '../../helpers/platform.js'

const SERVER = 2
const CLIENT = 3

/** Calls the app over HTTP with the tenant's key and a request id of our choosing. */
const requester =
  (base: string, apiKey: string) =>
  async (method: string, path: string, requestId: string, body?: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        'x-request-id': requestId,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? null : JSON.stringify(body),
    })
    return { status: r.status, requestId: r.headers.get('x-request-id'), body: (await r.json()) as any } // eslint-disable-line @typescript-eslint/no-explicit-any -- the API's JSON
  }

const serverSpan = (spans: ReceivedSpan[], requestId: string) =>
  spans.find((s) => s.kind === SERVER && s.attributes['atrium.request_id'] === requestId)
const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId)

t.test('tracing on', { skip: needsCollector }, async (t) => {
  const collector = await otelCollector(t)
  const h = await loggedApp(t, {
    TRACING_OTLP_ENDPOINT: collector.endpoint,
    OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
    TRACING_SERVICE_NAME: 'atrium-http-test',
  })
  const tn = await h.tenant()
  const call = requester(h.base, tn.apiKey)
  const name = `Quarterly plan ${suffix()}`

  t.test("a request's server span has its queries and Redis commands as children, and no value", async (t) => {
    const [post, get] = [`post-${suffix()}`, `get-${suffix()}`]
    const created = await call('POST', '/api/v1/projects', post, { name, language: 'typescript' })
    t.equal(created.status, 201)
    const id = created.body.data.id as string
    t.equal((await call('GET', `/api/v1/projects/${id}`, get)).status, 200)

    const spans = await collector.until((s) => Boolean(serverSpan(s, post) && serverSpan(s, get)))
    const postSpan = serverSpan(spans, post)!
    const getSpan = serverSpan(spans, get)!
    t.match(postSpan, {
      name: 'POST /api/v1/projects',
      attributes: {
        'http.request.method': 'POST',
        'http.route': '/api/v1/projects',
        'http.response.status_code': 201,
        'atrium.request_id': post,
      },
      resource: { 'service.name': 'atrium-http-test', 'service.version': String },
    })
    t.match(getSpan, {
      name: 'GET /api/v1/projects/:id',
      attributes: { 'http.route': '/api/v1/projects/:id', 'http.response.status_code': 200 },
    })
    t.notOk(
      spans.some((s) => s.name.includes(id)),
      'no span is named by a URL: ids stay out',
    )

    // The body arrives on the socket's events: the handler's transaction is still the request's.
    const postChildren = childrenOf(spans, postSpan)
    const statements = postChildren.filter((s) => s.attributes['db.system.name'] === 'postgresql')
    t.ok(statements.length >= 3, `the POST's statements are its children (${statements.map((s) => s.name).join(' ')})`)
    t.ok(
      ['BEGIN', 'INSERT', 'COMMIT'].every((op) => statements.some((s) => s.name === op)),
      "the project's transaction: BEGIN, the insert, COMMIT",
    )
    const insert = statements.find(
      (s) => s.name === 'INSERT' && /into "?projects"? /.test(String(s.attributes['db.query.text'])),
    )
    t.ok(insert, 'the insert into projects')
    t.match(insert?.attributes, { 'db.operation.name': 'INSERT', 'db.query.text': /\$1/, 'db.namespace': String })
    t.equal(insert?.kind, CLIENT)

    const reads = childrenOf(spans, getSpan).filter((s) => s.attributes['db.system.name'] === 'postgresql')
    t.ok(
      reads.some((s) => s.name === 'SELECT' && /from "?projects"?/.test(String(s.attributes['db.query.text']))),
      "the GET's read of the project is its child",
    )
    if (services.redisUrl) {
      const commands = [...postChildren, ...childrenOf(spans, getSpan)].filter(
        (s) => s.attributes['db.system.name'] === 'redis',
      )
      t.ok(
        commands.length >= 1,
        `the rate limit's Redis commands are children (${commands.map((s) => s.name).join(' ')})`,
      )
      for (const c of commands)
        t.same(
          Object.keys(c.attributes).filter((k) => !['db.system.name', 'db.operation.name', 'error.type'].includes(k)),
          [],
          `${c.name}: its name only, never its arguments`,
        )
    }
    const raw = collector.raw()
    for (const [what, value] of <[string, string][]>[
      ['the project name', name],
      ['the project id', id],
      ['the tenant id', tn.tenantId],
      ['the API key', tn.apiKey],
    ])
      t.notOk(raw.includes(value), `${what} is in no span`)
  })

  t.test("the request id is in the span and the envelope; the trace id is in the request's log line", async (t) => {
    const requestId = `missing-${suffix()}`
    const r = await call('GET', `/api/v1/projects/${randomUUID()}`, requestId)
    t.equal(r.status, 404)
    t.equal(r.body.meta.request_id, requestId, "the envelope's meta.request_id")
    t.equal(r.requestId, requestId, 'the X-Request-Id header')
    const span = serverSpan(await collector.until((s) => Boolean(serverSpan(s, requestId))), requestId)!
    t.match(span.attributes, { 'http.response.status_code': 404 })
    t.not(span.status.code, 2, 'a 4xx is not a server error')
    const line = h.lines.find((l) => l.msg === 'request' && l.requestId === requestId)
    t.ok(line, 'the request log line')
    t.equal(line?.trace_id, span.traceId, 'its trace_id is the trace of the span that carries the request id')
  })

  t.test(
    'a stream the client leaves ends its span with its status, and its polls add nothing to the trace',
    async (t) => {
      const sessionId = (await call('POST', '/api/v1/chat/sessions', `session-${suffix()}`, {})).body.data.id as string
      const requestId = `stream-${suffix()}`
      const ac = new AbortController()
      const res = await fetch(`${h.base}/api/v1/chat/sessions/${sessionId}/stream`, {
        headers: { authorization: `Bearer ${tn.apiKey}`, 'x-request-id': requestId },
        signal: ac.signal,
      })
      t.equal(res.status, 200)
      const reader = res.body!.getReader()
      await reader.read() // the stream is open: its first read has been answered
      // Two polls (every 2 s) run while the client stays.
      await new Promise((r) => setTimeout(r, 4500))
      ac.abort()
      await reader.cancel().catch(() => {})
      const spans = await collector.until((s) => Boolean(serverSpan(s, requestId)))
      const span = serverSpan(spans, requestId)!
      t.match(span, { name: 'GET /api/v1/chat/sessions/:id/stream', attributes: { 'http.response.status_code': 200 } })
      t.not(span.status.code, 2, 'a client leaving a stream is not an error')
      // Give the exporter a second to send what the polls would have added.
      await new Promise((r) => setTimeout(r, 1500))
      const inTrace = collector.spans().filter((s) => s.traceId === span.traceId)
      const after = inTrace.filter((s) => BigInt(s.startTimeUnixNano) > BigInt(span.startTimeUnixNano) + 2_000_000_000n)
      t.same(
        after.map((s) => s.name),
        [],
        'nothing in the trace began after the first poll was due',
      )
    },
  )

  t.test("a caller's sampled traceparent is continued", async (t) => {
    const [traceId, parentId] = [randomBytes(16).toString('hex'), randomBytes(8).toString('hex')]
    const requestId = `continued-${suffix()}`
    await call('GET', '/api/v1/projects', requestId, undefined, { traceparent: `00-${traceId}-${parentId}-01` })
    const span = serverSpan(await collector.until((s) => Boolean(serverSpan(s, requestId))), requestId)!
    t.equal(span.traceId, traceId)
    t.equal(span.parentSpanId, parentId)
  })

  t.test("TRACING_SAMPLE_RATIO=0 keeps no new trace, and a caller's sampled one still", async (t) => {
    const none = await loggedApp(t, {
      TRACING_OTLP_ENDPOINT: collector.endpoint,
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
      TRACING_SAMPLE_RATIO: '0',
      TRACING_SERVICE_NAME: 'atrium-ratio-0',
    })
    const tn0 = await none.tenant()
    const call0 = requester(none.base, tn0.apiKey)
    const [dropped, kept] = [`dropped-${suffix()}`, `kept-${suffix()}`]
    await call0('GET', '/api/v1/projects', dropped)
    const traceId = randomBytes(16).toString('hex')
    await call0('GET', '/api/v1/projects', kept, undefined, {
      traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
    })
    const spans = await collector.until((s) => Boolean(serverSpan(s, kept)))
    t.equal(serverSpan(spans, kept)?.traceId, traceId)
    t.notOk(serverSpan(spans, dropped), 'the request without one is not kept')
    t.notOk(
      none.lines.find((l) => l.requestId === dropped)?.trace_id,
      'and its log line has no trace id: there is no trace to find',
    )
  })
})

t.test('tracing off: no SDK, nothing sent, no trace id', { skip: needsCollector }, async (t) => {
  const collector = await otelCollector(t)
  // The SDK's own variable changes nothing: only TRACING_OTLP_ENDPOINT turns tracing on.
  const was = process.env.OTEL_EXPORTER_OTLP_ENDPOINT
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.endpoint
  t.teardown(() => {
    if (was === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = was
  })
  const h = await loggedApp(t, {})
  t.equal(h.platform.tracing.enabled, false)
  const tn = await h.tenant()
  const requestId = `off-${suffix()}`
  const r = await requester(h.base, tn.apiKey)('POST', '/api/v1/projects', requestId, { name: 'untraced' })
  t.equal(r.status, 201)
  const line = h.lines.find((l) => l.msg === 'request' && l.requestId === requestId)
  t.ok(line, 'the request is logged')
  t.notOk('trace_id' in (line ?? {}), 'without a trace id')
  await new Promise((resolve) => setTimeout(resolve, 1500)) // longer than the exporter's batch delay
  t.equal(collector.raw(), '', 'the collector received nothing')
})
