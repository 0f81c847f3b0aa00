// platform/llm.ts through the real SDK against the suite's fake provider (test/helpers/fake-llm.ts),
// every connection through the outbound guard.
import pino from 'pino'
import { Registry } from 'prom-client'
import t, { type Test } from 'tap'
import { AppError } from '../../../server/domain/errors.js'
import { findUnstorableText } from '../../../server/domain/text.js'
import {
  createLlm,
  type LlmProvider,
  type LlmRequest,
  type LlmTarget,
  type LlmToolCall,
} from '../../../server/platform/llm.js'
import { compilePolicy, outboundFetch, type OutboundPolicy } from '../../../server/platform/outbound.js'
import { testApp, type TestApp } from '../../helpers/app.js'
import { fakeLlm } from '../../helpers/fake-llm.js'
import { freePort } from '../../helpers/platform.js'

const KEY = 'sk-test-SECRET-0123456789abcdef'
const LOOPBACK: OutboundPolicy = { allowedCidrs: ['127.0.0.1/32'], airGapped: false }

/** An app whose outbound policy admits the fake (it listens on 127.0.0.1), with a capturing log. */
async function setup(
  t: Test,
  o: { policy?: OutboundPolicy; maxRetries?: number; now?: () => number; tenantLabel?: boolean } = {},
) {
  const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
  const lines: string[] = []
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) })
  const registry = new Registry()
  const llm = createLlm({
    db: h.platform.db,
    log,
    registry,
    now: o.now,
    retry: { maxRetries: o.maxRetries ?? 2 },
    tenantLabel: o.tenantLabel,
  })
  // Names (api.openai.com) resolve to a public address without asking DNS: the sandbox may have none.
  const resolver = async () => [{ address: '93.184.216.34', family: 4 }]
  const fetch = outboundFetch(compilePolicy(o.policy ?? LOOPBACK, resolver), {
    stream: true,
    timeoutMs: 10_000,
    maxResponseBytes: 1024 * 1024,
  })
  t.teardown(() => fetch.close())
  const target = (over: Partial<LlmTarget> & { baseUrl: string | null }): LlmTarget => ({
    provider: 'openai',
    model: 'gpt-test',
    apiKey: KEY,
    temperature: null,
    maxTokens: null,
    fetch,
    ...over,
  })
  const { tenantId } = await h.tenant()
  return { h, llm, lines, registry, target, tenantId }
}

/** The AppError a call fails with. */
async function failure(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  )
  if (!(err instanceof AppError)) throw new Error(`expected an AppError, got ${String(err)}`)
  return err
}

const usageRows = (h: TestApp, tenantId: string) =>
  h.platform.db.tenant(
    tenantId,
    (sql) =>
      sql`select provider, model, to_char(day, 'YYYY-MM-DD') as day, requests::int, input_tokens::int, output_tokens::int from llm_usage order by model`,
  )

t.test('openai: streamed deltas in order, the full text, usage recorded and counted', async (t) => {
  const fake = await fakeLlm(t)
  const day = Date.parse('2025-03-04T23:30:00Z')
  const { h, llm, target, tenantId, registry } = await setup(t, { now: () => day })
  fake.push({ text: 'The quick brown fox jumps', usage: { input: 12, output: 5 } })
  const deltas: string[] = []
  const req: LlmRequest = {
    tenantId,
    target: target({ baseUrl: fake.url }),
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hello' },
    ],
    onDelta: (d) => deltas.push(d),
  }
  const res = await llm.complete(req)
  t.same(deltas, ['The ', 'quick ', 'brown ', 'fox ', 'jumps'], 'each delta, in order')
  t.equal(res.text, 'The quick brown fox jumps')
  t.match(res, {
    finishReason: 'stop',
    usage: { inputTokens: 12, outputTokens: 5 },
    provider: 'openai',
    model: 'gpt-test',
    toolCalls: [],
  })
  const sent = fake.requests[0]!
  t.equal(sent.path, '/v1/chat/completions', 'chat completions, not the Responses API')
  t.equal(sent.headers.authorization, `Bearer ${KEY}`)
  t.match(sent.body, {
    model: 'gpt-test',
    stream: true,
    messages: [{ role: 'system' }, { role: 'user', content: 'hello' }],
  })

  await llm.complete({ ...req, model: 'gpt-other', temperature: 0.5, maxTokens: 20 })
  t.match(fake.requests[1]!.body, { model: 'gpt-other', temperature: 0.5, max_tokens: 20 }, 'per-call model and limits')
  await llm.complete(req)
  t.same(await usageRows(h, tenantId), [
    { provider: 'openai', model: 'gpt-other', day: '2025-03-04', requests: 1, input_tokens: 10, output_tokens: 1 },
    { provider: 'openai', model: 'gpt-test', day: '2025-03-04', requests: 2, input_tokens: 22, output_tokens: 6 },
  ])
  const other = await h.tenant()
  t.same(await usageRows(h, other.tenantId), [], "another tenant's usage is its own")

  const metrics = await registry.metrics()
  t.match(metrics, /atrium_llm_requests_total\{provider="openai",outcome="ok"\} 3/)
  t.match(metrics, /atrium_llm_tokens_total\{provider="openai",model="gpt-test",kind="input"\} 22/)
  t.match(metrics, /atrium_llm_request_duration_seconds_count\{provider="openai"\} 3/)
  t.notMatch(metrics, new RegExp(tenantId), 'no tenant label')
})

