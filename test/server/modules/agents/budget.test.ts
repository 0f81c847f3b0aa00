// A run's budget (runner.ts): what one tenant's model can make a run hold is bounded, and going over
// fails that run with its own code, never the process. Found by the second hardening round: 3,000
// list_files calls in one answer grew the server by 4 GB and killed it; run records kept every
// write_file's content whole.
import t from 'tap'
import { RUN_MAX_CONVERSATION_CHARS, STEP_MAX_TOOL_CALLS } from '../../../../server/modules/agents/runner.js'
import { listRuns, RUNS_PAGE_MAX_BYTES } from '../../../../server/modules/agents/store.js'
import { agent, ended, project, readyToRun, runToEnd, tenantWithLlm } from '../../../helpers/agents.js'
import { appOn, testApp } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { testPlatform } from '../../../helpers/platform.js'
import { parseSse } from '../../../helpers/sse.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)

/** The file objects of a project in the platform's store. */
async function storedObjects(tenantId: string, projectId: string): Promise<string[]> {
  const keys: string[] = []
  for await (const o of h.platform.blobs.list(`tenants/${tenantId}/projects/${projectId}/files/`)) keys.push(o.key)
  return keys.sort()
}

t.test(
  'an answer with thousands of tool calls fails the run AGENT_TOOL_CALL_LIMIT, running none of them',
  async (t) => {
    const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'medium' })
    llm.push({ toolCalls: Array.from({ length: 3000 }, () => ({ name: 'list_files', arguments: {} })) })
    const run = await runToEnd(call, agentId, projectId)
    t.match(run, {
      status: 'failed',
      error: { code: 'AGENT_TOOL_CALL_LIMIT', message: new RegExp(`more than ${STEP_MAX_TOOL_CALLS} tool calls`) },
    })
    t.same(run.steps, [], 'no step of it is kept')
    const stream = await call('GET', `/api/v1/agents/${agentId}/runs/${run.id}/stream`)
    t.notOk(
      parseSse(stream.raw.toString('utf8')).some((e) => e.event === 'tool.call'),
      'no tool ran',
    )
    const { tenantId } = await h.tenant()
    t.ok(tenantId, 'the process serves on')
  },
)

t.test('a conversation past the budget fails the run AGENT_MEMORY_LIMIT as of its last completed step', async (t) => {
  const { call, tenantId } = await tenantWithLlm(h, llm)
  const projectId = await project(call)
  const big = 'a'.repeat(64 * 1024)
  t.equal(
    (await call('PUT', `/api/v1/projects/${projectId}/files/big.txt`, big, { 'content-type': 'text/plain' })).status,
    201,
  )
  const agentId = await agent(call, { autonomyLevel: 'medium' })
  // Each answer reads the 64 KiB file 40 times: 2.6 million characters of results a step.
  const reads = () => ({
    toolCalls: Array.from({ length: 40 }, () => ({ name: 'read_file', arguments: { path: 'big.txt' } })),
  })
  llm.push(reads(), reads())
  const run = await runToEnd(call, agentId, projectId)
  t.match(run, { status: 'failed', error: { code: 'AGENT_MEMORY_LIMIT' } })
  t.equal(run.steps.length, 1, 'the first step is kept; the one that went over is not')
  const [stored] = await h.platform.db.tenant(
    tenantId,
    (sql) =>
      sql<{ chars: number }[]>`select octet_length(messages::text)::int as chars from agent_runs where id = ${run.id}`,
  )
  t.ok(
    stored!.chars <= RUN_MAX_CONVERSATION_CHARS * 1.1,
    `the stored conversation stays within the budget (${stored!.chars} bytes)`,
  )
})

t.test(
  'a NUL or an unpaired surrogate in a tool call is an error result the model can correct; the run goes on',
  async (t) => {
    // found by the second hardening round: the run ended RUN_INTERRUPTED after four retries, blaming a stopped replica
    const { call, projectId, agentId } = await readyToRun(h, llm)
    const before = llm.requests.length
    llm.push(
      {
        toolCalls: [
          { name: 'read_file', arguments: { path: 'a\u0000b' }, id: 'nul' },
          { name: 'write_file', arguments: { path: 'notes.txt', content: 'half \ud800 a pair' }, id: 'lone' },
        ],
      },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'fixed' }, id: 'fixed' }] },
      { text: 'Done, with valid text this time.' },
    )
    const run = await runToEnd(call, agentId, projectId)
    t.match(run, { status: 'completed', output: 'Done, with valid text this time.' })
    t.match(run.steps[0].toolCalls, [
      { id: 'nul', error: { code: 'VALIDATION_ERROR', message: /NUL/ } },
      { id: 'lone', error: { code: 'VALIDATION_ERROR', message: /unpaired surrogates/ } },
    ])
    const handedBack = llm.requests[before + 1]!.body.messages.filter((m: { role: string }) => m.role === 'tool').map(
      (m: { content: string }) => m.content,
    )
    t.match(handedBack, [/NUL/, /unpaired surrogates/], 'the model was told why')
    t.equal(
      (await call('GET', `/api/v1/projects/${projectId}/files/notes.txt`)).raw.toString(),
      'fixed',
      'only the corrected write was applied',
    )
  },
)

