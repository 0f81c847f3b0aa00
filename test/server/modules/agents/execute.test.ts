// POST /agents/:id/execute waits for its run, as the specification's "Run with an output" asks: 200
// with the run and its output (or its error) when the run ends within ?wait seconds (default 30),
// else 202 with the record as it stands; wait=0 answers at once. The wait listens for the run's end
// on the channel of its event log (the end wakes it, nothing polls), holds no database connection
// (the embedded database has one, and serves everyone else meanwhile), hears a run that ends on
// another replica, and ends with 202 when the server closes.
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { agent, ended, project, readyToRun, tenantWithLlm } from '../../../helpers/agents.js'
import { appOn, caller, testApp, type Caller } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { configFrom, services, testEnv } from '../../../helpers/platform.js'
import { createLogger } from '../../../../server/logger.js'
import { runChannel } from '../../../../server/modules/agents/runner.js'
import type { Cache } from '../../../../server/platform/cache.js'
import { openPlatform } from '../../../../server/platform/index.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A promise the test resolves when it chooses: a model answer held until then. */
function gate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/** The channels subscribed to on `cache` from now on: a waiting request listens on its run's. */
function subscriptions(t: Test, cache: Cache): string[] {
  const channels: string[] = []
  const real = cache.subscribe
  const spied = cache as { subscribe: Cache['subscribe'] }
  spied.subscribe = (channel, handler) => (channels.push(channel), real.call(cache, channel, handler))
  t.teardown(() => void (spied.subscribe = real))
  return channels
}

/** The agent's newest run once it is running (its model call held by the test). */
async function running(call: Caller, agentId: string) {
  for (let i = 0; i < 400; i++) {
    const [run] = (await call('GET', `/api/v1/agents/${agentId}/runs`)).body.data
    if (run?.status === 'running') return run
    await sleep(50)
  }
  throw new Error('the run did not start')
}

t.test('an execute as the specification writes it answers 200 with the run and its output', async (t) => {
  const { call } = await tenantWithLlm(h, llm)
  const projectId = await project(call)
  const agentId = await agent(call, { autonomyLevel: 'medium' }, 'Answer briefly.')
  llm.push({ text: 'The answer is 42.', usage: { input: 20, output: 6 } })
  const r = await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'What is the answer?', projectId })
  t.equal(r.status, 200)
  t.match(r.body, {
    data: {
      id: String,
      agentId,
      projectId,
      goal: 'What is the answer?',
      status: 'completed',
      output: 'The answer is 42.',
      error: null,
      usage: { inputTokens: 20, outputTokens: 6 },
      finishedAt: /Z$/,
      steps: [{ step: 1, text: 'The answer is 42.' }],
    },
    meta: { request_id: String, timestamp: /Z$/ },
  })
  t.same(
    r.body.data,
    (await call('GET', `/api/v1/agents/${agentId}/runs/${r.body.data.id}`)).body.data,
    'the run record, as GET shows it',
  )
})

t.test('a run that fails within the wait answers 200 with the failed run and its error', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  llm.push({ status: 401 })
  const r = await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Hi', projectId })
  t.equal(r.status, 200)
  t.match(r.body.data, { status: 'failed', output: null, error: { code: 'LLM_KEY_REJECTED', message: String } })
})

t.test('a run slower than the wait answers 202 at the bound, as it stands; it goes on to its end', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  const channels = subscriptions(t, h.platform.cache)
  const model = gate()
  llm.push({ text: 'slow and steady', hold: (piece) => (piece === 0 ? model.opened : undefined) })
  const r = await call('POST', `/api/v1/agents/${agentId}/execute?wait=1`, { goal: 'Take your time', projectId })
  t.equal(r.status, 202)
  t.match(r.body.data, { status: /^(queued|running)$/, output: null, finishedAt: null })
  t.ok(channels.includes(runChannel(r.body.data.id)), "it listened for the run's end")
  model.open()
  t.match(await ended(call, agentId, r.body.data.id), { status: 'completed', output: 'slow and steady' })
})

t.test('wait=0 answers 202 at once with the run queued, without listening for its end', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  const channels = subscriptions(t, h.platform.cache)
  llm.push({ text: 'done later' })
  const r = await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'Start it', projectId })
  t.equal(r.status, 202)
  t.match(r.body.data, { status: 'queued', output: null, startedAt: null })
  t.notOk(channels.includes(runChannel(r.body.data.id)), 'nothing waited for its end')
  t.match(await ended(call, agentId, r.body.data.id), { status: 'completed', output: 'done later' })
})

t.test('a wait outside 0 to 60 seconds, or not a whole number, is a VALIDATION_ERROR; no run starts', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  for (const wait of ['61', '-1', '1.5', 'soon', '99999999999']) {
    const r = await call('POST', `/api/v1/agents/${agentId}/execute?wait=${wait}`, { goal: 'x', projectId })
    t.equal(r.status, 400, `wait=${wait}`)
    t.match(r.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'querystring.wait' }] } })
  }
  const unknown = await call('POST', `/api/v1/agents/${agentId}/execute?timeout=5`, { goal: 'x', projectId })
  t.match(unknown.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'querystring.timeout' }] } })
  t.same((await call('GET', `/api/v1/agents/${agentId}/runs`)).body.data, [], 'nothing was queued')
})

