// Agent runs on the real server (PostgreSQL, Redis) against an instant OpenAI-compatible provider
// (the suite's fake, on loopback):
// - overhead per step: runs of STEPS steps (a list_files call each, then the answer), one at a time;
//   the time per step, less what the same model calls cost when this process makes them directly
//   through the AI SDK's provider (the bare stack: no job, no tools, no records, no events), is what Atrium adds;
// - 200 concurrent runs on one replica (AGENT_RUNS_PER_REPLICA=200, two enterprise tenants of 100):
//   the time from the first execute to the last run completed, and the server's peak RSS.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import type { LanguageModelV3FunctionTool, LanguageModelV3Prompt, LanguageModelV3ToolCall } from '@ai-sdk/provider'
import type { Test } from 'tap'
import { fakeLlm, type FakeRequest, type FakeTurn } from '../test/helpers/fake-llm.js'
import { apiCaller, createTenant, peakRssMb, pool, start, stop, useFakeLlm } from './lib.js'

const STEPS = 5
const SEQUENTIAL_RUNS = Number(process.env.BENCH_AGENT_RUNS ?? 20)
const CONCURRENT = 200

export interface AgentBench {
  perStepMs: number
  bareStepMs: number
  runs: number
  concurrent: { runs: number; seconds: number; peakRssMb: number; steps: number }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Steps of list_files until the conversation has `STEPS - 1` tool results, then the answer. */
const script = (req: FakeRequest): FakeTurn => {
  const results = (req.body.messages as { role: string }[]).filter((m) => m.role === 'tool').length
  return results < STEPS - 1
    ? { toolCalls: [{ name: 'list_files', arguments: {} }], usage: { input: 50, output: 5 } }
    : { text: 'All done here.', usage: { input: 60, output: 4 } }
}

export async function benchAgents(env: Record<string, string>): Promise<AgentBench> {
  const teardowns: (() => unknown)[] = []
  const llm = await fakeLlm({ teardown: (fn: () => unknown) => teardowns.push(fn) } as unknown as Test, {
    respond: script,
  })
  const server = await start('server/main.ts', { ...env, AGENT_RUNS_PER_REPLICA: String(CONCURRENT) })
  try {
    const tenants = [
      await createTenant(env, ['--plan', 'enterprise']),
      await createTenant(env, ['--plan', 'enterprise']),
    ]
    const setups = await Promise.all(
      tenants.map(async ({ apiKey }) => {
        const call = apiCaller(server.base, apiKey)
        await useFakeLlm(call, llm.url)
        const projectId = (await call('POST', '/api/v1/projects', { name: 'bench' })).id
        const agentId = (
          await call('POST', '/api/v1/agents', {
            name: 'bench',
            systemPrompt: 'Be quick.',
            config: { autonomyLevel: 'medium', maxSteps: STEPS },
          })
        ).id
        const run = async () => {
          // wait=0 and a poll, as the figures in docs/performance.md were measured (before the request could wait).
          const { id } = await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, {
            goal: 'List the files, repeatedly.',
            projectId,
          })
          for (;;) {
            const r = await call<{ status: string }>('GET', `/api/v1/agents/${agentId}/runs/${id}`)
            if (r.status === 'completed') return
            if (r.status === 'failed' || r.status === 'cancelled')
              throw new Error(`run ${r.status}: ${JSON.stringify(r)}`)
            await sleep(5)
          }
        }
        return { run }
      }),
    )

    // Warm-up, then runs one at a time.
    await setups[0]!.run()
    const t0 = performance.now()
    for (let i = 0; i < SEQUENTIAL_RUNS; i++) await setups[0]!.run()
    const perStepMs = (performance.now() - t0) / (SEQUENTIAL_RUNS * STEPS)

    // The bare stack: the same model calls, made directly with the AI SDK's provider as the server makes them
    // (doStream).
    const model = createOpenAICompatible({
      name: 'bench',
      baseURL: llm.url,
      apiKey: 'sk-bench-0000000000',
      includeUsage: true,
    }).chatModel('bench')
    const tools: LanguageModelV3FunctionTool[] = [
      {
        type: 'function',
        name: 'list_files',
        description: 'List files',
        inputSchema: { type: 'object', properties: {} },
      },
    ]
    const bare = async () => {
      const prompt: LanguageModelV3Prompt = [
        { role: 'user', content: [{ type: 'text', text: 'List the files, repeatedly.' }] },
      ]
      for (let step = 0; step < STEPS; step++) {
        const { stream } = await model.doStream({ prompt, tools, toolChoice: { type: 'auto' } })
        const calls: LanguageModelV3ToolCall[] = []
        for await (const part of stream) if (part.type === 'tool-call') calls.push(part)
        if (!calls.length) return
        prompt.push({
          role: 'assistant',
          content: calls.map((c) => ({
            type: 'tool-call',
            toolCallId: c.toolCallId,
            toolName: c.toolName,
            input: JSON.parse(c.input) as unknown,
          })),
        })
        for (const c of calls)
          prompt.push({
            role: 'tool',
            content: [
              {
                type: 'tool-result',
                toolCallId: c.toolCallId,
                toolName: c.toolName,
                output: { type: 'json', value: { files: [] } },
              },
            ],
          })
      }
    }
    await bare()
    const t1 = performance.now()
    for (let i = 0; i < SEQUENTIAL_RUNS; i++) await bare()
    const bareStepMs = (performance.now() - t1) / (SEQUENTIAL_RUNS * STEPS)

    // 200 at once on this one replica.
    const t2 = performance.now()
    await pool(CONCURRENT, CONCURRENT, (i) => setups[i % 2]!.run())
    const seconds = (performance.now() - t2) / 1000
    return {
      perStepMs,
      bareStepMs,
      runs: SEQUENTIAL_RUNS,
      concurrent: { runs: CONCURRENT, seconds, peakRssMb: peakRssMb(server.child.pid!), steps: STEPS },
    }
  } finally {
    await stop(server)
    for (const fn of teardowns) await fn()
  }
}

export function printAgents(r: AgentBench): void {
  console.log(
    `\nagent runs: ${r.runs} runs of ${STEPS} steps (a list_files call each, then the answer), one at a time, instant provider on loopback`,
  )
  console.log(
    `  bare stack, the same model calls through the AI SDK's provider from this process: ${r.bareStepMs.toFixed(2)} ms per step`,
  )
  console.log(
    `  Atrium (job, tools, run record, events, usage): ${r.perStepMs.toFixed(2)} ms per step, overhead ${(r.perStepMs - r.bareStepMs).toFixed(2)} ms per step (${((r.bareStepMs / r.perStepMs) * 100).toFixed(1)}% of Atrium's step time is the model call)`,
  )
  console.log(
    `  ${r.concurrent.runs} concurrent runs of ${r.concurrent.steps} steps on one replica: ${r.concurrent.seconds.toFixed(1)} s, ${(r.concurrent.runs / r.concurrent.seconds).toFixed(1)} runs/s, peak RSS ${r.concurrent.peakRssMb} MB`,
  )
}