t.test('with METRICS_TENANT_LABEL, tokens are also counted per tenant', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId, registry } = await setup(t, { tenantLabel: true })
  fake.push({ text: 'ok', usage: { input: 7, output: 2 } })
  await llm.complete({ tenantId, target: target({ baseUrl: fake.url }), messages: [{ role: 'user', content: 'hi' }] })
  const metrics = await registry.metrics()
  t.match(metrics, `atrium_llm_tenant_tokens_total{tenant="${tenantId}",provider="openai",kind="input"} 7`)
  t.match(metrics, `atrium_llm_tenant_tokens_total{tenant="${tenantId}",provider="openai",kind="output"} 2`)
})

t.test('tool calls: declared to the model, parsed arguments back, invalid ones marked with the reason', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId } = await setup(t)
  const tools = [
    {
      name: 'get_weather',
      description: 'The weather of a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  ]
  const base = { tenantId, target: target({ baseUrl: fake.url }), tools }
  fake.push({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' }, id: 'call_1' }] })
  const res = await llm.complete({ ...base, messages: [{ role: 'user', content: 'weather in Paris?' }] })
  t.same(res.toolCalls, [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Paris' } }])
  t.equal(res.finishReason, 'tool-calls')
  t.match(fake.requests[0]!.body.tools, [
    { type: 'function', function: { name: 'get_weather', parameters: { required: ['city'] } } },
  ])

  // The caller runs the tool and hands the result back.
  fake.push({ text: 'Sunny.' })
  const next = await llm.complete({
    ...base,
    messages: [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: '', toolCalls: res.toolCalls },
      { role: 'tool', toolCallId: 'call_1', toolName: 'get_weather', content: JSON.stringify({ sky: 'clear' }) },
    ],
  })
  t.equal(next.text, 'Sunny.')
  t.match(fake.requests[1]!.body.messages, [
    { role: 'user' },
    {
      role: 'assistant',
      tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: '{"sky":"clear"}' },
  ])

  fake.push({ toolCalls: [{ name: 'get_weather', arguments: '{"city": ', id: 'bad_json' }] })
  fake.push({ toolCalls: [{ name: 'get_weather', arguments: { town: 'Paris' }, id: 'bad_schema' }] })
  fake.push({ toolCalls: [{ name: 'launch_rockets', arguments: {}, id: 'no_such_tool' }] })
  const invalid: LlmToolCall[] = []
  for (const id of ['bad_json', 'bad_schema', 'no_such_tool']) {
    const r = await llm.complete({ ...base, messages: [{ role: 'user', content: 'go' }] })
    t.equal(r.toolCalls.length, 1)
    t.equal(r.toolCalls[0]!.id, id)
    t.match(r.toolCalls[0]!.invalid, /\S/, `${id}: marked invalid with a reason`)
    invalid.push(r.toolCalls[0]!)
  }
  // Handed back with the reasons, the calls go as the model made them, but arguments that were no JSON object go as {}.
  fake.push({ text: 'Let me try again.' })
  await llm.complete({
    ...base,
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: '', toolCalls: invalid },
      ...invalid.map((c) => ({
        role: 'tool' as const,
        toolCallId: c.id,
        toolName: c.name,
        content: JSON.stringify({ error: c.invalid }),
      })),
    ],
  })
  t.same(
    (
      fake.requests.at(-1)!.body.messages as { tool_calls?: { function: { arguments: string } }[] }[]
    )[1]!.tool_calls!.map((c) => c.function.arguments),
    ['{}', '{"town":"Paris"}', '{}'],
  )
})

t.test('429 with Retry-After is retried, then succeeds; after the retries it is LLM_RATE_LIMITED', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId } = await setup(t)
  const req = { tenantId, target: target({ baseUrl: fake.url }), messages: [{ role: 'user' as const, content: 'hi' }] }
  fake.push({ status: 429, retryAfterSeconds: 0 }, { status: 503, retryAfterSeconds: 0 }, { text: 'finally' })
  t.equal((await llm.complete(req)).text, 'finally')
  t.equal(fake.requests.length, 3, 'two retries')

  fake.push(
    { status: 429, retryAfterSeconds: 0 },
    { status: 429, retryAfterSeconds: 0 },
    { status: 429, retryAfterSeconds: 0 },
    { text: 'never reached' },
  )
  const err = await failure(llm.complete(req))
  t.equal(err.code, 'LLM_RATE_LIMITED')
  t.equal(err.status, 429)
  t.match(err.details, { provider: 'openai', model: 'gpt-test', upstreamStatus: 429, retryAfterSeconds: 0 })
  t.same(err.headers, { 'Retry-After': '0' })
  t.match(err.message, /\(after retries\)$/, 'the message says it was retried')
  t.equal(fake.requests.length, 6, 'three attempts in all')

  const other = await fakeLlm(t)
  other.push({ status: 400, errorCode: 'invalid_value' }, { text: 'never reached' })
  t.equal((await failure(llm.complete({ ...req, target: target({ baseUrl: other.url }) }))).code, 'LLM_PROVIDER_ERROR')
  t.equal(other.requests.length, 1, 'a 400 is not retried')
})

