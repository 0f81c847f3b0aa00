// A memory soak: every hostile input of issue 40, mixed, from several tenants at once against one
// bundled server process for SOAK_SECONDS (60 by default; the issue's note reports a longer run),
// while a well-behaved tenant works beside them. The process must stay alive, its resident memory
// under RSS_CEILING, every hostile unit of work must fail with its own code, and the well-behaved
// tenant must never see a 5xx.
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { fakeLlm, type FakeRequest, type FakeTurn } from '../helpers/fake-llm.js'
import { builtServer, compiledAdmin, compiledServer, MB, watchRss } from '../helpers/compiled.js'
import { hostileStore } from '../helpers/hostile-store.js'
import { services, testEnv } from '../helpers/platform.js'

const SOAK_MS = Number(process.env.SOAK_SECONDS ?? 60) * 1000
/**
 * What the process may reach while the soak runs (it idles at some 120 to 200 MB; the embedded database, in the
 * process, adds its own).
 */
const RSS_CEILING = (services.databaseUrl ? 768 : 1024) * MB
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// The model: what each run or reply meets is decided by its goal (the first user message).
const goalOf = (r: FakeRequest): string =>
  (r.body?.messages ?? []).find((m: { role: string }) => m.role === 'user')?.content ?? ''
const stepOf = (r: FakeRequest): number =>
  (r.body?.messages ?? []).filter((m: { role: string }) => m.role === 'assistant').length
function answer(r: FakeRequest): FakeTurn {
  const goal = goalOf(r)
  if (goal.startsWith('flood'))
    return { toolCalls: Array.from({ length: 3000 }, () => ({ name: 'list_files', arguments: {} })) }
  if (goal.startsWith('grow'))
    return { toolCalls: Array.from({ length: 60 }, () => ({ name: 'list_files', arguments: {} })) }
  if (goal.startsWith('nul'))
    return stepOf(r) === 0
      ? { toolCalls: [{ name: 'read_file', arguments: { path: 'a\u0000b\ud800' } }] }
      : { text: 'corrected' }
  if (goal.startsWith('huge')) return { text: 'x'.repeat(2 * 1024 * 1024) }
  if (goal.startsWith('write'))
    return stepOf(r) < 3
      ? { toolCalls: [{ name: 'write_file', arguments: { path: `w${stepOf(r)}.txt`, content: 'w'.repeat(900_000) } }] }
      : { text: 'written' }
  return { text: 'ok' }
}

