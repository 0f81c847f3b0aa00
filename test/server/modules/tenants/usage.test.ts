// GET /api/v1/tenant/usage: model usage per day, provider and model, recorded by platform/llm.ts.
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { isError } from '../../../helpers/answers.js'

const NOW = Date.parse('2025-06-30T12:00:00Z')

t.test('usage per day, provider and model over a period, with totals; recorded by model calls', async (t) => {
  const fake = await fakeLlm(t)
  const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { now: () => NOW })
  const a = await h.tenant()
  const b = await h.tenant()
  const seed = (tenantId: string, rows: [string, string, string, number, number, number][]) =>
    h.platform.db.tenant(tenantId, async (sql) => {
      for (const [day, provider, model, requests, input, output] of rows) {
        await sql`insert into llm_usage (tenant_id, day, provider, model, requests, input_tokens, output_tokens) values (${tenantId}, ${day}, ${provider}, ${model}, ${requests}, ${input}, ${output})`
      }
    })
  await seed(a.tenantId, [
    ['2025-05-31', 'openai', 'gpt-old', 9, 900, 90], // 31 days ago: outside the default period
    ['2025-06-01', 'openai', 'gpt-4o', 2, 200, 20],
    ['2025-06-15', 'vllm', 'llama', 3, 300, 30],
    ['2025-06-15', 'anthropic', 'claude', 1, 100, 10],
  ])
  await seed(b.tenantId, [['2025-06-20', 'openai', 'gpt-4o', 5, 5, 5]])

  // A model call today (the app's clock) adds to the same table.
  t.equal(
    (
      await a.call('PATCH', '/api/v1/tenant/settings/llm', {
        provider: 'openai-compatible',
        baseUrl: fake.url,
        model: 'local',
      })
    ).status,
    200,
  )
  fake.push({ text: 'hi there', usage: { input: 4, output: 2 } })
  await h.app.llm.complete({
    tenantId: a.tenantId,
    target: await h.app.llmSettings.connection(a.tenantId),
    messages: [{ role: 'user', content: 'hi' }],
  })

  const res = await a.call('GET', '/api/v1/tenant/usage')
  t.equal(res.status, 200)
  t.same(res.body.data, [
    { day: '2025-06-01', provider: 'openai', model: 'gpt-4o', requests: 2, inputTokens: 200, outputTokens: 20 },
    { day: '2025-06-15', provider: 'anthropic', model: 'claude', requests: 1, inputTokens: 100, outputTokens: 10 },
    { day: '2025-06-15', provider: 'vllm', model: 'llama', requests: 3, inputTokens: 300, outputTokens: 30 },
    { day: '2025-06-30', provider: 'openai-compatible', model: 'local', requests: 1, inputTokens: 4, outputTokens: 2 },
  ])
  t.match(res.body.meta, {
    from: '2025-06-01',
    to: '2025-06-30',
    totals: { requests: 7, inputTokens: 604, outputTokens: 62 },
    request_id: String,
  })

  const range = await a.call('GET', '/api/v1/tenant/usage?from=2025-05-31&to=2025-06-01')
  t.same(
    range.body.data.map((r: { model: string }) => r.model),
    ['gpt-old', 'gpt-4o'],
  )
  t.same(range.body.meta.totals, { requests: 11, inputTokens: 1100, outputTokens: 110 })
  const other = await b.call('GET', '/api/v1/tenant/usage')
  t.same(
    other.body.data,
    [{ day: '2025-06-20', provider: 'openai', model: 'gpt-4o', requests: 5, inputTokens: 5, outputTokens: 5 }],
    'each tenant sees its own',
  )
  const empty = await b.call('GET', '/api/v1/tenant/usage?from=2024-01-01&to=2024-01-31')
  t.same(empty.body, {
    data: [],
    meta: {
      ...empty.body.meta,
      from: '2024-01-01',
      to: '2024-01-31',
      totals: { requests: 0, inputTokens: 0, outputTokens: 0 },
    },
  })
  t.equal((await a.call('GET', '/api/v1/tenant/usage?from=2024-06-30&to=2025-06-29')).status, 200, '365 days')
  t.equal(
    (await a.call('GET', '/api/v1/tenant/usage?from=2024-01-01&to=2024-12-31')).status,
    200,
    '366 days of a leap year',
  )
})

t.test('bad periods are VALIDATION_ERROR', async (t) => {
  const h = await testApp(t, {}, { now: () => NOW })
  const { call } = await h.tenant()
  for (const q of [
    'from=2025-02-30',
    'to=20250601',
    'from=yesterday',
    'from=2025-06-10&to=2025-06-01',
    'from=2023-01-01&to=2024-01-02',
    'to=2025-13-01',
    'since=2025-01-01',
  ])
    isError(t, await call('GET', `/api/v1/tenant/usage?${q}`), 400, 'VALIDATION_ERROR', q)
  t.match((await call('GET', '/api/v1/tenant/usage?from=2025-06-10&to=2025-06-01')).body.error.details, {
    rule: 'order',
  })
  t.match((await call('GET', '/api/v1/tenant/usage?from=2023-01-01&to=2024-01-02')).body.error.details, {
    rule: 'maxDays',
    limit: 366,
  })
  t.equal((await h.anonymous('GET', '/api/v1/tenant/usage')).status, 401)
})