t.test('provider failures map to the catalog, without the key or the provider message', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId, lines } = await setup(t, { maxRetries: 0 })
  const req = { tenantId, target: target({ baseUrl: fake.url }), messages: [{ role: 'user' as const, content: 'hi' }] }
  const cases: [Parameters<typeof fake.push>[0], string, number][] = [
    [{ status: 401, errorCode: 'invalid_api_key' }, 'LLM_KEY_REJECTED', 401],
    [{ status: 403, errorCode: 'forbidden' }, 'LLM_KEY_REJECTED', 403],
    [{ status: 404, errorCode: 'model_not_found' }, 'LLM_MODEL_NOT_FOUND', 404],
    [{ status: 400, errorCode: 'context_length_exceeded' }, 'LLM_CONTEXT_TOO_LONG', 400],
    [{ status: 500 }, 'LLM_PROVIDER_ERROR', 500],
    [{ status: 400, errorCode: 'invalid_value' }, 'LLM_PROVIDER_ERROR', 400],
  ]
  for (const [turn, code, upstreamStatus] of cases) {
    fake.push(turn)
    const err = await failure(llm.complete(req))
    t.equal(err.code, code, `${upstreamStatus} ${turn.errorCode ?? ''} is ${code}`)
    t.same(err.details, { provider: 'openai', model: 'gpt-test', upstreamStatus })
    const shown = JSON.stringify({ message: err.message, details: err.details, stack: err.stack })
    t.notMatch(shown, /SECRET|cdef|Incorrect API key/, 'neither the key nor the provider message')
  }
  t.ok(lines.length >= cases.length, 'each failure logged')
  for (const line of lines) {
    t.match(JSON.parse(line), { level: 40, msg: 'model call failed', provider: 'openai' })
    t.notMatch(line, /SECRET|cdef|Incorrect API key/, 'no key in the log')
  }
})