t.test(
  'hostile inputs of every kind, mixed, against one process: alive, bounded, every unit failed with its code',
  async (t) => {
    t.setTimeout(SOAK_MS + 300_000)
    const dist = await builtServer(t)
    const llm = await fakeLlm(t, { respond: answer })
    const store = await hostileStore(t, { mode: 'huge-error', bytes: 200 * 1024 * 1024 })
    const env = await testEnv(t, {
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32',
      RATE_LIMIT_MAX: '1000000',
      STORAGE_TIMEOUT_SECONDS: '3',
      LOG_LEVEL: 'error',
      WEBHOOK_ALLOW_HTTP: 'true',
    })
    const tenant = async (plan: string) => {
      const r = await compiledAdmin(dist, ['create-tenant', '--name', `Soak ${plan}`, '--plan', plan], env)
      if (r.code !== 0) throw new Error(r.stderr)
      return JSON.parse(r.stdout) as { apiKey: string; tenantId: string }
    }
    const [hostile, free, good] = [await tenant('enterprise'), await tenant('free'), await tenant('pro')]
    const server = await compiledServer(t, dist, env)
    const api = async (
      key: string,
      method: string,
      path: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) => {
      const r = await fetch(`${server.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined
          ? {}
          : {
              body:
                typeof body === 'string' ? body : Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body),
            }),
        signal: AbortSignal.timeout(60_000),
      })
      const text = await r.text()
      let parsed: any = null // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON from the API
      try {
        parsed = text ? JSON.parse(text) : null
      } catch {
        // a download: not JSON
      }
      return { status: r.status, body: parsed }
    }

    // Set-up: models, a project of long paths, agents.
    for (const who of [hostile, free])
      t.equal(
        (
          await api(who.apiKey, 'PATCH', '/api/v1/tenant/settings/llm', {
            provider: 'openai-compatible',
            baseUrl: llm.url,
            model: 'm',
            apiKey: 'sk-soak-000000000000',
          })
        ).status,
        200,
      )
    const projectId = (await api(hostile.apiKey, 'POST', '/api/v1/projects', { name: 'long paths' })).body.data.id
    for (let i = 0; i < 200; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, j) =>
          api(
            hostile.apiKey,
            'PUT',
            `/api/v1/projects/${projectId}/files/${`d${i + j}/`.padEnd(990, 'p')}/f`,
            `f${i + j}`,
            { 'content-type': 'text/plain' },
          ),
        ),
      )
    }
    const newAgent = async (key: string, name: string, maxSteps: number): Promise<string> =>
      (
        await api(key, 'POST', '/api/v1/agents', {
          name,
          systemPrompt: '',
          config: { autonomyLevel: 'high', maxSteps },
        })
      ).body.data.id
    const agentId = await newAgent(hostile.apiKey, 'soak', 10)
    const freeProject = (await api(free.apiKey, 'POST', '/api/v1/projects', { name: 'full' })).body.data.id
    // The free plan's 10 MiB, all but 485,760 bytes: every write below is over it.
    for (let i = 0; i < 10; i++)
      await api(free.apiKey, 'PUT', `/api/v1/projects/${freeProject}/files/f${i}.bin`, Buffer.alloc(1_000_000, i), {
        'content-type': 'application/octet-stream',
      })
    const freeAgent = await newAgent(free.apiKey, 'writer', 5)
    // A receiver whose every answer is a megabyte: deliveries keep an excerpt.
    const receiver = createServer((_req, res) => res.writeHead(500).end(Buffer.alloc(1024 * 1024, 'h')))
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    t.teardown(() => receiver.close())
    const hook = { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` }
    t.equal(
      (
        await api(hostile.apiKey, 'POST', '/api/v1/webhooks', {
          url: hook.url,
          events: ['project.created', 'agent.failed'],
          secret: 'whsec-soak-0123456789abcdef',
        })
      ).status,
      201,
    )

    const outcomes = new Map<string, Map<string, number>>()
    const count = (what: string, code: string) => {
      const m = outcomes.get(what) ?? new Map<string, number>()
      m.set(code, (m.get(code) ?? 0) + 1)
      outcomes.set(what, m)
    }
    const rss = watchRss(server.child.pid!, 100)
    const until = Date.now() + SOAK_MS
    const loop = (what: string, work: () => Promise<string>) =>
      (async () => {
        while (Date.now() < until && server.child.exitCode === null) {
          try {
            count(what, await work())
          } catch (err) {
            count(
              what,
              `threw ${(err as Error).name}: ${String((err as { cause?: { message?: string } }).cause?.message ?? (err as Error).message).slice(0, 80)}`,
            )
            await sleep(200)
          }
        }
      })()
    const run = async (key: string, agent: string, project: string, goal: string) => {
      // wait=0: started, then followed by polling, as before runs could be waited for.
      const r = await api(key, 'POST', `/api/v1/agents/${agent}/execute?wait=0`, { goal, projectId: project })
      if (r.status !== 202) return `execute ${r.status} ${r.body?.error?.code}`
      let status = ''
      for (const stop = Date.now() + 120_000; Date.now() < stop;) {
        await sleep(200)
        const got = await api(key, 'GET', `/api/v1/agents/${agent}/runs/${r.body.data.id}`)
        status = got.body.data.status
        if (['completed', 'failed', 'cancelled'].includes(status)) return got.body.data.error?.code ?? status
      }
      return `stuck ${status}`
    }
    const rawPut = (declared: number) =>
      new Promise<string>((resolve, reject) => {
        const u = new URL(`${server.base}/api/v1/projects/${freeProject}/files/declared.bin`)
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            path: u.pathname,
            method: 'PUT',
            headers: {
              authorization: `Bearer ${free.apiKey}`,
              'content-type': 'application/octet-stream',
              'content-length': declared,
            },
          },
          (res) => {
            let body = ''
            res.on('data', (c: Buffer) => (body += c.toString()))
            res.on('end', () => {
              req.destroy()
              resolve(JSON.parse(body).error?.code ?? String(res.statusCode))
            })
          },
        )
        req.on('error', reject)
        req.write(Buffer.alloc(1024))
      })

    const good500s: string[] = []
    const work = [
      loop('run: 3,000 tool calls', () => run(hostile.apiKey, agentId, projectId, 'flood')),
      loop('run: 3,000 tool calls', () => run(hostile.apiKey, agentId, projectId, 'flood')),
      loop('run: growing results', () => run(hostile.apiKey, agentId, projectId, 'grow')),
      loop('run: NUL arguments', () => run(hostile.apiKey, agentId, projectId, 'nul')),
      loop('run: 2 MiB answer', () => run(hostile.apiKey, agentId, projectId, 'huge')),
      loop('run: writes over the quota', () => run(free.apiKey, freeAgent, freeProject, 'write')),
      loop('chat: 2 MiB reply', async () => {
        const sessionId = (await api(hostile.apiKey, 'POST', '/api/v1/chat/sessions', {})).body.data.id
        const r = await api(hostile.apiKey, 'POST', `/api/v1/chat/sessions/${sessionId}/messages`, { content: 'huge' })
        if (r.status !== 201) return `post ${r.status} ${r.body?.error?.code}`
        for (const stop = Date.now() + 120_000; Date.now() < stop;) {
          await sleep(200)
          const m = await api(hostile.apiKey, 'GET', `/api/v1/chat/sessions/${sessionId}/messages`)
          const reply = m.body.data.find((x: { id: string }) => x.id === r.body.data.replyId)
          if (reply && reply.status !== 'generating') return reply.error?.code ?? reply.status
        }
        return 'stuck'
      }),
      loop('BYOS validate: 200 MB error bodies', async () => {
        const r = await api(hostile.apiKey, 'POST', `/api/v1/regions/storage/${hostile.tenantId}/validate`, {
          byosProvider: 's3',
          byosEndpoint: store.url,
          byosBucket: 'hostile-bucket',
          byosRegion: 'us-east-1',
          byosAccessKey: 'k-id',
          byosSecretKey: 's-key',
        })
        return r.body?.data?.checks?.at(-1)?.found ?? `${r.status}`
      }),
      loop(
        'PUT over the quota',
        async () =>
          (
            await api(free.apiKey, 'PUT', `/api/v1/projects/${freeProject}/files/over.bin`, Buffer.alloc(900_000, 7), {
              'content-type': 'application/octet-stream',
            })
          ).body.error.code,
      ),
      loop('PUT declaring 90 MiB', () => rawPut(90 * 1024 * 1024)),
      loop('bad requests', async () => {
        const codes = await Promise.all([
          api(hostile.apiKey, 'GET', `/api/v1/projects/${projectId}/files?prefix=a%00b`),
          api(hostile.apiKey, 'GET', `/api/v1/agents/${agentId}/runs/${agentId}/stream`, undefined, {
            'last-event-id': '9999999999',
          }),
          api(hostile.apiKey, 'POST', '/api/v1/projects', `{"name":${'['.repeat(5000)}${']'.repeat(5000)}}`),
          api(hostile.apiKey, 'GET', `/api/v1/agents/${agentId}/runs?limit=200`),
        ])
        return codes.map((c) => c.body?.error?.code ?? c.status).join(' ')
      }),
      // Answered 413 as soon as the length is known: the client may still be writing, and see its connection closed
      // (EPIPE).
      loop('a JSON body of 2 MiB', async () =>
        api(hostile.apiKey, 'POST', '/api/v1/projects', `{"name":"${'n'.repeat(2 * 1024 * 1024)}"}`).then(
          (r) => r.body?.error?.code ?? String(r.status),
          (err: { cause?: { code?: string } }) => `closed ${err.cause?.code}`,
        ),
      ),
      loop('well-behaved tenant', async () => {
        const made = await api(good.apiKey, 'POST', '/api/v1/projects', { name: 'ordinary' })
        const listed = await api(good.apiKey, 'GET', '/api/v1/projects?limit=5')
        for (const r of [made, listed]) if (r.status >= 500) good500s.push(`${r.status} ${JSON.stringify(r.body)}`)
        await sleep(100)
        return `${made.status} ${listed.status}`
      }),
    ]
    await Promise.all(work)
    const peak = rss.stop()

    t.equal(server.child.exitCode, null, 'the process is alive')
    t.ok(
      peak < RSS_CEILING,
      `peak RSS ${Math.round(peak / MB)} MB over ${SOAK_MS / 1000} s (${rss.samples} samples), under ${RSS_CEILING / MB} MB`,
    )
    t.comment(`peak RSS each minute (MB): ${rss.minutes.join(', ')}`)
    for (const [what, codes] of outcomes) t.comment(`${what}: ${[...codes].map(([c, n]) => `${c} x${n}`).join(', ')}`)
    const only = (what: string, expected: string[]) => {
      const seen = [...(outcomes.get(what)?.keys() ?? [])]
      t.ok(seen.length > 0, `${what}: ran`)
      t.same(
        seen.filter((c) => !expected.includes(c)),
        [],
        `${what}: only ${expected.join(', ')}`,
      )
    }
    only('run: 3,000 tool calls', ['AGENT_TOOL_CALL_LIMIT'])
    only('run: growing results', ['AGENT_MEMORY_LIMIT'])
    only('run: NUL arguments', ['completed'])
    only('run: 2 MiB answer', ['LLM_RESPONSE_TOO_LARGE'])
    only('run: writes over the quota', ['completed'])
    only('chat: 2 MiB reply', ['LLM_RESPONSE_TOO_LARGE'])
    only('BYOS validate: 200 MB error bodies', ['ResponseTooLarge'])
    only('PUT over the quota', ['QUOTA_EXCEEDED'])
    only('PUT declaring 90 MiB', ['PAYLOAD_TOO_LARGE'])
    only('bad requests', ['VALIDATION_ERROR VALIDATION_ERROR VALIDATION_ERROR 200'])
    only('a JSON body of 2 MiB', ['PAYLOAD_TOO_LARGE', 'closed EPIPE', 'closed ECONNRESET'])
    t.same(good500s, [], 'the well-behaved tenant never saw a 5xx')
    t.ok((outcomes.get('well-behaved tenant')?.get('201 200') ?? 0) > 0, 'and got its work done')
    const files = await api(free.apiKey, 'GET', `/api/v1/projects/${freeProject}/files`)
    t.equal(files.body.data.length, 10, 'nothing refused was kept')
  },
)
