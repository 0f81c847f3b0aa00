// The server is killed (SIGKILL) while a run is streaming its answer. Another process, started on
// the same database, takes the run over once its lease runs out: the run ends completed, never
// stuck in "running", and a webhook hears agent.started and agent.completed once each.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { admin, startServer } from '../../../helpers/cli.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { services, testEnv } from '../../../helpers/platform.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test(
  'kill -9 during a run: after a restart it ends completed, and each webhook event arrives once',
  {
    skip: services.databaseUrl
      ? false
      : 'needs PostgreSQL (TEST_DATABASE_URL): two server processes share the database',
  },
  async (t) => {
    const llm = await fakeLlm(t)
    // The first attempt streams slowly (the kill lands in it); the takeover's answer is quick.
    llm.push({ text: 'first attempt '.repeat(60), chunkDelayMs: 100 }, { text: 'Finished after the takeover.' })

    const received: { id: string; type: string; runId: string }[] = []
    const hook = http.createServer((req, res) => {
      let body = ''
      req.on('data', (c: Buffer) => (body += c.toString()))
      req.on('end', () => {
        const e = JSON.parse(body) as { type: string; data: { runId?: string } }
        received.push({ id: String(req.headers['webhook-id']), type: e.type, runId: e.data.runId ?? '' })
        res.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve))
    t.teardown(() => hook.close())

    const env = await testEnv(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32', WEBHOOK_ALLOW_HTTP: 'true' })
    const created = await admin(['create-tenant', '--name', 'Crash', '--plan', 'enterprise'], env)
    t.equal(created.code, 0, created.stderr)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }

    let server = await startServer(env)
    t.teardown(() => server.child.kill('SIGKILL'))
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${server.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      return {
        status: r.status,
        body: (await r.json()) as { data: Record<string, unknown> & { id: string; status: string } },
      }
    }

    t.equal(
      (
        await call('PATCH', '/api/v1/tenant/settings/llm', {
          provider: 'openai-compatible',
          baseUrl: llm.url,
          model: 'm',
          apiKey: 'sk-crash-test-0000000',
        })
      ).status,
      200,
    )
    const port = (hook.address() as AddressInfo).port
    t.equal(
      (
        await call('POST', '/api/v1/webhooks', {
          url: `http://127.0.0.1:${port}/hook`,
          events: ['agent.started', 'agent.completed', 'agent.failed'],
          secret: 'whsec-crash-test-secret-0123456789',
        })
      ).status,
      201,
    )
    const projectId = (await call('POST', '/api/v1/projects', { name: 'p' })).body.data.id
    const agentId = (
      await call('POST', '/api/v1/agents', { name: 'a', systemPrompt: '', config: { autonomyLevel: 'low' } })
    ).body.data.id
    const runId = (await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'go', projectId })).body.data
      .id

    // Killed once the answer is streaming and agent.started has been delivered.
    for (let i = 0; i < 300 && !(llm.requests.length >= 1 && received.some((r) => r.type === 'agent.started')); i++)
      await sleep(50)
    t.equal((await call('GET', `/api/v1/agents/${agentId}/runs/${runId}`)).body.data.status, 'running')
    server.child.kill('SIGKILL')
    await server.done

    server = await startServer(env)
    let run: { status: string; output?: string; error?: unknown } = { status: 'running' }
    for (let i = 0; i < 600 && ['queued', 'running'].includes(run.status); i++) {
      await sleep(100)
      run = (await call('GET', `/api/v1/agents/${agentId}/runs/${runId}`)).body.data
    }
    t.match(run, { status: 'completed', output: 'Finished after the takeover.' })
    for (let i = 0; i < 100 && !received.some((r) => r.type === 'agent.completed'); i++) await sleep(100)
    await sleep(500) // a second delivery, if there were one, would have had time to arrive
    const mine = received.filter((r) => r.runId === runId)
    t.same(mine.map((r) => r.type).sort(), ['agent.completed', 'agent.started'], 'each event delivered once')

    const stream = await fetch(`${server.base}/api/v1/agents/${agentId}/runs/${runId}/stream`, {
      headers: { authorization: `Bearer ${apiKey}` },
    })
    const text = await stream.text()
    t.match(text, /event: run\.resumed/, 'the stream says the run was taken over')
    t.match(text, /event: run\.completed/)
  },
)
