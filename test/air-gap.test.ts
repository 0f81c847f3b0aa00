// Zero outbound, proven on the wire: the server's image runs air-gapped in a container on an
// internal network whose every DNS query, TCP connection, UDP datagram and kernel-tracked flow is
// recorded unless it goes to a declared service (test/helpers/egress.ts). The test uses every
// feature that could call out (chat and an agent run against the site's own model server, webhooks
// to the site's own receiver, OpenID sign-in at the site's own identity provider) and asks for
// outside ones (a hosted model, a webhook and a provider base URL at outside names, web search),
// then calls every operation of the OpenAPI document; the record must be empty. The same run with
// AIR_GAPPED off must record those outside attempts, which shows the recorder sees what the
// features do. docs/air-gap.md says how a site re-runs it against its own image.
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import http from 'node:http'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { CONTAINER_CLI, CONTAINER_FIXED } from '../config/bundles.js'
import { sweep, type Swept } from './helpers/api-sweep.js'
import {
  egressNetwork,
  egressRecorder,
  recorderUnavailable,
  type Egress,
  type EgressNetwork,
} from './helpers/egress.js'
import { buildImage, docker, engine, envFile, hardening, seconds, stepTimer, trustingImage } from './helpers/engine.js'
import { faultProxy } from './helpers/fault-proxy.js'
import { fakeLlm, type FakeRequest } from './helpers/fake-llm.js'
import { testLicense, testVendor } from './helpers/license.js'
import { freshBucket, freshDatabase, services, suffix, tempDir } from './helpers/platform.js'
import { CLIENT_ID, CLIENT_SECRET, signInAtIdp, startIdp } from './server/modules/oauth/idp.js'

/** The site's DNS zone: its own services are named under it (OUTBOUND_ALLOWED_DOMAINS). */
const ZONE = 'atrium.internal'
/** Where every other name resolves: a public address, so that a connected server tries to connect. */
const ELSEWHERE = '93.184.216.34'
/** Outside names the test asks the server to use. */
const OUTSIDE = {
  webhook: 'hooks.example.com',
  model: 'models.example.com',
  search: 'search.example.com',
  sweep: 'sweep.example.com',
}
const SERVER_PORT = 8080
const WEBHOOK_SECRET = 'a-shared-secret-of-32-characters'

const found = await engine()
const skip = 'skip' in found ? found.skip : ((await recorderUnavailable()) ?? false)
if (!skip) t.setTimeout(900_000)

/** Polls `check` until it returns something, for up to `ms`. */
async function until<T>(ms: number, check: () => Promise<T | null | undefined>): Promise<T | null> {
  const started = performance.now()
  while (performance.now() - started < ms) {
    const v = await check()
    if (v) return v
    await sleep(250)
  }
  return null
}

interface Site {
  net: EgressNetwork
  image: string
  flags: string[]
  env: Record<string, string>
  llm: Awaited<ReturnType<typeof fakeLlm>>
  hooks: { received: string[]; port: number }
  /** The model server's port on the gateway. */
  llmPort: number
  idp: Awaited<ReturnType<typeof startIdp>>
  pgProxy: Awaited<ReturnType<typeof faultProxy>>
}

interface Run {
  swept: Swept[]
  /** What each step of the scenario answered. */
  answers: Record<string, number | string>
}

