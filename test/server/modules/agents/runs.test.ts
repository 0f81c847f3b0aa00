// Agent runs end to end: the job runner executes them against an OpenAI-compatible server written
// for the suite (test/helpers/fake-llm.ts, the real wire protocol), the tools act on the project's
// files, and the stream replays from any event.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { agent, ended, project, readyToRun, tenantWithLlm as llmTenant } from '../../../helpers/agents.js'
import { appOn, testApp } from '../../../helpers/app.js'
import { fakeLlm, type FakeLlm } from '../../../helpers/fake-llm.js'
import { unzip } from '../../../helpers/zip.js'
import { parseSse } from '../../../helpers/sse.js'
import { runChannel } from '../../../../server/modules/agents/runner.js'
import { writtenMessage } from '../../../../server/platform/event-log.js'

// The fake provider listens on loopback, which the outbound policy refuses unless it is listed.
const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)

/** A tenant whose model is `provider` (this file's fake by default). */
const tenantWithLlm = (
  plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'enterprise',
  provider: FakeLlm = llm,
  apiKey?: string,
) => llmTenant(h, provider, plan, apiKey)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The webhook events of a run in the outbox, in the order written. */
const runEvents = (runId: string) =>
  h.platform.db.system(
    (sql) =>
      sql<
        { type: string; data: { reason?: string } }[]
      >`select type, data from webhook_events where data->>'runId' = ${runId} order by id`,
  )