t.test('server down, hang, abort', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId, h, registry } = await setup(t, { maxRetries: 0 })
  const req = { tenantId, target: target({ baseUrl: fake.url }), messages: [{ role: 'user' as const, content: 'hi' }] }

  const port = await freePort() // nothing listens there
  const down = await failure(llm.complete({ ...req, target: target({ baseUrl: `http://127.0.0.1:${port}/v1` }) }))
  t.equal(down.code, 'LLM_UNREACHABLE')
  t.match(down.details, { provider: 'openai', model: 'gpt-test', reason: 'ECONNREFUSED' })

  fake.push({ hang: true })
  const hung = await failure(llm.complete({ ...req, timeoutMs: 200 }))
  t.equal(hung.code, 'LLM_TIMEOUT')
  t.equal(hung.status, 504)

  // Aborted mid-answer: the call rejects with the signal's reason and nothing is recorded.
  fake.push({ text: 'one two three four five six seven eight nine ten', chunkDelayMs: 30 })
  const controller = new AbortController()
  const reason = new Error('the user went away')
  const deltas: string[] = []
  const aborted = llm.complete({
    ...req,
    signal: controller.signal,
    onDelta: (d) => {
      deltas.push(d)
      if (deltas.length === 2) controller.abort(reason)
    },
  })
  await t.rejects(aborted, reason)
  t.ok(deltas.length >= 2 && deltas.length < 10, 'stopped mid-answer')
  const before = new AbortController()
  before.abort()
  await t.rejects(llm.complete({ ...req, signal: before.signal }), { name: 'AbortError' })
  // Aborted while waiting for the answer to begin (the user pressed stop before the first word).
  fake.push({ hang: true })
  const waiting = new AbortController()
  const early = llm.complete({ ...req, signal: waiting.signal })
  setTimeout(() => waiting.abort(reason), 100)
  await t.rejects(early, reason)
  t.same(await usageRows(h, tenantId), [], 'no usage for failed or aborted calls')
  t.match(
    await registry.metrics(),
    /atrium_llm_requests_total\{provider="openai",outcome="aborted"\} 3/,
    'each abort counted once: mid-answer, before the call, before the answer began',
  )
})

t.test('not configured: details.missing names the fields to set', async (t) => {
  const { llm, target, tenantId } = await setup(t)
  const cases: [LlmProvider, Partial<LlmTarget>, string[]][] = [
    ['openai', { model: null, apiKey: null }, ['model', 'apiKey']],
    ['openai', { baseUrl: null }, []],
    ['anthropic', { apiKey: null }, ['apiKey']],
    ['azure-openai', { baseUrl: null, apiKey: null }, ['baseUrl', 'apiKey']],
    ['vllm', { baseUrl: null, apiKey: null }, ['baseUrl']],
    ['ollama', { baseUrl: 'http://127.0.0.1:11434/v1', apiKey: null, model: ' ' }, ['model']],
    ['openai-compatible', { baseUrl: 'http://127.0.0.1:1/v1', apiKey: null }, []],
  ]
  for (const [provider, over, missing] of cases) {
    const tg = target({ baseUrl: 'http://127.0.0.1:1/v1', ...over, provider })
    const err = await failure(Promise.resolve().then(() => llm.checkConfigured(tg)))
      .then((e) => e)
      .catch(() => null)
    if (!missing.length) {
      t.equal(err, null, `${provider}: configured`)
      continue
    }
    t.match(
      err,
      { code: 'LLM_NOT_CONFIGURED', status: 409, details: { missing } },
      `${provider}: ${missing.join(', ')}`,
    )
  }
  t.doesNotThrow(
    () => llm.checkConfigured(target({ baseUrl: null, model: null }), 'gpt-given'),
    'a model given per call counts',
  )
  t.match(await failure(llm.complete({ tenantId, target: target({ baseUrl: null, model: null }), messages: [] })), {
    code: 'LLM_NOT_CONFIGURED',
    details: { missing: ['model'] },
  })
})

