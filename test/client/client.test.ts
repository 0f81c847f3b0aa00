// The client library against a real server (listening on loopback, on the suite's services or the
// embedded defaults): every resource, the token rules with an injected clock, 401 and 429 handling,
// and a chat stream cut in the middle of a reply and resumed with nothing lost or repeated.
import { Readable } from 'node:stream'
import t from 'tap'
import { AtriumClient, AtriumError, AtriumNetworkError, login } from '../../client/src/index.js'
import { testApp, type TestApp } from '../helpers/app.js'
import { fakeLlm } from '../helpers/fake-llm.js'
import { faultProxy } from '../helpers/fault-proxy.js'
import { freePort, services } from '../helpers/platform.js'
import { PASSWORD, user } from '../server/modules/cli-auth/helpers.js'

const collect = async <T>(it: AsyncIterable<T>): Promise<T[]> => {
  const out: T[] = []
  for await (const x of it) out.push(x)
  return out
}

async function listening(h: TestApp): Promise<string> {
  await h.app.listen({ host: '127.0.0.1', port: 0 })
  const a = h.app.server.address()
  if (!a || typeof a === 'string') throw new Error('not listening')
  return `http://127.0.0.1:${a.port}`
}

const port = await freePort()
const base = `http://127.0.0.1:${port}`
// PUBLIC_URL is where download links point: this server.
const h = await testApp(
  t,
  { PUBLIC_URL: base, OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32', WEBHOOK_ALLOW_HTTP: 'true' },
  { jobs: { pollMs: 50 } },
)
await h.app.listen({ host: '127.0.0.1', port })
const llm = await fakeLlm(t)

t.test('every resource, through an API key', async (t) => {
  const tn = await h.tenant('enterprise')
  const c = new AtriumClient({ baseUrl: base, apiKey: tn.apiKey })

  const me = await c.me()
  t.match(me, { tenant: { id: tn.tenantId, plan: 'enterprise' }, credential: { type: 'api_key' } })
  t.match(await c.tenant.get(), { id: tn.tenantId })
  t.ok(await c.tenant.usage())

  await t.test('projects with versions, backup and files; lists page through cursors', async (t) => {
    const made = []
    for (let i = 0; i < 5; i++)
      made.push(await c.projects.create({ name: `P${i}`, description: 'client test', language: 'typescript' }))
    const listed = await collect(c.projects.list({ limit: 2 }))
    t.same(listed.map((p) => p.id).sort(), made.map((p) => p.id).sort(), 'five projects over three pages of two')
    const p = made[0]!
    t.match(await c.projects.update(p.id, { name: 'Renamed' }), { name: 'Renamed' })
    t.equal((await c.projects.get(p.id)).name, 'Renamed')
    const written = await c.projects.writeFile(p.id, 'src/hello world.ts', 'export const hi = 1\n')
    t.match(written, { path: 'src/hello world.ts' })
    t.equal(await (await c.projects.readFile(p.id, 'src/hello world.ts')).text(), 'export const hi = 1\n')
    t.same(
      (await collect(c.projects.files(p.id))).map((f) => f.path),
      ['src/hello world.ts'],
    )
    await c.projects.deleteFile(p.id, 'src/hello world.ts')
    t.same(await collect(c.projects.files(p.id)), [], 'deleted')
    const versions = await collect(c.projects.versions(p.id))
    t.ok(versions.length >= 4, 'created, renamed, a file written and deleted: versions')
    const first = versions.at(-1)!
    t.ok(await c.projects.restoreVersion(p.id, first.id))
    t.equal((await c.projects.get(p.id)).name, 'P0', 'restored to the first version')
    const backup = await c.projects.backup(p.id, { includeHistory: true })
    t.match(backup, { downloadUrl: String, checksum: String })
    await c.projects.delete(made[4]!.id)
    const gone = await c.projects.get(made[4]!.id).catch((e: unknown) => e)
    t.ok(gone instanceof AtriumError)
    t.match(gone, { code: 'RESOURCE_NOT_FOUND', status: 404, requestId: String })
  })

  await t.test('settings, agents and a run followed on its stream to the end', async (t) => {
    await c.tenant.updateLlmSettings({
      provider: 'openai-compatible',
      baseUrl: llm.url,
      model: 'm',
      apiKey: 'sk-client-test-0000',
    })
    t.match(await c.tenant.llmSettings(), { provider: 'openai-compatible', model: 'm' })
    const project = await c.projects.create({ name: 'Agents' })
    const agent = await c.agents.create({ name: 'Helper', systemPrompt: 'Be brief.', config: { autonomyLevel: 'low' } })
    t.same(
      (await collect(c.agents.list())).map((a) => a.id),
      [agent.id],
    )
    // As the specification writes it: the run with its output (the server waited for its end).
    llm.push({ text: 'the answer, waited for' })
    const waited = await c.agents.execute(agent.id, { goal: 'answer', projectId: project.id })
    t.match(waited, { status: 'completed', output: 'the answer, waited for', error: null })
    // wait: 0: started, then followed on its stream.
    llm.push({ text: 'the run is done' })
    const run = await c.agents.execute(agent.id, { goal: 'say done', projectId: project.id }, { wait: 0 })
    t.match(run, { status: 'queued', output: null })
    const events = await collect(c.agents.runEvents(agent.id, run.id))
    t.equal(events.at(-1)!.event, 'run.completed')
    t.equal(
      events
        .filter((e) => e.event === 'output.delta')
        .map((e) => e.data.delta)
        .join(''),
      'the run is done',
    )
    t.match(await c.agents.run(agent.id, run.id), { status: 'completed', output: 'the run is done' })
    t.equal((await collect(c.agents.runs(agent.id))).length, 2)
  })

  await t.test('team, keys, webhooks, regions and storage', async (t) => {
    const members = await collect(c.team.members())
    t.equal(members.length, 1, 'the owner')
    const key = await c.apiKeys.create({ name: 'ci', type: 'ci', permissions: ['projects:read'] })
    t.match(key, { key: /^svc_ci_/ })
    t.ok((await collect(c.apiKeys.list())).some((k) => k.id === key.id))
    await c.apiKeys.revoke(key.id)
    const hook = await c.webhooks.create({
      url: 'http://127.0.0.1:9/hook',
      events: ['project.created'],
      secret: 'a-webhook-secret-of-32-characters',
    })
    t.same(
      (await collect(c.webhooks.list())).map((w) => w.id),
      [hook.id],
    )
    t.equal((await c.webhooks.get(hook.id)).id, hook.id)
    await c.webhooks.delete(hook.id)
    t.equal((await c.regions.list()).length, 15)
    t.match(await c.regions.preferences(tn.tenantId), { primaryRegion: String })
    t.match(await c.regions.feature(tn.tenantId, 'byos'), { featureKey: 'byos', enabled: true, reason: null })
    t.match(await c.regions.storage(tn.tenantId), { storageMode: 'platform' })
    const checked = await c.regions.validateStorage(tn.tenantId, {
      byosProvider: 's3',
      byosEndpoint: 'http://127.0.0.1:1',
      byosBucket: 'client-test',
      byosAccessKey: 'k',
      byosSecretKey: 's',
    })
    t.match(checked, { valid: false })
    // The same body as updateStorage: a platform configuration is checked for its region and store.
    t.match(await c.regions.validateStorage(tn.tenantId, { storageMode: 'platform' }), {
      valid: true,
      checks: [{ id: 'platform-region' }, { id: 'platform-store' }],
    })
    t.ok(await c.regions.routingInfo())
    const bad = await c.regions
      .updatePreferences(tn.tenantId, { primaryRegion: 'mars-1' as 'us-east' })
      .catch((e: unknown) => e)
    t.match(bad, { code: 'VALIDATION_ERROR', status: 400 })
  })

  await t.test('export downloads, restores from a stream, schedules are checked, GDPR and chat exports', async (t) => {
    const job = await c.data.export(tn.tenantId, { format: 'zip', include: ['all'], destination: 'download' })
    const done = await c.data.waitForExport(tn.tenantId, job.exportId, { intervalMs: 100 })
    t.equal(done.status, 'completed')
    const archive = await fetch(done.downloadUrl!)
    t.equal(archive.status, 200)
    const restored = await c.data.restore(
      tn.tenantId,
      Readable.toWeb(Readable.from(Buffer.from(await archive.arrayBuffer()))) as ReadableStream<Uint8Array>,
      { merge: true },
    )
    t.equal(restored.status, 'processing')
    t.match(await c.data.waitForRestore(tn.tenantId, restored.restoreId, { intervalMs: 100 }), { status: 'completed' })
    // A closed port refuses the destination check; the specification's fields (no s3Endpoint) reach the site's own
    // store, whose check refuses these keys, or, on a site without one, miss the endpoint.
    const keys = { s3Bucket: 'client-test', s3AccessKey: 'k', s3SecretKey: 'secret-never-shown' }
    for (const [body, field] of [
      [{ frequency: 'weekly', destination: 's3', s3Endpoint: 'http://127.0.0.1:1', ...keys }, 'body.s3Endpoint'],
      [
        { frequency: 'weekly', format: 'zip', destination: 's3', s3Prefix: 'atrium/weekly', ...keys },
        services.s3Endpoint ? 'body.s3AccessKey' : 'body.s3Endpoint',
      ],
    ] as const) {
      const refused = await c.data.schedule(tn.tenantId, body).catch((e: unknown) => e)
      t.match(refused, { code: 'VALIDATION_ERROR', details: { errors: [{ field }] } })
      t.notMatch(JSON.stringify(refused), /secret-never-shown/)
    }
    t.same(await c.data.schedules(tn.tenantId), [])
    t.ok(await c.data.gdprExport())
    // A chat as the specification writes it: a session from an empty body, a message naming its project.
    const project = await c.projects.create({ name: 'Chat' })
    const session = await c.chat.createSession({})
    llm.push({ text: 'Hello back.' })
    const sent = await c.chat.send(session.id, 'Hello', { projectId: project.id })
    const reply = c.chat.reply(session.id, sent.replyId)
    let got = await reply.next()
    while (!got.done) got = await reply.next()
    t.match(got.value, { role: 'assistant', content: 'Hello back.', status: 'completed' })
    t.equal((await c.chat.getSession(session.id)).projectId, project.id, 'the session took the project')
    const today = new Date().toISOString().slice(0, 10)
    const history = await c.chat.export({ dateRange: { start: today, end: today }, format: 'json' })
    t.match(history, { format: 1, tenantId: tn.tenantId, dateRange: { start: today, end: today } })
    t.match(
      history.sessions.find((s) => s.id === session.id),
      { messages: [{ role: 'user', content: 'Hello' }] },
      "the export's document: the envelope's data",
    )
  })
})

t.test(
  'an access token from an exchange: renewed 60 s before it expires, one exchange for concurrent calls',
  async (t) => {
    const u = await user(h)
    const session = await login(base, { email: u.email, password: PASSWORD })
    let now = Date.parse('2026-11-27T12:00:00Z')
    const exchanges: string[] = []
    const counting: typeof fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input)
      if (url.includes('/auth/exchange')) exchanges.push(url)
      return fetch(input, init)
    }
    const c = new AtriumClient({
      baseUrl: base,
      credentials: { sessionToken: () => session.token },
      fetch: counting,
      now: () => now,
    })
    await Promise.all([
      c.me(),
      c.me(),
      c.projects.get('00000000-0000-4000-8000-000000000000').catch(() => null),
      c.tenant.get(),
    ])
    t.equal(exchanges.length, 1, 'four calls without a token: one exchange')
    const held = c.accessToken!
    const issuedFor = (held.staleAt + 60_000 - now) / 1000
    t.ok(issuedFor > 60, `a lifetime of ${issuedFor} s`)

    now = held.staleAt - 1
    await c.me()
    t.equal(exchanges.length, 1, 'one ms before the 60 s buffer: the same token')
    now = held.staleAt
    await c.me()
    t.equal(exchanges.length, 2, 'within 60 s of expiry: exchanged again')
    t.not(c.accessToken!.token, held.token)
  },
)

