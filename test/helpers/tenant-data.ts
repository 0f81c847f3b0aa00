// A tenant with some of everything an export holds, made through the API as a user would: projects
// with versions and files (one file changed, so an older version holds other bytes), an agent and a
// completed run (through the fake model provider), a chat session with a reply, and LLM settings.
import type { Caller } from './app.js'
import type { FakeLlm } from './fake-llm.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function must(
  call: Caller,
  method: 'GET' | 'POST' | 'PATCH' | 'PUT',
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
) {
  const r = await call(method, url, body, headers)
  if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body?.data
}

async function until<T>(what: string, probe: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await probe()
    if (v !== null) return v
    await sleep(50)
  }
  throw new Error(`${what} did not happen`)
}

export interface TenantData {
  projectIds: string[]
  agentId: string
  runId: string
  sessionId: string
  /** Path to content of the first project's current files. */
  files: Record<string, string>
  /** Content an older version of the first project held and the current files do not. */
  oldContent: string
}

/**
 * Fills the tenant of `call`; the app must run jobs (agent runs, chat replies) and allow the fake provider (loopback).
 */
export async function fillTenant(call: Caller, llm: FakeLlm): Promise<TenantData> {
  await must(call, 'PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'openai-compatible',
    baseUrl: llm.url,
    model: 'test-model',
    apiKey: 'sk-export-test-key-0123456789',
  })
  const first = await must(call, 'POST', '/api/v1/projects', {
    name: 'Atlas',
    description: 'The first project',
    language: 'typescript',
  })
  const second = await must(call, 'POST', '/api/v1/projects', {
    name: 'Beacon, "quoted"',
    description: '=1+1 looks like a formula',
    language: '',
  })
  await must(call, 'PATCH', `/api/v1/projects/${first.id}`, { description: 'Renamed once' })
  const oldContent = 'first draft\n'
  await must(call, 'PUT', `/api/v1/projects/${first.id}/files/docs/readme.md`, oldContent, {
    'content-type': 'text/markdown',
  })
  const files = {
    'docs/readme.md': 'second draft, with ünïcödé\n',
    'src/main.ts': 'export const answer = 42\n',
    'data/blob.bin': '\u0000\u0001binary\u00ff',
  }
  for (const [path, content] of Object.entries(files)) {
    await must(call, 'PUT', `/api/v1/projects/${first.id}/files/${path}`, content, {
      'content-type': path.endsWith('.bin') ? 'application/octet-stream' : 'text/plain',
    })
  }
  const agent = await must(call, 'POST', '/api/v1/agents', {
    name: 'Helper',
    systemPrompt: 'You are careful.',
    config: { autonomyLevel: 'low' },
  })
  llm.push({ text: 'Nothing to change: the project looks fine.', usage: { input: 30, output: 9 } })
  const run = await must(call, 'POST', `/api/v1/agents/${agent.id}/execute`, {
    goal: 'Review the project',
    projectId: first.id,
  })
  await until('the run', async () => {
    const r = await must(call, 'GET', `/api/v1/agents/${agent.id}/runs/${run.id}`)
    return r.status === 'completed'
      ? r
      : r.status === 'queued' || r.status === 'running'
        ? null
        : Promise.reject(new Error(`run ${r.status}`))
  })
  const session = await must(call, 'POST', '/api/v1/chat/sessions', { title: 'Planning', projectId: first.id })
  llm.push({ text: 'Here is a plan.', usage: { input: 12, output: 4 } })
  await must(call, 'POST', `/api/v1/chat/sessions/${session.id}/messages`, { content: 'Make a plan, please' })
  await until('the reply', async () => {
    const page = await must(call, 'GET', `/api/v1/chat/sessions/${session.id}/messages`)
    const reply = (page as { role: string; status: string }[]).find((m) => m.role === 'assistant')
    return reply && reply.status !== 'generating' ? reply : null
  })
  return {
    projectIds: [first.id, second.id],
    agentId: agent.id,
    runId: run.id,
    sessionId: session.id,
    files,
    oldContent,
  }
}