t.test(
  'a waiting request holds no database connection: others are served meanwhile, and the run’s end answers it',
  async (t) => {
    const a = await readyToRun(h, llm, { autonomyLevel: 'low' })
    const b = await h.tenant()
    const model = gate()
    llm.push({ text: 'finally', hold: (piece) => (piece === 0 ? model.opened : undefined) })
    let answered = false
    const waiting = a
      .call('POST', `/api/v1/agents/${a.agentId}/execute?wait=60`, { goal: 'Wait for it', projectId: a.projectId })
      .then((r) => ((answered = true), r))
    await running(a.call, a.agentId)
    // The embedded database has one connection: a request that held it while waiting would block these.
    t.equal((await b.call('GET', '/api/v1/projects')).status, 200, "another tenant's request is served")
    t.equal((await b.call('POST', '/api/v1/projects', { name: 'meanwhile' })).status, 201, 'and its writes')
    t.equal((await a.call('GET', `/api/v1/agents/${a.agentId}`)).status, 200, "and the same tenant's")
    t.notOk(answered, 'the request still waits while the run goes on')
    model.open()
    const r = await waiting
    t.equal(r.status, 200)
    t.match(r.body.data, { status: 'completed', output: 'finally' })
  },
)

t.test('a run that another replica executes: its end reaches the replica where the request waits', async (t) => {
  // This app runs no jobs: the run is taken by the job runner of h, on the same platform.
  const front = await appOn(t, h.platform)
  const { apiKey, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  llm.push({ text: 'from elsewhere' })
  const r = await caller(front.app, apiKey)('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Go', projectId })
  t.equal(r.status, 200)
  t.match(r.body.data, { status: 'completed', output: 'from elsewhere' })
})

t.test(
  'two replicas on one PostgreSQL and one Redis: the end travels through Redis to the waiting request',
  {
    skip:
      services.databaseUrl && services.redisUrl
        ? false
        : 'needs TEST_DATABASE_URL and TEST_REDIS_URL: replicas share PostgreSQL and hear each other through Redis pub/sub',
  },
  async (t) => {
    const env = await testEnv(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
    const replica = async (jobs: boolean) => {
      const config = configFrom(env)
      const platform = await openPlatform(config, createLogger(config.LOG_LEVEL))
      t.teardown(() => platform.close())
      return appOn(t, platform, jobs ? { jobs: { pollMs: 50 } } : {})
    }
    const front = await replica(false) // answers requests, runs nothing
    await replica(true) // runs the jobs
    const { call, projectId, agentId } = await readyToRun(front, llm, { autonomyLevel: 'low' })
    llm.push({ text: 'through Redis' })
    const r = await call('POST', `/api/v1/agents/${agentId}/execute`, { goal: 'Go', projectId })
    t.equal(r.status, 200)
    t.match(r.body.data, { status: 'completed', output: 'through Redis' })
  },
)

t.test('a waiting request answers 202 with the run as it stands when the server closes', async (t) => {
  const closing = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
  const { call, projectId, agentId } = await readyToRun(closing, llm, { autonomyLevel: 'low' })
  const model = gate()
  llm.push({ text: 'never waited for', hold: (piece) => (piece === 0 ? model.opened : undefined) })
  const waiting = call('POST', `/api/v1/agents/${agentId}/execute?wait=60`, { goal: 'Wait', projectId })
  await running(call, agentId)
  // What drain() does on SIGTERM: a drain waits for requests in flight, so this one must not wait out its bound. The
  // close cannot end before the model answers (the job runner gives the running handler its grace first), and the
  // model is held until the request has its answer.
  const order: string[] = []
  closing.app.draining = true
  const closed = closing.app.close().then(() => order.push('closed'))
  const r = await waiting
  order.push('answered')
  t.equal(r.status, 202)
  t.match(r.body.data, { status: 'running', output: null })
  model.open()
  await closed
  t.same(order, ['answered', 'closed'], 'answered as the server began closing, not at the bound of its wait')
})

t.test('a client that goes away stops the wait: the request stops listening for the run', async (t) => {
  const { apiKey, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  await h.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = h.app.server.address() as AddressInfo
  const left: string[] = []
  const cache = h.platform.cache as { subscribe: Cache['subscribe'] }
  const real = cache.subscribe
  cache.subscribe = async (channel, handler) => {
    const off = await real.call(h.platform.cache, channel, handler)
    return async () => (left.push(channel), off())
  }
  t.teardown(() => void (cache.subscribe = real))
  const model = gate()
  llm.push({ text: 'nobody reads this', hold: (piece) => (piece === 0 ? model.opened : undefined) })
  const client = new AbortController()
  const request = fetch(`http://127.0.0.1:${port}/api/v1/agents/${agentId}/execute?wait=60`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ goal: 'Leave early', projectId }),
    signal: client.signal,
  }).catch(() => 'aborted')
  const run = await running(caller(h.app, apiKey), agentId)
  client.abort()
  t.equal(await request, 'aborted')
  for (let i = 0; i < 200 && !left.includes(runChannel(run.id)); i++) await sleep(25)
  t.ok(left.includes(runChannel(run.id)), 'it stopped listening while the run still waits for its model')
  model.open()
  t.match(await ended(caller(h.app, apiKey), agentId, run.id), { status: 'completed', output: 'nobody reads this' })
})