t.test(
  'air-gapped, nothing leaves but traffic to the declared services, across every API operation; connected, the same run is seen going out',
  { skip },
  async (t: Test) => {
    const base = 'base' in found ? found.base : ''
    const { step, record } = stepTimer(t, 'timings')
    const built = await step('docker build', () => buildImage(t, base))
    if ('error' in built) return t.fail(built.error)
    const vendor = testVendor()
    const image = `atrium-server:air-gap-${suffix()}`
    await trustingImage(t, built.image, vendor, image)
    t.teardown(() => docker(['image', 'rm', '--force', image]))

    const net = await egressNetwork(t)
    const gw = net.gateway
    // The site's own services, on the network's gateway: PostgreSQL, Redis and S3 in front of the
    // test's, a model server, a webhook receiver and an identity provider.
    const [pgProxy, redis, s3] = await Promise.all([
      faultProxy(t, services.databaseUrl, gw),
      faultProxy(t, services.redisUrl, gw),
      faultProxy(t, services.s3Endpoint, gw),
    ])
    const llm = await fakeLlm(t, { respond: modelTurn })
    const llmProxy = await faultProxy(t, llm.url, gw)
    const received: string[] = []
    const receiver = http.createServer((req, res) => {
      let body = ''
      req
        .on('data', (c: Buffer) => (body += c))
        .on('end', () => {
          received.push(body)
          res.end('ok')
        })
    })
    await new Promise<void>((r) => receiver.listen(0, gw, r))
    t.teardown(() => new Promise((r) => receiver.close(r)))
    const hooks = { received, port: (receiver.address() as { port: number }).port }
    const publicUrl = `http://${net.prefix}10:${SERVER_PORT}`
    const idp = await startIdp(t, [`${publicUrl}/oauth/corp/callback`], 0, gw)
    const idpPort = Number(new URL(idp.issuer).port)

    const recorder = await egressRecorder(t, net, {
      declaredPorts: [pgProxy.port, redis.port, s3.port, llmProxy.port, hooks.port, idpPort],
      declaredNames: { [`llm.${ZONE}`]: gw, [`hooks.${ZONE}`]: gw },
      elsewhere: ELSEWHERE,
    })
    const env: Record<string, string> = {
      ...CONTAINER_FIXED,
      LOG_LEVEL: 'info',
      PUBLIC_URL: publicUrl,
      REDIS_URL: redis.via(services.redisUrl),
      R2_ENDPOINT: s3.via(services.s3Endpoint).replace(/\/$/, ''),
      R2_BUCKET: await freshBucket(t),
      R2_ACCESS_KEY_ID: services.s3AccessKey,
      R2_SECRET_ACCESS_KEY: services.s3SecretKey,
      ENCRYPTION_MASTER_KEY: randomBytes(32).toString('base64'),
      LICENSE_KEY: await testLicense(vendor),
      OUTBOUND_ALLOWED_NETWORKS: `${gw}/32`,
      OUTBOUND_ALLOWED_DOMAINS: ZONE,
      WEB_SEARCH_URL: `https://${OUTSIDE.search}/search`,
      WEBHOOK_ALLOW_HTTP: 'true',
      OIDC_PROVIDERS: JSON.stringify([
        {
          id: 'corp',
          name: 'Corp',
          issuer: idp.issuer,
          clientId: CLIENT_ID,
          clientSecret: CLIENT_SECRET,
          allowHttp: true,
        },
      ]),
    }
    const site: Site = { net, image, flags: hardening(t), env, llm, llmPort: llmProxy.port, hooks, idp, pgProxy }

    const gapped = await step('air-gapped run', () => runSite(t, site, true))
    if (!gapped) return
    const quiet = recorder.record()
    t.same(
      quiet,
      [],
      `air-gapped: nothing but the declared services was reached or looked up${quiet.length ? `:\n${describe(quiet)}` : ''}`,
    )
    t.ok(
      recorder.declaredLookups().includes(`llm.${ZONE}`),
      `the site's own names were looked up through its DNS (${recorder.declaredLookups().join(', ')})`,
    )
    t.match(
      gapped.answers,
      {
        outsideWebhook: 'VALIDATION_ERROR',
        outsideModel: 'VALIDATION_ERROR',
        chat: 'completed',
        agent: 'completed',
        webhookDelivered: 'yes',
        signIn: 200,
      },
      'the features worked with the site services; outside ones were refused',
    )
    t.same(
      gapped.swept.filter((s) => s.status >= 500 && s.status !== 503),
      [],
      'no operation failed with a server error',
    )
    t.same(
      gapped.swept.filter((s) => s.unrouted),
      [],
      `every operation of the OpenAPI document (${gapped.swept.length}) reached its handler: ${summary(gapped.swept)}`,
    )

    recorder.clear()
    const connected = await step('connected run', () => runSite(t, site, false))
    if (!connected) return
    const loud = recorder.record()
    t.comment(`connected, recorded:\n${describe(loud)}`)
    const names = new Set(loud.flatMap((e) => (e.kind === 'dns' ? [e.name] : [])))
    for (const name of [OUTSIDE.webhook, OUTSIDE.model, OUTSIDE.search, OUTSIDE.sweep])
      t.ok(names.has(name), `connected: the lookup of ${name} was recorded`)
    const serverNames = new Set(loud.flatMap((e) => (e.kind === 'tcp' && e.serverName ? [e.serverName] : [])))
    for (const name of [OUTSIDE.webhook, OUTSIDE.model, OUTSIDE.search])
      t.ok(serverNames.has(name), `connected: a TLS connection to ${name} was recorded`)
    t.ok(
      loud.some((e) => e.kind === 'flow' && e.to === `${ELSEWHERE}:443`),
      'and the kernel saw flows to the outside address',
    )
    t.match(
      connected.answers,
      {
        outsideWebhook: 201,
        outsideModel: 200,
        chat: 'completed',
        agent: 'completed',
        webhookDelivered: 'yes',
        signIn: 200,
      },
      'connected, the outside targets were accepted',
    )
    record(`operations swept per run: ${gapped.swept.length}`)
  },
)