t.test(
  'a high-autonomy run reads a file, writes another and completes; its version, backup and stream show it',
  async (t) => {
    const { call } = await tenantWithLlm()
    const projectId = await project(call)
    const put = await call('PUT', `/api/v1/projects/${projectId}/files/notes/todo.txt`, 'buy milk\nwrite report\n', {
      'content-type': 'text/plain',
    })
    t.equal(put.status, 201, 'a file to read')
    const agentId = await agent(call)
    llm.push(
      {
        text: 'Let me look. ',
        toolCalls: [{ name: 'read_file', arguments: { path: 'notes/todo.txt' } }],
        usage: { input: 100, output: 10 },
      },
      {
        toolCalls: [
          { name: 'write_file', arguments: { path: 'notes/summary.md', content: '# Two things\n- milk\n- report\n' } },
        ],
        usage: { input: 150, output: 20 },
      },
      { text: 'I wrote notes/summary.md with the two items.', usage: { input: 200, output: 12 } },
    )
    const before = llm.requests.length
    // wait=0: answered at once, queued (execute.test.ts has the waits).
    const started = await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, {
      goal: 'Summarise my todo list into notes/summary.md',
      projectId,
    })
    t.equal(started.status, 202)
    t.match(started.body.data, {
      agentId,
      projectId,
      status: 'queued',
      output: null,
      goal: 'Summarise my todo list into notes/summary.md',
    })
    const run = await ended(call, agentId, started.body.data.id)
    t.match(run, {
      status: 'completed',
      output: 'I wrote notes/summary.md with the two items.',
      usage: { inputTokens: 450, outputTokens: 42 },
      error: null,
    })
    t.equal(run.steps.length, 3)
    t.match(run.steps[0].toolCalls[0], { name: 'read_file', arguments: { path: 'notes/todo.txt' } })
    t.match(run.steps[0].toolCalls[0].result, /buy milk/)
    t.match(run.steps[1].toolCalls[0], { name: 'write_file' })

    // What the model was sent: the system prompt, the goal, the tools of its level, then the read file.
    const first = llm.requests[before]!.body
    t.equal(first.messages[0].role, 'system')
    t.match(first.messages[1], { role: 'user', content: /Summarise/ })
    t.same(
      first.tools.map((x: { function: { name: string } }) => x.function.name).sort(),
      ['delete_file', 'list_files', 'read_file', 'write_file'],
      'no web search: this deployment has no search endpoint',
    )
    t.match(
      JSON.stringify(llm.requests[before + 1]!.body.messages),
      /buy milk/,
      'the tool result went back to the model',
    )

    // One new project version holds the file.
    t.type(run.projectVersion, 'number')
    const file = await call('GET', `/api/v1/projects/${projectId}/files/notes/summary.md`)
    t.equal(file.status, 200)
    t.equal(file.raw.toString('utf8'), '# Two things\n- milk\n- report\n')
    const versions = await call('GET', `/api/v1/projects/${projectId}/versions`)
    t.equal(versions.body.data[0].version, run.projectVersion, 'the newest version is the run’s')

    // The backup has the file and the agent.
    const backup = await call('POST', `/api/v1/projects/${projectId}/backup`, { includeAgents: true })
    t.equal(backup.status, 201)
    const u = new URL(backup.body.data.downloadUrl)
    const zip = await unzip(
      h.platform.blobs.kind === 'local'
        ? (await h.app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
        : Buffer.from(await (await fetch(u)).arrayBuffer()),
    )
    t.equal(zip['files/notes/summary.md'], '# Two things\n- milk\n- report\n')
    t.match(JSON.parse(zip['agents.json']!), [{ id: agentId, name: 'Helper' }])

    // The whole stream, then from its middle: the tail, exactly.
    const full = await call('GET', `/api/v1/agents/${agentId}/runs/${run.id}/stream`)
    t.equal(full.status, 200)
    t.match(full.headers['content-type'], /^text\/event-stream/)
    t.equal(full.headers['x-accel-buffering'], 'no')
    const events = parseSse(full.raw.toString('utf8'))
    t.same(
      events.map((e) => e.id),
      events.map((_, i) => i + 1),
      'numbered from 1 without gaps',
    )
    const kinds = events.map((e) => e.event)
    t.equal(kinds[0], 'run.queued')
    t.equal(kinds[1], 'run.started')
    t.equal(kinds.at(-1), 'run.completed')
    for (const k of ['step.started', 'tool.call', 'tool.result', 'output.delta']) t.ok(kinds.includes(k), `has ${k}`)
    const text = events
      .filter((e) => e.event === 'output.delta' && e.data.step === 3)
      .map((e) => e.data.delta)
      .join('')
    t.equal(text, 'I wrote notes/summary.md with the two items.', 'the deltas of the last step are the output')
    const middle = events[Math.floor(events.length / 2)]!.id
    const tail = await call('GET', `/api/v1/agents/${agentId}/runs/${run.id}/stream`, undefined, {
      'last-event-id': String(middle),
    })
    t.same(
      parseSse(tail.raw.toString('utf8')),
      events.slice(middle),
      'Last-Event-ID resumes with the next event exactly',
    )

    // Webhook events, once each, in the outbox.
    t.same(
      (await runEvents(run.id)).map((r) => r.type),
      ['agent.started', 'agent.completed'],
    )
  },
)

t.test('a provider that answers 429 with Retry-After and then succeeds: the run completes', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  const before = llm.requests.length
  llm.push({ status: 429, retryAfterSeconds: 1 }, { text: 'Hello after waiting.' })
  const r = await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Say hello', projectId })
  const run = await ended(call, agentId, r.body.data.id)
  t.match(run, { status: 'completed', output: 'Hello after waiting.' })
  t.equal(llm.requests.length - before, 2, 'one refused call, one that succeeded')
  t.notOk(llm.requests[before]!.body.tools, 'a low-autonomy agent is offered no tools')
})

/** atrium_agent_runs_finished_total{status} as this app's /metrics says now. */
const runsFinished = async (status: string) =>
  Number(
    new RegExp(`^atrium_agent_runs_finished_total\\{status="${status}"\\} (\\d+)$`, 'm').exec(
      (await h.anonymous('GET', '/metrics')).raw.toString(),
    )?.[1] ?? 0,
  )