t.test('a 401 clears the tokens and surfaces UNAUTHORIZED; the application is told', async (t) => {
  const u = await user(h)
  const session = await login(base, { email: u.email, password: PASSWORD })
  let told = 0
  const c = new AtriumClient({
    baseUrl: base,
    credentials: { sessionToken: session.token },
    onUnauthorized: () => told++,
  })
  await c.me()
  t.ok(c.accessToken)
  // The session ends elsewhere (another tab signs out): the access token stops working.
  await new AtriumClient({ baseUrl: base, credentials: { sessionToken: session.token } }).logout()
  const err = await c.me().catch((e: unknown) => e)
  t.ok(err instanceof AtriumError)
  t.match(err, { code: 'UNAUTHORIZED', status: 401, unauthorized: true })
  t.equal(c.accessToken, null, 'the token is gone')
  t.equal(told, 1)
  const again = await c.me().catch((e: unknown) => e)
  t.match(again, { code: 'UNAUTHORIZED' }, 'the next call exchanges again, and the ended session is refused')
})

t.test('a 429 is retried after the wait the server names; beyond the limit it surfaces', async (t) => {
  const limited = await testApp(t, { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_SECONDS: '1' })
  const lbase = await listening(limited)
  const tn = await limited.tenant('pro')
  const waits: number[] = []
  const c = new AtriumClient({
    baseUrl: lbase,
    apiKey: tn.apiKey,
    maxRetries: 3,
    sleep: (ms) => (waits.push(ms), new Promise((r) => setTimeout(r, ms))),
  })
  for (let i = 0; i < 5; i++) await c.tenant.get()
  t.ok(waits.length >= 1, `waited ${waits.join(', ')} ms`)
  t.ok(
    waits.every((w) => w > 0 && w <= 1000),
    'as long as X-RateLimit-Reset said',
  )
  const strict = new AtriumClient({ baseUrl: lbase, apiKey: tn.apiKey, maxRetries: 0 })
  const errors = await Promise.all([1, 2, 3, 4].map(() => strict.tenant.get().catch((e: unknown) => e)))
  t.match(
    errors.find((e) => e instanceof AtriumError),
    { code: 'RATE_LIMIT_EXCEEDED', status: 429 },
  )
})