t.test(
  "the run's record, events and list keep excerpts: a large write's content is in the file, not the run",
  async (t) => {
    const { call, projectId, agentId } = await readyToRun(h, llm)
    const content = 'line of text\n'.repeat(8000) // 104,000 characters
    llm.push({ toolCalls: [{ name: 'write_file', arguments: { path: 'long.txt', content } }] }, { text: 'Written.' })
    const run = await runToEnd(call, agentId, projectId)
    t.equal(run.status, 'completed')
    const kept = run.steps[0].toolCalls[0].arguments
    t.equal(kept.path, 'long.txt')
    t.ok(
      kept.content.length < 1200 && /more characters\]$/.test(kept.content),
      `the record keeps an excerpt (${kept.content.length} characters)`,
    )
    t.equal(
      (await call('GET', `/api/v1/projects/${projectId}/files/long.txt`)).raw.toString(),
      content,
      'the file has it all',
    )
    const events = parseSse((await call('GET', `/api/v1/agents/${agentId}/runs/${run.id}/stream`)).raw.toString('utf8'))
    const toolCall = events.find((e) => e.event === 'tool.call')!
    t.ok(JSON.stringify(toolCall.data).length < 2000, 'the tool.call event holds the excerpt')
    const list = await call('GET', `/api/v1/agents/${agentId}/runs`)
    t.equal(list.status, 200)
    t.notOk('steps' in list.body.data[0], 'a list holds no steps (the record has them)')
  },
)

t.test('a page of runs stops at its byte budget and goes on with the next cursor', async (t) => {
  const { call, projectId, agentId } = await readyToRun(h, llm, { autonomyLevel: 'low' })
  const outputs = Array.from({ length: 5 }, (_, i) => `${i}`.repeat(900_000)) // 900,000 characters, one piece each
  for (const text of outputs) {
    llm.push({ text })
    t.equal((await runToEnd(call, agentId, projectId)).status, 'completed')
  }
  const first = await call('GET', `/api/v1/agents/${agentId}/runs?limit=50`)
  t.equal(first.status, 200)
  const size = first.raw.length
  t.ok(
    first.body.data.length >= 1 && first.body.data.length < 5,
    `the page holds ${first.body.data.length} runs (${size} bytes)`,
  )
  t.ok(size < RUNS_PAGE_MAX_BYTES + 1024 * 1024, 'within the budget')
  t.ok(first.body.meta.nextCursor, 'and says where to go on')
  const seen = [...first.body.data]
  for (let cursor = first.body.meta.nextCursor; cursor;) {
    const next = await call('GET', `/api/v1/agents/${agentId}/runs?limit=50&cursor=${cursor}`)
    seen.push(...next.body.data)
    cursor = next.body.meta.nextCursor
  }
  t.same(
    seen.map((r: { output: string }) => r.output[0]),
    ['4', '3', '2', '1', '0'],
    'every run once, newest first',
  )
})

t.test(
  'a run stored larger than a run may keep (written before the bounds) fails AGENT_MEMORY_LIMIT instead of being loaded',
  async (t) => {
    const platform = await testPlatform(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
    const quiet = await appOn(t, platform, { jobs: false })
    const { call, tenantId, projectId, agentId } = await readyToRun(quiet, llm, { autonomyLevel: 'low' })
    // wait=0: no replica runs it yet, so the request would only wait out its bound.
    const queued = (await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'go', projectId })).body.data
    await platform.db.system(
      (sql) =>
        sql`update agent_runs set messages = (select jsonb_agg(repeat('x', 1000000)) from generate_series(1, 24)) where id = ${queued.id}`,
    )
    const requests = llm.requests.length
    await appOn(t, platform, { jobs: { pollMs: 50 } }) // a replica that works: it takes the run
    const run = await ended(call, agentId, queued.id)
    t.match(run, { status: 'failed', error: { code: 'AGENT_MEMORY_LIMIT', message: /stored state/ } })
    t.equal(llm.requests.length, requests, 'the model was not called')
    const [row] = await platform.db.tenant(
      tenantId,
      (sql) => sql<{ status: string }[]>`select status from agent_runs where id = ${queued.id}`,
    )
    t.equal(row!.status, 'failed')
  },
)

