// Traces as a real OpenTelemetry Collector receives them (test/helpers/otel-collector.ts), from a
// server that is air-gapped with the collector inside OUTBOUND_ALLOWED_NETWORKS: queries inside
// transactions and reserved connections are spans, a failing one says its SQLSTATE and nothing it
// was given; a job's trace links to the request that queued it; a model call's span has the
// provider, the model and the tokens, and no key, prompt, reply or base URL. An endpoint the
// outbound policy refuses stops the start, saying why.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import { tenantWithLlm } from '../../helpers/agents.js'
import { fakeLlm } from '../../helpers/fake-llm.js'
import { loggedApp, needsCollector, otelCollector, type ReceivedSpan } from '../../helpers/otel-collector.js'
import { freePort, suffix, testPlatform } from '../../helpers/platform.js'
import { compilePolicy } from '../../../server/platform/outbound.js'
import { errorCode, linkTo, openTracing } from '../../../server/platform/tracing.js'

const CLIENT = 3
const CONSUMER = 5
const ERROR = 2

t.test('traced, air-gapped', { skip: needsCollector }, async (t) => {
  const collector = await otelCollector(t)
  const h = await loggedApp(
    t,
    {
      TRACING_OTLP_ENDPOINT: collector.endpoint,
      AIR_GAPPED: 'true',
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
      TRACING_SERVICE_NAME: 'atrium-platform-test',
    },
    { jobs: { pollMs: 50 } },
  )
  const { tracing, db } = h.platform
  t.equal(tracing.enabled, true)

  t.test(
    'queries in a transaction and on a reserved connection are children; a failure says its code only',
    async (t) => {
      const secret = `value-${suffix()}`
      const parent = await tracing.tracer.startActiveSpan('test parent', async (span) => {
        await db.sql.begin(async (tx) => {
          await tx`select ${secret}::text as inside_begin`
        })
        const reserved = await db.sql.reserve()
        try {
          await reserved`select ${secret}::text as on_reserved`
        } finally {
          reserved.release()
        }
        await t.rejects(
          db.system((sql) => sql`select * from no_such_table where id = ${secret}`),
          { code: '42P01' },
        )
        span.end()
        return span.spanContext()
      })
      const spans = await collector.until((s) => s.some((x) => x.spanId === parent.spanId))
      const children = spans.filter((s) => s.parentSpanId === parent.spanId)
      const text = (s: ReceivedSpan) => String(s.attributes['db.query.text'] ?? '')
      t.ok(
        children.some((s) => text(s).includes('inside_begin')),
        "sql.begin's queries",
      )
      t.ok(
        children.some((s) => text(s).includes('on_reserved')),
        "a reserved connection's queries",
      )
      const failed = children.find((s) => text(s).includes('no_such_table'))
      t.match(failed, {
        kind: CLIENT,
        status: { code: ERROR },
        attributes: { 'error.type': '42P01', 'db.response.status_code': '42P01', 'db.system.name': 'postgresql' },
      })
      t.notOk(failed?.status.message, 'no message: a database error can quote what it was given')
      t.notOk(collector.raw().includes(secret), 'no value given to a query is in any span')
    },
  )

  t.test(
    "a job's span links to the request that queued it; its model call has gen_ai attributes and no secret",
    async (t) => {
      const llm = await fakeLlm(t)
      const key = `sk-trace-${suffix()}-0123456789`
      const tn = await tenantWithLlm(h, llm, 'enterprise', key)
      const session = (await tn.call('POST', '/api/v1/chat/sessions', {})).body.data.id as string
      const [prompt, reply] = [`What is hidden ${suffix()}?`, `Nothing is hidden ${suffix()}.`]
      llm.push({ text: reply, usage: { input: 30, output: 18 } })
      const requestId = `chat-${suffix()}`
      const posted = await fetch(`${h.base}/api/v1/chat/sessions/${session}/messages`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tn.apiKey}`,
          'content-type': 'application/json',
          'x-request-id': requestId,
        },
        body: JSON.stringify({ content: prompt }),
      })
      t.equal(posted.status, 201)

      const spans = await collector.until((s) => s.some((x) => x.name === 'chat test-model'))
      const request = spans.find((s) => s.attributes['atrium.request_id'] === requestId)!
      t.ok(request, "the request's span")
      const model = spans.find((s) => s.name === 'chat test-model')!
      const job = spans.find((s) => s.spanId === model.parentSpanId)!
      t.match(job, {
        name: 'job chat.reply',
        kind: CONSUMER,
        parentSpanId: '',
        attributes: { 'atrium.job.queue': 'chat.reply', 'atrium.job.id': String, 'atrium.job.attempt': 1 },
        links: [{ traceId: request.traceId, spanId: request.spanId }],
      })
      t.not(job.traceId, request.traceId, 'a trace of its own, linked')
      t.match(model, {
        kind: CLIENT,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'openai-compatible',
          'gen_ai.system': 'openai-compatible',
          'gen_ai.request.model': 'test-model',
          'gen_ai.usage.input_tokens': 30,
          'gen_ai.usage.output_tokens': 18,
          'atrium.llm.outcome': 'ok',
        },
      })
      t.ok(
        spans.some((s) => s.parentSpanId === job.spanId && s.attributes['db.system.name'] === 'postgresql'),
        "the job's queries are its children",
      )
      const [row] = await db.sql<{ traceparent: string }[]>`select traceparent from jobs where queue = 'chat.reply'`
      t.equal(row?.traceparent, `00-${request.traceId}-${request.spanId}-01`, 'the job row keeps the traceparent')
      const raw = collector.raw()
      for (const [what, value] of <[string, string][]>[
        ['the key', key],
        ['the prompt', prompt],
        ['the reply', reply],
        ["the model's base URL", llm.url],
      ])
        t.notOk(raw.includes(value), `${what} is in no span`)
    },
  )
})

t.test("at any ratio, a job's trace is kept when the span it links to was", { skip: needsCollector }, async (t) => {
  const collector = await otelCollector(t)
  const tracing = await openTracing(
    { TRACING_OTLP_ENDPOINT: collector.endpoint, TRACING_SAMPLE_RATIO: 0, TRACING_SERVICE_NAME: 'atrium-ratio-0' },
    { policy: compilePolicy({ airGapped: false, allowedCidrs: ['127.0.0.0/8'] }), log: pino({ level: 'silent' }) },
  )
  t.teardown(() => tracing.close())
  const linked = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`
  const notSampled = linked.replace(/01$/, '00')
  for (const [name, traceparent] of <[string, string | null][]>[
    ['linked to a kept span', linked],
    ['linked to a dropped span', notSampled],
    ['not linked', null],
  ])
    tracing.tracer.startSpan(name, { root: true, links: linkTo(traceparent) }).end()
  const spans = await collector.until((s) => s.some((x) => x.name === 'linked to a kept span'))
  await new Promise((resolve) => setTimeout(resolve, 1500)) // another batch's time: nothing else comes
  t.same(
    collector.spans().map((x) => x.name),
    ['linked to a kept span'],
    'only the one linked to a kept span, at ratio 0',
  )
  t.equal(spans[0]?.links[0]?.spanId, linked.split('-')[2])
})

t.test('a collector that is away: requests are answered, the log says so once', { skip: needsCollector }, async (t) => {
  const h = await loggedApp(t, {
    TRACING_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
    OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
  })
  const tn = await h.tenant()
  for (let i = 0; i < 3; i++) t.equal((await tn.call('GET', '/api/v1/projects')).status, 200)
  const said = () => h.lines.filter((l) => l.msg.startsWith('traces could not be sent to TRACING_OTLP_ENDPOINT'))
  for (let i = 0; i < 300 && !said().length; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(said().length, 1, 'said once')
  t.match(said()[0], { level: 40, err: String })
  t.equal((await tn.call('GET', '/api/v1/projects')).status, 200, 'and requests go on')
})

t.test('an endpoint the outbound policy refuses stops the start, saying why', async (t) => {
  const log = pino({ level: 'silent' })
  const settings = (endpoint: string) => ({
    TRACING_OTLP_ENDPOINT: endpoint,
    TRACING_SAMPLE_RATIO: 1,
    TRACING_SERVICE_NAME: 'atrium',
  })
  await t.rejects(
    openTracing(settings('http://otel.example.com:4318'), {
      policy: compilePolicy({ airGapped: true, allowedCidrs: ['10.0.0.0/8'], allowedDomains: ['corp.example'] }),
      log,
    }),
    {
      message:
        'TRACING_OTLP_ENDPOINT otel.example.com:4318 may not be called: air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up (to allow it, change OUTBOUND_ALLOWED_DOMAINS)',
    },
  )
  await t.rejects(
    testPlatform(t, { TRACING_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }),
    {
      message:
        'TRACING_OTLP_ENDPOINT 127.0.0.1:4318 may not be called: loopback address outside OUTBOUND_ALLOWED_NETWORKS (to allow it, change OUTBOUND_ALLOWED_NETWORKS)',
    },
    'the server does not start',
  )
  await t.rejects(
    openTracing(settings('http://169.254.169.254'), {
      policy: compilePolicy({ airGapped: false, allowedCidrs: [] }),
      log,
    }),
    { message: 'TRACING_OTLP_ENDPOINT 169.254.169.254 may not be called: metadata addresses are never reachable' },
  )
})

t.test('a failure is named by its code, never by a message that can quote what it was given', async (t) => {
  const reply = Object.assign(
    new Error("WRONGTYPE Operation against a key holding the wrong kind of value 'tenant:42'"),
    {
      name: 'ReplyError',
    },
  )
  t.equal(errorCode(reply), 'WRONGTYPE', "a Redis reply error: Redis's code, not the key it quotes")
  t.equal(errorCode(Object.assign(new Error('duplicate key value (email)=(a@b.c)'), { code: '23505' })), '23505')
  t.equal(errorCode(new TypeError('secret-ish detail')), 'TypeError')
  t.equal(errorCode('a string'), 'Error')
})