t.test('an unreachable server is a network error, not an API error', async (t) => {
  const c = new AtriumClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'svc_sdk_x' })
  const err = await c.me().catch((e: unknown) => e)
  t.ok(err instanceof AtriumNetworkError)
  t.notOk(err instanceof AtriumError)
})

t.test('a chat stream cut in the middle of a reply resumes with Last-Event-ID: nothing lost or repeated', async (t) => {
  const tn = await h.tenant('pro')
  const proxy = await faultProxy(t, base)
  const c = new AtriumClient({ baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: tn.apiKey })
  await c.tenant.updateLlmSettings({
    provider: 'openai-compatible',
    baseUrl: llm.url,
    model: 'chat-model',
    apiKey: 'sk-chat-test-0000000',
  })
  const session = await c.chat.createSession({ title: 'resume' })
  const text = 'one two three four five six seven eight nine ten'
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  llm.push({ text, hold: (piece) => (piece === 4 ? gate : undefined) })
  const sent = await c.chat.send(session.id, 'count to ten')
  const reconnects: (string | undefined)[] = []
  const reply = c.chat.reply(session.id, sent.replyId, { onReconnect: (last) => reconnects.push(last) })
  const deltas: string[] = []
  let cut = false
  let r = await reply.next()
  while (!r.done) {
    deltas.push(r.value)
    // The cut falls after 'four': the model holds the rest until the connection is back.
    if (deltas.join('').includes('four') && reconnects.length === 0 && !cut) {
      cut = true
      proxy.cut()
      setTimeout(() => {
        proxy.restore()
        release()
      }, 300)
    }
    r = await reply.next()
  }
  t.ok(reconnects.length >= 1 && reconnects[0], `reconnected after event ${reconnects[0]}`)
  t.equal(deltas.join(''), text, 'every delta once, in order')
  t.equal(r.value.content, text, 'the saved reply is the text')
  t.equal(r.value.id, sent.replyId)
})