t.test('provider failures end the run failed with the catalog code and no secret', async (t) => {
  const failedBefore = await runsFinished('failed')
  const { call } = await tenantWithLlm('enterprise', llm, 'sk-secret-value-abcdef123456')
  const projectId = await project(call)
  const agentId = await agent(call, { autonomyLevel: 'low' })
  llm.push({ status: 401 })
  const rejected = await ended(
    call,
    agentId,
    (await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Hi', projectId })).body.data.id,
  )
  t.match(rejected, { status: 'failed', output: null, error: { code: 'LLM_KEY_REJECTED' } })
  t.notMatch(JSON.stringify(rejected), /abcdef123456|3456/, 'nothing of the key in the record')
  const stream = await call('GET', `/api/v1/agents/${agentId}/runs/${rejected.id}/stream`)
  t.match(parseSse(stream.raw.toString('utf8')).at(-1), {
    event: 'run.failed',
    data: { error: { code: 'LLM_KEY_REJECTED' } },
  })
  t.notMatch(stream.raw.toString('utf8'), /3456/)
  t.same(
    (await runEvents(rejected.id)).map((r) => r.type),
    ['agent.started', 'agent.failed'],
  )

  // A provider that is not there.
  const down = await fakeLlm(t)
  await down.close()
  await call('PATCH', '/api/v1/tenant/settings/llm', { baseUrl: down.url })
  const unreachable = await ended(
    call,
    agentId,
    (await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Hi', projectId })).body.data.id,
  )
  t.match(unreachable, { status: 'failed', error: { code: 'LLM_UNREACHABLE' } })
  t.equal(await runsFinished('failed'), failedBefore + 2, 'both counted in atrium_agent_runs_finished_total')
})

t.test('refusals when a run is asked for', async (t) => {
  const a = await tenantWithLlm()
  const b = await tenantWithLlm()
  const projectOfB = await project(b.call)
  const agentOfA = await agent(a.call)
  const cross = await a.call('POST', `/api/v1/agents/${agentOfA}/execute`, { goal: 'x', projectId: projectOfB })
  t.equal(cross.status, 404, "tenant A's agent on tenant B's project")
  t.equal(cross.body.error.code, 'RESOURCE_NOT_FOUND')
  const foreignAgent = await b.call('POST', `/api/v1/agents/${agentOfA}/execute`, { goal: 'x', projectId: projectOfB })
  t.equal(foreignAgent.body.error.code, 'RESOURCE_NOT_FOUND', "tenant B cannot run tenant A's agent")
  t.equal((await b.call('GET', `/api/v1/agents/${agentOfA}`)).status, 404)

  const bare = await h.tenant()
  const bareProject = await project(bare.call)
  const bareAgent = await agent(bare.call)
  const unconfigured = await bare.call('POST', `/api/v1/agents/${bareAgent}/execute`, {
    goal: 'x',
    projectId: bareProject,
  })
  t.equal(unconfigured.status, 409)
  t.match(unconfigured.body.error, { code: 'LLM_NOT_CONFIGURED', details: { missing: Array } })

  const blank = await a.call('POST', `/api/v1/agents/${agentOfA}/execute`, {
    goal: '   ',
    projectId: await project(a.call),
  })
  t.equal(blank.body.error.code, 'VALIDATION_ERROR')
})

t.test('the plan bounds runs in progress per tenant, and another tenant is not held up', async (t) => {
  const slow = await fakeLlm(t, { respond: () => ({ text: 'slowly done', chunkDelayMs: 300 }) })
  const free = await tenantWithLlm('free', slow)
  const projectId = await project(free.call)
  const agentId = await agent(free.call, { autonomyLevel: 'low' })
  const first = await free.call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'one', projectId })
  t.equal(first.status, 202)
  const second = await free.call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'two', projectId })
  t.equal(second.status, 429)
  t.match(second.body.error, { code: 'RUN_LIMIT_EXCEEDED', details: { limit: 1, active: 1 } })

  const other = await tenantWithLlm('free')
  const otherProject = await project(other.call)
  const otherAgent = await agent(other.call, { autonomyLevel: 'low' })
  t.equal(
    (
      await other.call('POST', `/api/v1/agents/${otherAgent}/execute?wait=0`, {
        goal: 'mine',
        projectId: otherProject,
      })
    ).status,
    202,
    'another tenant still runs',
  )

  await ended(free.call, agentId, first.body.data.id)
  t.equal(
    (await free.call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'three', projectId })).status,
    202,
    'a slot frees when a run ends',
  )
})

