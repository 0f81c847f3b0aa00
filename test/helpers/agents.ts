// Agents and runs for the tests that drive them through the API: a tenant whose LLM settings point
// at the suite's fake provider, a project, an agent, and a run waited on until it ends.
import type { Caller, TestApp } from './app.js'
import type { FakeLlm } from './fake-llm.js'

export interface LlmTenant {
  tenantId: string
  apiKey: string
  call: Caller
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A tenant of `h` whose model is the fake provider (its app must allow 127.0.0.1 outbound). */
export async function tenantWithLlm(
  h: TestApp,
  provider: FakeLlm,
  plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'enterprise',
  apiKey = 'sk-test-key-1234567890',
): Promise<LlmTenant> {
  const tn = await h.tenant(plan)
  const r = await tn.call('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'openai-compatible',
    baseUrl: provider.url,
    model: 'test-model',
    apiKey,
  })
  if (r.status !== 200) throw new Error(`settings: ${r.status} ${JSON.stringify(r.body)}`)
  return tn
}

export async function project(call: Caller, name = 'Workspace'): Promise<string> {
  const r = await call('POST', '/api/v1/projects', { name })
  return r.body.data.id
}

export async function agent(
  call: Caller,
  config: Record<string, unknown> = { autonomyLevel: 'high' },
  systemPrompt = 'You are careful.',
): Promise<string> {
  const r = await call('POST', '/api/v1/agents', { name: 'Helper', systemPrompt, config })
  if (r.status !== 201) throw new Error(`agent: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.data.id
}

/** What a run needs: a tenant of `h` whose model is `provider`, a project, and an agent of `config`. */
export async function readyToRun(
  h: TestApp,
  provider: FakeLlm,
  config?: Record<string, unknown>,
  plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'enterprise',
) {
  const tn = await tenantWithLlm(h, provider, plan)
  return { ...tn, projectId: await project(tn.call), agentId: await agent(tn.call, config) }
}

/** The run once it has ended (the job runner polls every 50 ms in these tests). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON from the API
export async function ended(call: Caller, agentId: string, runId: string): Promise<any> {
  for (let i = 0; i < 1200; i++) {
    const r = await call('GET', `/api/v1/agents/${agentId}/runs/${runId}`)
    if (['completed', 'failed', 'cancelled'].includes(r.body.data.status)) return r.body.data
    await sleep(50)
  }
  throw new Error('the run did not end')
}

/** Starts a run and waits for its end: the answer has it when the run ended within the request's wait (200). */
export async function runToEnd(call: Caller, agentId: string, projectId: string, goal = 'do it') {
  const r = await call('POST', `/api/v1/agents/${agentId}/execute`, { goal, projectId })
  if (r.status === 200) return r.body.data
  if (r.status !== 202) throw new Error(`execute: ${r.status} ${JSON.stringify(r.body)}`)
  return ended(call, agentId, r.body.data.id)
}