t.test(
  'the outbound policy: air-gapped or loopback not allowed is LLM_OUTBOUND_REFUSED, naming the setting',
  async (t) => {
    const fake = await fakeLlm(t)
    /** How saying hi to the model at `over` fails under the setup's outbound policy. */
    const refusal = (s: Awaited<ReturnType<typeof setup>>, over: Parameters<typeof s.target>[0]) =>
      failure(
        s.llm.complete({ tenantId: s.tenantId, target: s.target(over), messages: [{ role: 'user', content: 'hi' }] }),
      )
    const closedOff = await setup(t, { policy: { allowedCidrs: [], airGapped: false } })
    const err = await refusal(closedOff, { baseUrl: fake.url })
    t.equal(err.code, 'LLM_OUTBOUND_REFUSED')
    t.match(err.message, /OUTBOUND_ALLOWED_NETWORKS/)
    const gapped = await setup(t, { policy: { allowedCidrs: [], airGapped: true } })
    const err2 = await refusal(gapped, { provider: 'openai', baseUrl: null })
    t.equal(err2.code, 'LLM_OUTBOUND_REFUSED', 'api.openai.com is refused air-gapped')
    t.match(
      err2.message,
      /\(air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up\); to allow it, change OUTBOUND_ALLOWED_DOMAINS$/,
    )
    const gappedAddress = await setup(t, { policy: { allowedCidrs: [], airGapped: true } })
    const err3 = await refusal(gappedAddress, { baseUrl: fake.url })
    t.match(
      err3,
      {
        code: 'LLM_OUTBOUND_REFUSED',
        message:
          /\(air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable\); to allow it, change OUTBOUND_ALLOWED_NETWORKS$/,
      },
      'an address names the networks',
    )
    const metadata = await refusal(closedOff, { baseUrl: 'http://169.254.169.254/v1' })
    t.match(metadata, { code: 'LLM_OUTBOUND_REFUSED', message: /; no setting allows it$/ }, 'and metadata none')
    t.equal(fake.requests.length, 0, 'nothing reached the model')
  },
)

t.test('azure-openai and the OpenAI-compatible providers speak chat completions with their own auth', async (t) => {
  const fake = await fakeLlm(t)
  const { llm, target, tenantId, registry } = await setup(t)
  for (const provider of ['azure-openai', 'vllm', 'ollama', 'openai-compatible'] as const) {
    fake.push({ text: `hello from ${provider}`, usage: { input: 3, output: 4 } })
    const res = await llm.complete({
      tenantId,
      target: target({ provider, baseUrl: fake.url, apiKey: provider === 'ollama' ? null : KEY }),
      messages: [{ role: 'user', content: 'hi' }],
    })
    t.match(res, { text: `hello from ${provider}`, provider, usage: { inputTokens: 3, outputTokens: 4 } })
    const sent = fake.requests.at(-1)!
    t.match(sent.path, /\/chat\/completions/)
    if (provider === 'azure-openai') t.equal(sent.headers['api-key'], KEY)
    else if (provider === 'ollama') t.equal(sent.headers.authorization, undefined, 'no key, no header')
    else t.equal(sent.headers.authorization, `Bearer ${KEY}`)
    if (provider !== 'azure-openai') t.match(sent.body.stream_options, { include_usage: true }, 'usage asked for')
  }
  t.match(await registry.metrics(), /atrium_llm_requests_total\{provider="vllm",outcome="ok"\} 1/)
})