t.test('cancel: a running run stops and applies nothing; a finished run is a CONFLICT', async (t) => {
  const slow = await fakeLlm(t)
  const { call, projectId, agentId } = await readyToRun(h, slow)
  slow.push(
    { toolCalls: [{ name: 'write_file', arguments: { path: 'draft.txt', content: 'half' } }] },
    { text: 'word '.repeat(40), chunkDelayMs: 250 },
  )
  const r = await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'Write slowly', projectId })
  const runId = r.body.data.id
  for (let i = 0; i < 200 && slow.requests.length < 2; i++) await sleep(25)
  t.equal(slow.requests.length, 2, 'the second step is streaming')
  const cancel = await call('POST', `/api/v1/agents/${agentId}/runs/${runId}/cancel`)
  t.equal(cancel.status, 202)
  t.equal(cancel.body.data.cancelRequested, true)
  const run = await ended(call, agentId, runId)
  t.equal(run.status, 'cancelled')
  t.equal(run.projectVersion, null)
  t.equal(
    (await call('GET', `/api/v1/projects/${projectId}/files/draft.txt`)).status,
    404,
    'the staged write was not applied',
  )
  const again = await call('POST', `/api/v1/agents/${agentId}/runs/${runId}/cancel`)
  t.equal(again.status, 409)
  t.match(again.body.error, { code: 'CONFLICT', details: { status: 'cancelled' } })
  t.match(
    (await runEvents(runId)).map((x) => [x.type, x.data.reason]),
    [
      ['agent.started', undefined],
      ['agent.failed', 'cancelled'],
    ],
  )
})

t.test('bad tool calls go back to the model as errors; the run goes on', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'medium' })
  const before = llm.requests.length
  llm.push(
    {
      toolCalls: [
        { name: 'write_file', arguments: { path: 'x.txt', content: 'nope' } },
        { name: 'read_file', arguments: { path: '../../etc/passwd' } },
        { name: 'read_file', arguments: { file: 'wrong argument' } },
        { name: 'read_file', arguments: { path: 'missing.txt' } },
      ],
    },
    { text: 'I could not do it.' },
  )
  const run = await ended(
    call,
    agentId,
    (await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'try things', projectId })).body.data.id,
  )
  t.equal(run.status, 'completed')
  t.match(
    run.steps[0].toolCalls.map((c: { error?: { code: string } }) => c.error?.code),
    ['VALIDATION_ERROR', 'VALIDATION_ERROR', 'VALIDATION_ERROR', 'RESOURCE_NOT_FOUND'],
  )
  const sent = JSON.stringify(llm.requests[before + 1]!.body.messages)
  t.match(sent, /no tool named write_file/, 'a medium agent cannot write')
  t.equal(run.projectVersion, null)
})

t.test('limits end a run failed with the reason', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'medium', maxSteps: 2 })
  llm.push(
    { toolCalls: [{ name: 'list_files', arguments: {} }] },
    { toolCalls: [{ name: 'list_files', arguments: {} }] },
  )
  const run = await ended(
    call,
    agentId,
    (await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'loop', projectId })).body.data.id,
  )
  t.match(run, { status: 'failed', error: { code: 'AGENT_STEP_LIMIT' } })
  t.equal(run.steps.length, 2)

  // A provider that reports a million tokens for one step: the next step is not taken.
  const spender = await agent(call, { autonomyLevel: 'medium' })
  llm.push({ toolCalls: [{ name: 'list_files', arguments: {} }], usage: { input: 999_990, output: 10 } })
  const spent = await ended(
    call,
    spender,
    (await call('POST', `/api/v1/agents/${spender}/execute`, { goal: 'spend', projectId })).body.data.id,
  )
  t.match(spent, {
    status: 'failed',
    error: { code: 'AGENT_TOKEN_LIMIT' },
    usage: { inputTokens: 999_990, outputTokens: 10 },
  })
  t.equal(spent.steps.length, 1)
})