/** The model server's turns: an agent offered web search uses it once, then answers. */
function modelTurn(req: FakeRequest) {
  const body = req.body as { tools?: { function?: { name?: string } }[]; messages?: { role: string }[] }
  const searches = body.tools?.some((x) => x.function?.name === 'web_search')
  const searched = body.messages?.some((m) => m.role === 'tool')
  if (searches && !searched) return { toolCalls: [{ name: 'web_search', arguments: { query: 'atrium air gap' } }] }
  return { text: 'done' }
}

const describe = (record: Egress[]) => record.map((e) => `  ${JSON.stringify(e)}`).join('\n')
const summary = (swept: Swept[]) => {
  const counts = new Map<string, number>()
  for (const s of swept) counts.set(String(s.status), (counts.get(String(s.status)) ?? 0) + 1)
  return [...counts].map(([k, v]) => `${v}× ${k}`).join(', ')
}

/**
 * One run of the site: migrated and started on the network, the scenario, the sweep, stopped.
 * null when the server did not start (the test has failed with its logs).
 */
async function runSite(t: Test, site: Site, airGapped: boolean): Promise<Run | null> {
  const mode = airGapped ? 'air-gapped' : 'connected'
  const dir = tempDir(t)
  const database = await freshDatabase(t)
  const env = { ...site.env, DATABASE_URL: site.pgProxy.via(database), AIR_GAPPED: String(airGapped) }
  // The container's resolver is the site's DNS (the recorder), not the engine's.
  const resolvConf = join(dir, 'resolv.conf')
  writeFileSync(resolvConf, `nameserver ${site.net.gateway}\noptions timeout:1 attempts:1\n`, { mode: 0o644 })
  const run = [
    ...site.flags,
    '--network',
    site.net.name,
    '--env-file',
    envFile(t, env),
    '--volume',
    `${resolvConf}:/etc/resolv.conf:ro`,
  ]
  // Named, so that one left by a timed-out run is removed before the network is.
  const migration = `atrium-air-gap-migrate-${suffix()}`
  t.teardown(() => docker(['rm', '--force', '--volumes', migration]))
  const migrated = await docker(['run', '--rm', '--name', migration, ...run, site.image, 'migrate'], 120_000)
  if (migrated.code !== 0) {
    t.fail(`${mode}: migrate failed: ${migrated.stderr}`)
    return null
  }
  const name = `atrium-air-gap-${suffix()}`
  t.teardown(() => docker(['rm', '--force', '--volumes', name]))
  const started = await docker(['run', '--detach', '--name', name, '--ip', `${site.net.prefix}10`, ...run, site.image])
  if (started.code !== 0) {
    t.fail(`${mode}: docker run: ${started.stderr}`)
    return null
  }
  const api = site.env.PUBLIC_URL!
  const since = performance.now()
  const ready = await until(90_000, async () => (await fetch(`${api}/readyz`).catch(() => null))?.status === 200)
  if (!ready) {
    const logs = await docker(['logs', name])
    t.fail(
      `${mode}: the server never answered /readyz 200 (${seconds(since)} s):\n${logs.stdout.slice(-3000)}\n${logs.stderr.slice(-3000)}`,
    )
    return null
  }

  const cli = async (args: string[], input?: string) => {
    const r = await docker(
      ['exec', ...(input === undefined ? [] : ['-i']), name, ...CONTAINER_CLI, ...args],
      60_000,
      input,
    )
    if (r.code !== 0) throw new Error(`${args[0]}: ${r.stderr}`)
    return JSON.parse(r.stdout) as Record<string, string>
  }
  const owner = await cli(
    [
      'create-tenant',
      '--name',
      `Air gap ${mode}`,
      '--plan',
      'enterprise',
      '--email',
      'owner@example.com',
      '--password-stdin',
    ],
    'correct horse battery staple\n',
  )
  const admin = await cli(['create-key', '--type', 'admin', '--name', 'sweep'])
  const auth = { authorization: `Bearer ${owner.apiKey}` }
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = auth) => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const json = (await res.json().catch(() => null)) as { data?: any; error?: { code: string } } | null // eslint-disable-line @typescript-eslint/no-explicit-any -- the API's answers, read by field
    return { status: res.status, data: json?.data, code: json?.error?.code }
  }
  const outcome = (r: { status: number; code?: string }) => r.code ?? r.status
  const answers: Record<string, number | string> = {}
  const internalModel = {
    provider: 'openai-compatible',
    baseUrl: `http://llm.${ZONE}:${site.llmPort}/v1`,
    model: 'site-model',
  }

  // The model: a provider at an outside name first (refused air-gapped, before any lookup), then the site's own.
  answers.outsideModel = outcome(
    await call('PATCH', '/api/v1/tenant/settings/llm', {
      provider: 'openai',
      baseUrl: `https://${OUTSIDE.model}/v1`,
      model: 'gpt-x',
      apiKey: 'sk-test',
    }),
  )
  if (!airGapped) {
    // Connected, a chat with it: the connection goes out (to the recorder's sink) and fails.
    const s = await call('POST', '/api/v1/chat/sessions', { title: 'outside model' })
    await call('POST', `/api/v1/chat/sessions/${s.data.id}/messages`, { content: 'hello' })
    await until(30_000, async () => {
      const m = await call('GET', `/api/v1/chat/sessions/${s.data.id}/messages`)
      return (m.data as { role: string; status: string }[] | undefined)?.some(
        (x) => x.role === 'assistant' && x.status !== 'generating',
      )
    })
  }
  const setModel = await call('PATCH', '/api/v1/tenant/settings/llm', { ...internalModel, apiKey: null })
  if (setModel.status !== 200) t.fail(`${mode}: the site's model was refused: ${JSON.stringify(setModel)}`)

  // Chat with the site's model.
  const session = await call('POST', '/api/v1/chat/sessions', { title: 'air gap' })
  await call('POST', `/api/v1/chat/sessions/${session.data.id}/messages`, { content: 'Is anything leaving?' })
  answers.chat =
    (await until(30_000, async () => {
      const m = await call('GET', `/api/v1/chat/sessions/${session.data.id}/messages`)
      return (m.data as { role: string; status: string }[] | undefined)?.find(
        (x) => x.role === 'assistant' && x.status !== 'generating',
      )?.status
    })) ?? 'no reply'

  // An agent run: offered web search only when connected.
  const project = await call('POST', '/api/v1/projects', { name: 'Air gap', language: 'typescript' })
  await call('PUT', `/api/v1/projects/${project.data.id}/files/notes.txt`, { content: 'hello' })
  const agent = await call('POST', '/api/v1/agents', {
    name: 'Researcher',
    systemPrompt: 'Find things out.',
    config: { autonomyLevel: 'medium' },
  })
  const execution = await call('POST', `/api/v1/agents/${agent.data.id}/execute`, {
    goal: 'Look it up',
    projectId: project.data.id,
  })
  const runId = execution.data?.runId ?? execution.data?.id
  answers.agent =
    (await until(60_000, async () => {
      const r = await call('GET', `/api/v1/agents/${agent.data.id}/runs/${runId}`)
      const status = (r.data as { status?: string } | undefined)?.status
      return status && !['queued', 'running'].includes(status) ? status : null
    })) ?? 'still running'

  // Webhooks: one to an outside name, one to the site's receiver (delivered).
  answers.outsideWebhook = outcome(
    await call('POST', '/api/v1/webhooks', {
      url: `https://${OUTSIDE.webhook}/atrium`,
      events: ['project.created'],
      secret: WEBHOOK_SECRET,
    }),
  )
  const delivered = site.hooks.received.length
  const hook = await call('POST', '/api/v1/webhooks', {
    url: `http://hooks.${ZONE}:${site.hooks.port}/atrium`,
    events: ['project.created'],
    secret: WEBHOOK_SECRET,
  })
  await call('POST', '/api/v1/projects', { name: 'Announced', language: 'python' })
  answers.webhookDelivered = (await until(30_000, async () => site.hooks.received.length > delivered)) ? 'yes' : 'no'

  // Sign-in at the site's identity provider.
  site.idp.accounts.set('pat', { email: 'owner@example.com', email_verified: true, name: 'Pat' })
  const start = await fetch(`${api}/oauth/corp/start`)
  const startBody = (await start.json()) as { data?: { authorizationUrl: string } }
  const cookie = /atrium_oauth=([A-Za-z0-9]+)/.exec(String(start.headers.get('set-cookie')))?.[1]
  if (startBody.data) {
    const callback = await signInAtIdp(startBody.data.authorizationUrl, 'pat', `${api}/oauth/corp/callback`)
    const signed = await fetch(`${api}/oauth/corp/authorize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: api, cookie: `atrium_oauth=${cookie}` },
      body: JSON.stringify({ callbackUrl: callback.search }),
    })
    answers.signIn = signed.status
  } else answers.signIn = `start: ${start.status}`

  // Every operation of the document.
  const doc = (await (await fetch(`${api}/openapi.json`)).json()) as Record<string, unknown>
  const keyToDelete = await call('POST', '/api/v1/api-keys', { name: 'to delete', type: 'sdk' })
  const member = await call('POST', '/api/v1/tenant/team/members', { email: 'member@example.com', role: 'member' })
  const ids: Record<string, string | undefined> = {
    agents: agent.data.id,
    run: runId,
    'api-keys': keyToDelete.data?.id,
    sessions: session.data.id,
    webhooks: hook.data?.id,
    projects: project.data.id,
    members: member.data?.id ?? member.data?.userId,
  }
  const swept = await sweep(api, doc, {
    url: `https://${OUTSIDE.sweep}/atrium`,
    headers: (_m, path) => (path.startsWith('/api/v1/platform/') ? { authorization: `Bearer ${admin.apiKey}` } : auth),
    param: (path, param) => {
      if (param === 'run_id') return ids.run
      if (param === 'provider') return 'corp'
      if (param === '*') return 'notes.txt'
      if (param === 'projectId') return ids.projects
      if (param === 'userId') return ids.members
      const resource = /^\/api\/v1\/(?:platform\/|chat\/|tenant\/team\/)?([a-z-]+)\//.exec(path)?.[1]
      return resource ? ids[resource] : undefined
    },
  })
  // Let whatever the sweep set going (deliveries, retries, runs) happen before the record is read.
  await sleep(5000)
  await docker(['stop', '--time', '20', name], 60_000)
  t.comment(
    `${mode}: ${site.llm.requests.length} model requests so far, ${site.hooks.received.length} webhook deliveries received`,
  )
  return { swept, answers }
}