t.test('anthropic: text, a tool call, usage, a rejected key', async (t) => {
  const fake = await fakeLlm(t)
  const { h, llm, target, tenantId } = await setup(t, { maxRetries: 0 })
  const tg = target({ provider: 'anthropic', model: 'claude-test', baseUrl: fake.url })
  fake.push({ text: 'Bonjour tout le monde', usage: { input: 7, output: 3 } })
  const deltas: string[] = []
  const res = await llm.complete({
    tenantId,
    target: tg,
    messages: [
      { role: 'system', content: 'in French' },
      { role: 'user', content: 'hello' },
    ],
    onDelta: (d) => deltas.push(d),
  })
  t.same(deltas, ['Bonjour ', 'tout ', 'le ', 'monde'])
  t.match(res, {
    text: 'Bonjour tout le monde',
    finishReason: 'stop',
    usage: { inputTokens: 7, outputTokens: 3 },
    provider: 'anthropic',
    model: 'claude-test',
  })
  t.equal(fake.requests[0]!.path, '/v1/messages')
  t.equal(fake.requests[0]!.headers['x-api-key'], KEY)
  t.match(fake.requests[0]!.body, { model: 'claude-test', stream: true, system: [{ text: 'in French' }] })

  fake.push({
    text: 'Let me look.',
    toolCalls: [{ name: 'lookup', arguments: { q: 'atrium' }, id: 'toolu_1' }],
    usage: { input: 10, output: 2 },
  })
  const tools = [
    {
      name: 'lookup',
      description: 'Search',
      parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    },
  ]
  const call = await llm.complete({ tenantId, target: tg, tools, messages: [{ role: 'user', content: 'find atrium' }] })
  t.same(call.toolCalls, [{ id: 'toolu_1', name: 'lookup', arguments: { q: 'atrium' } }])
  t.equal(call.text, 'Let me look.')
  t.equal(call.finishReason, 'tool-calls')

  t.same(await usageRows(h, tenantId), [
    {
      provider: 'anthropic',
      model: 'claude-test',
      day: new Date().toISOString().slice(0, 10),
      requests: 2,
      input_tokens: 17,
      output_tokens: 5,
    },
  ])

  for (const [turn, code] of [
    [{ status: 401 }, 'LLM_KEY_REJECTED'],
    [{ status: 404 }, 'LLM_MODEL_NOT_FOUND'],
    [{ status: 400, errorCode: 'context_length_exceeded' }, 'LLM_CONTEXT_TOO_LONG'],
    [{ status: 529 }, 'LLM_PROVIDER_ERROR'],
  ] as const) {
    fake.push(turn)
    const err = await failure(llm.complete({ tenantId, target: tg, messages: [{ role: 'user', content: 'hi' }] }))
    t.equal(err.code, code)
    t.notMatch(JSON.stringify({ m: err.message, d: err.details }), /cdef|SECRET/)
  }
})

t.test('the app: atrium-llm and the tenant settings give a callable target; anthropic is a provider', async (t) => {
  const fake = await fakeLlm(t)
  const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
  const { tenantId, call } = await h.tenant()
  const patched = await call('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'anthropic',
    baseUrl: fake.url,
    model: 'claude-test',
    apiKey: KEY,
  })
  t.equal(patched.status, 200)
  t.equal(patched.body.data.provider, 'anthropic')
  t.notMatch(patched.raw.toString(), /SECRET/)
  const target = await h.app.llmSettings.connection(tenantId)
  h.app.llm.checkConfigured(target)
  fake.push({ text: 'wired', usage: { input: 2, output: 1 } })
  t.equal((await h.app.llm.complete({ tenantId, target, messages: [{ role: 'user', content: 'hi' }] })).text, 'wired')
  const usage = await call('GET', '/api/v1/tenant/usage')
  t.equal(usage.status, 200)
  t.match(usage.body, {
    data: [{ provider: 'anthropic', model: 'claude-test', requests: 1, inputTokens: 2, outputTokens: 1 }],
    meta: { totals: { requests: 1, inputTokens: 2, outputTokens: 1 } },
  })
  t.match(
    (await h.anonymous('GET', '/metrics')).raw.toString(),
    /atrium_llm_requests_total\{provider="anthropic",outcome="ok"\} 1/,
  )
})