t.test('a stream opened mid-run on another replica follows it live and ends with the run', async (t) => {
  const slow = await fakeLlm(t)
  const { call, apiKey, projectId, agentId } = await readyToRun(h, slow, { autonomyLevel: 'medium' })
  slow.push(
    { toolCalls: [{ name: 'list_files', arguments: {} }] },
    { text: 'one two three four five six seven eight', chunkDelayMs: 60 },
  )
  const other = await appOn(t, h.platform) // no job runner: it only serves the stream
  const runId = (await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'count', projectId })).body.data
    .id
  for (let i = 0; i < 200 && slow.requests.length < 2; i++) await sleep(20)
  const live = await other.app.inject({
    method: 'GET',
    url: `/api/v1/agents/${agentId}/runs/${runId}/stream`,
    headers: { authorization: `Bearer ${apiKey}` },
  })
  const followed = parseSse(live.body)
  t.equal(followed.at(-1)?.event, 'run.completed', 'the live stream ended with the run')
  const replay = parseSse((await call('GET', `/api/v1/agents/${agentId}/runs/${runId}/stream`)).raw.toString('utf8'))
  t.same(followed, replay, 'what was followed live is what a replay shows')
  t.match(live.body, /^retry: 1000\n: stream opened\n\n/, 'clients are told to reconnect after 1 s')
})

t.test("cancelling a queued run ends it at once and announces its last event's number to the streams", async (t) => {
  // An installation of its own with no job runner (another on the same database would start the run).
  const idle = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
  const tn = await llmTenant(idle, llm)
  const agentId = await agent(tn.call, { autonomyLevel: 'low' })
  const runId = (
    await tn.call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, {
      goal: 'wait',
      projectId: await project(tn.call),
    })
  ).body.data.id
  const heard: string[] = []
  const off = await idle.platform.cache.subscribe(runChannel(runId), (m) => heard.push(m))
  t.teardown(off)
  t.equal((await tn.call('POST', `/api/v1/agents/${agentId}/runs/${runId}/cancel`)).body.data.status, 'cancelled')
  const events = parseSse((await tn.call('GET', `/api/v1/agents/${agentId}/runs/${runId}/stream`)).raw.toString('utf8'))
  t.equal(events.at(-1)!.event, 'run.cancelled')
  for (let i = 0; i < 100 && !heard.length; i++) await sleep(10)
  // A stream that has every event before it reads this one at once (not at its next poll); it ends the run.
  t.same(heard, [writtenMessage(events.at(-1)!.id, true)])
})

t.test('web search through a SearXNG-compatible endpoint, through the outbound guard', async (t) => {
  const queries: string[] = []
  const search = http.createServer((req, res) => {
    const u = new URL(req.url!, 'http://x')
    queries.push(u.searchParams.get('q') ?? '')
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        results: [{ title: 'Atrium', url: 'https://example.com/atrium', content: 'Self-hosted AI apps' }],
      }),
    )
  })
  await new Promise<void>((resolve) => search.listen(0, '127.0.0.1', resolve))
  t.teardown(() => search.close())
  const withSearch = await testApp(
    t,
    {
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32',
      WEB_SEARCH_URL: `http://127.0.0.1:${(search.address() as AddressInfo).port}/search`,
    },
    { jobs: { pollMs: 50 } },
  )
  const tn = await llmTenant(withSearch, llm)
  const projectId = (await tn.call('POST', '/api/v1/projects', { name: 'p' })).body.data.id
  const agentId = (
    await tn.call('POST', '/api/v1/agents', { name: 'r', systemPrompt: '', config: { autonomyLevel: 'medium' } })
  ).body.data.id
  llm.push({ toolCalls: [{ name: 'web_search', arguments: { query: 'self-hosted ai' } }] }, { text: 'Found it.' })
  const runId = (await tn.call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'search', projectId })).body.data.id
  const run = await ended(tn.call, agentId, runId)
  t.equal(run.status, 'completed')
  t.same(queries, ['self-hosted ai'])
  t.match(run.steps[0].toolCalls[0].result, /example\.com\/atrium/)
})