t.test(
  'a write over the quota is an error result with nothing uploaded; a run that fails lets go of what it staged',
  async (t) => {
    const { call, tenantId } = await tenantWithLlm(h, llm, 'free')
    const projectId = await project(call)
    // The free plan: 1 MiB a file, 10 MiB a project. Ten files of 1,000,000 bytes leave 485,760.
    for (let i = 0; i < 10; i++)
      t.equal(
        (
          await call('PUT', `/api/v1/projects/${projectId}/files/f${i}.bin`, Buffer.alloc(1_000_000, i), {
            'content-type': 'application/octet-stream',
          })
        ).status,
        201,
      )
    const before = await storedObjects(tenantId, projectId)
    const agentId = await agent(call, { autonomyLevel: 'high', maxSteps: 2 })
    llm.push(
      { toolCalls: [{ name: 'write_file', arguments: { path: 'over.txt', content: 'o'.repeat(600_000) } }] },
      { text: 'Could not.' },
    )
    const refused = await runToEnd(call, agentId, projectId)
    t.match(refused.steps[0].toolCalls[0], { error: { code: 'QUOTA_EXCEEDED' } })
    t.same(await storedObjects(tenantId, projectId), before, 'nothing was uploaded for it')

    // Two writes that fit, then the step limit: the run fails, and its staged bytes go.
    llm.push(
      { toolCalls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'first staged file' } }] },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'b.txt', content: 'second staged file' } }] },
    )
    const failed = await runToEnd(call, agentId, projectId)
    t.match(failed, { status: 'failed', error: { code: 'AGENT_STEP_LIMIT' } })
    // Let go of once the run has ended (its end committed first: a run whose end failed resumes with them).
    let left = await storedObjects(tenantId, projectId)
    for (let i = 0; i < 100 && left.length !== before.length; i++)
      left = await new Promise((r) => setTimeout(r, 50)).then(() => storedObjects(tenantId, projectId))
    t.same(left, before, 'what the failed run staged was removed')
  },
)

t.test(
  'cuts never split a character in two: an emoji at the edge of an excerpt, a NUL in a file read, and the run completes',
  async (t) => {
    // found in review: an excerpt ending in half of a surrogate pair was refused by jsonb, and the step retried until
    // RUN_INTERRUPTED
    const { call } = await tenantWithLlm(h, llm)
    const projectId = await project(call)
    t.equal(
      (
        await call('PUT', `/api/v1/projects/${projectId}/files/blob.bin`, Buffer.from([0x61, 0x00, 0x62, 0xff]), {
          'content-type': 'application/octet-stream',
        })
      ).status,
      201,
    )
    const agentId = await agent(call)
    const content = `${'a'.repeat(1023)}\u{1f600}${'b'.repeat(3000)}` // the pair at characters 1024 and 1025: where an argument is cut
    llm.push(
      {
        toolCalls: [
          { name: 'write_file', arguments: { path: 'emoji.txt', content } },
          { name: 'read_file', arguments: { path: 'blob.bin' } },
        ],
        text: `${'c'.repeat(16 * 1024 - 1)}\u{1f600} and on`,
      },
      { text: 'Done.' },
    )
    const run = await runToEnd(call, agentId, projectId)
    t.match(run, { status: 'completed', output: 'Done.' })
    t.match(
      run.steps[0].toolCalls[1],
      { name: 'read_file', result: /a\\ufffdb|a\ufffdb/ },
      'the NUL read back as U+FFFD',
    )
    t.equal(
      (await call('GET', `/api/v1/projects/${projectId}/files/emoji.txt`)).raw.toString(),
      content,
      'the file holds it whole',
    )
  },
)

t.test(
  "a page of runs does not read the agent's snapshot (its system prompt runs to 100,000 characters)",
  async (t) => {
    const { tenantId, call } = await tenantWithLlm(h, llm)
    const projectId = await project(call)
    const agentId = await agent(call, { autonomyLevel: 'low' }, 'p'.repeat(100_000))
    llm.push({ text: 'ok' })
    t.equal((await runToEnd(call, agentId, projectId)).status, 'completed')
    const page = await h.platform.db.tenant(tenantId, (sql) => listRuns(sql, tenantId, agentId, 10, null))
    t.equal(page.rows.length, 1)
    t.notOk('agent_snapshot' in page.rows[0]!, 'not read')
  },
)