t.test(
  'an answer longer than the call takes fails LLM_RESPONSE_TOO_LARGE as it streams, and the connection is closed there',
  async (t) => {
    let written = 0
    const fake = await fakeLlm(t, { onChunk: () => written++ })
    const { llm, target, tenantId } = await setup(t)
    const base = {
      tenantId,
      target: target({ baseUrl: fake.url }),
      messages: [{ role: 'user' as const, content: 'talk' }],
    }
    const words = 'word '.repeat(4000) // 4,000 pieces of 5 characters
    fake.push({ text: words, chunkDelayMs: 1 })
    const err = await failure(llm.complete({ ...base, maxOutputChars: 1000 }))
    t.equal(err.code, 'LLM_RESPONSE_TOO_LARGE')
    t.match(err.details, { limit: 'outputChars', max: 1000 })
    await new Promise((r) => setTimeout(r, 200))
    t.ok(written < 1000, `the provider was stopped early (${written} of 4000 pieces written)`)

    // Tool-call arguments count too (a write_file of megabytes).
    const tools = [
      {
        name: 'write',
        description: 'write',
        parameters: { type: 'object', properties: { content: { type: 'string' } } },
      },
    ]
    fake.push({ toolCalls: [{ name: 'write', arguments: { content: 'x'.repeat(5000) } }] })
    const args = await failure(llm.complete({ ...base, tools, maxOutputChars: 1000 }))
    t.match(args.details, { limit: 'outputChars' })
    fake.push({ text: 'fits' })
    t.equal((await llm.complete({ ...base, maxOutputChars: 1000 })).text, 'fits', 'a short answer passes')
  },
)

t.test(
  'more tool calls than the call takes fail LLM_RESPONSE_TOO_LARGE with limit toolCalls, holding no more than the limit',
  async (t) => {
    const fake = await fakeLlm(t)
    const { llm, target, tenantId } = await setup(t)
    const tools = [{ name: 'list_files', description: 'list', parameters: { type: 'object', properties: {} } }]
    const base = {
      tenantId,
      target: target({ baseUrl: fake.url }),
      tools,
      messages: [{ role: 'user' as const, content: 'list' }],
    }
    fake.push({ toolCalls: Array.from({ length: 3000 }, () => ({ name: 'list_files', arguments: {} })) })
    const err = await failure(llm.complete({ ...base, maxToolCalls: 64 }))
    t.equal(err.code, 'LLM_RESPONSE_TOO_LARGE')
    t.match(err.details, { limit: 'toolCalls', max: 64 })
    fake.push({ toolCalls: Array.from({ length: 64 }, () => ({ name: 'list_files', arguments: {} })) })
    t.equal((await llm.complete({ ...base, maxToolCalls: 64 })).toolCalls.length, 64, 'exactly the limit passes')
  },
)

t.test(
  'text the database cannot store, from the model, is made storable: tool calls with it are invalid, text gets U+FFFD',
  async (t) => {
    // found by the second hardening round: a NUL in a tool call's arguments failed the run's step write four times over
    const fake = await fakeLlm(t)
    const { llm, target, tenantId } = await setup(t)
    const tools = [
      {
        name: 'read_file',
        description: 'read',
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      },
    ]
    const base = {
      tenantId,
      target: target({ baseUrl: fake.url }),
      tools,
      messages: [{ role: 'user' as const, content: 'read' }],
    }
    fake.push({
      toolCalls: [
        { name: 'read_file', arguments: { path: 'a\u0000b' }, id: 'nul' },
        { name: 'read_file', arguments: { path: 'half \ud800 pair' }, id: 'surrogate' },
        { name: 'read_file', arguments: { ['key\u0000']: 'x', path: 'p' }, id: 'nul-key' },
        { name: 'read_file', arguments: `${'['.repeat(100)}${']'.repeat(100)}`, id: 'deep' },
        { name: 'read_file', arguments: { path: 'rocket \u{1f680}' }, id: 'fine' },
      ],
      text: 'before\u0000after \ud83d\ude80 lone \udc00 end',
    })
    const r = await llm.complete(base)
    const byId = Object.fromEntries(r.toolCalls.map((c) => [c.id, c]))
    t.match(byId.nul, { invalid: /arguments\.path must not contain NUL/, arguments: { path: 'a\ufffdb' } })
    t.match(byId.surrogate, { invalid: /unpaired surrogates/, arguments: { path: 'half \ufffd pair' } })
    t.match(byId['nul-key'], { invalid: /NUL/, arguments: { 'key\ufffd': 'x' } })
    t.match(byId.deep, { invalid: /more than 64 levels/ })
    t.same(
      byId.fine,
      { id: 'fine', name: 'read_file', arguments: { path: 'rocket \u{1f680}' } },
      'a valid pair is text',
    )
    t.equal(r.text, 'before\ufffdafter \u{1f680} lone \ufffd end')
    t.equal(findUnstorableText(r), null, 'nothing in the answer is refused by the database')
  },
)
