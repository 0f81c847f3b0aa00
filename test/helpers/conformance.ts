// The conformance check: every endpoint of the specification's tables (test/helpers/spec.ts reads
// them from docs/api-spec.md) called over HTTP on a listening app, with exactly the spec's field
// names, in an order where each call finds what it names (created before it is read, changed or
// deleted) and the endpoints' own answers feed the later calls. Each answer is checked against what
// the spec says of it: a success status, the envelope, the X-RateLimit-* headers, the response's
// fields and their forms, the state a job starts in. Then the errors: each provoked answer carries the
// spec's code with the spec's status. What does not hold is returned as findings, so that a test
// can assert there are none, or exactly the ones it caused.
import { createHash } from 'node:crypto'
import { channel } from 'node:diagnostics_channel'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { createKey } from '../../server/modules/api-keys/service.js'
import { apiKeyTags } from '../../server/modules/api-keys/keys.js'
import { createTenant } from '../../server/modules/tenants/service.js'
import type { Platform } from '../../server/platform/index.js'
import { pkcePair } from '../server/modules/cli-auth/helpers.js'
import { CLIENT_ID, CLIENT_SECRET, signInAtIdp, startIdp } from '../server/modules/oauth/idp.js'
import { sample } from './api-sweep.js'
import { appOn } from './app.js'
import { fakeLlm, type FakeLlm } from './fake-llm.js'
import { derefIn, type Schema } from './openapi.js'
import { operatorKey } from './operator.js'
import { restoreForm } from './portability.js'
import { freePort, freshBucket, s3Client, services, suffix, testPlatform } from './platform.js'
import { sseParser } from './sse.js'
import {
  getPath,
  leafNames,
  loadSpec,
  OMIT,
  requestFields,
  resolveMethod,
  type Spec,
  type SpecEndpoint,
  type SpecField,
} from './spec.js'

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON from the API under test
type Json = any

export interface Finding {
  /** "METHOD path" as the spec's table gives it (server spelling); "errors" for the provoked errors. */
  endpoint: string
  /** What was checked: status, headers, envelope, field:<name>, ... */
  check: string
  message: string
}

export interface Report {
  findings: Finding[]
  /** The spec's endpoints called, by key. */
  called: string[]
  /** Endpoints not called in this run, and why (a service the run does not have). */
  skipped: { endpoint: string; why: string }[]
  /** The request bodies and queries sent, by endpoint: their field names, to compare with the spec's. */
  sent: Record<string, string[]>
  spec: Spec
  /** The spec's endpoints, their methods resolved ("(see gaps)": the server's). */
  endpoints: SpecEndpoint[]
}

export interface ConformanceTarget {
  app: FastifyInstance
  platform: Platform
  /** http://127.0.0.1:port: the app listens there, and PUBLIC_URL says so. */
  origin: string
  llm: FakeLlm
  /** The OpenID provider's id in OIDC_PROVIDERS. */
  provider: string
  /** Its accounts, by subject: the check adds the person it signs in as. */
  idpAccounts: Map<string, { email?: string; email_verified?: boolean }>
  /** Buckets of the test's S3 store, when there is one: a schedule's destination, a store of the tenant's own. */
  buckets: { schedule: string; byos: string } | null
}

const PASSWORD = 'conformance password 1'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

/**
 * An app for the check: real services when TEST_* say so, the job runner on, a fake model provider
 * (test/helpers/fake-llm.ts) and a real OpenID provider on loopback, listening on its PUBLIC_URL.
 * `alter` is given the Fastify instance as it is created, before any route is added (the
 * fastify.initialization diagnostics channel): a test changes a route there to show the check fails.
 */
export async function conformanceTarget(
  t: Test,
  o: { alter?: (app: FastifyInstance) => void } = {},
): Promise<ConformanceTarget> {
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const provider = 'idp'
  const idp = await startIdp(t, [`${origin}/oauth/${provider}/callback`])
  const llm = await fakeLlm(t)
  const platform = await testPlatform(t, {
    PUBLIC_URL: origin,
    // The fake provider, the identity provider, the webhook receiver and the test's S3 store are on loopback.
    OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
    WEBHOOK_ALLOW_HTTP: 'true',
    OIDC_PROVIDERS: JSON.stringify([
      {
        id: provider,
        name: 'Conformance sign-in',
        issuer: idp.issuer,
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        allowHttp: true,
      },
    ]),
  })
  const created = channel('fastify.initialization')
  const onCreated = (message: unknown) => o.alter?.((message as { fastify: FastifyInstance }).fastify)
  if (o.alter) created.subscribe(onCreated)
  let h: Awaited<ReturnType<typeof appOn>>
  try {
    h = await appOn(t, platform, { jobs: { pollMs: 50 } })
  } finally {
    if (o.alter) created.unsubscribe(onCreated)
  }
  await h.app.listen({ host: '127.0.0.1', port })
  let buckets: ConformanceTarget['buckets'] = null
  if (services.s3Endpoint) {
    buckets = { schedule: await freshBucket(t), byos: await freshBucket(t) }
    for (const b of Object.values(buckets)) await s3Client().makeBucket(b, 'us-east-1')
  }
  return { app: h.app, platform, origin, llm, provider, idpAccounts: idp.accounts, buckets }
}

interface Answer {
  status: number
  headers: Headers
  /** Parsed JSON (null when not JSON); a stream's Response when asked for one. */
  body: Json
}

interface Send {
  params?: Record<string, string>
  /** Spec fields: values for some (the rest from the spec's words), OMIT to leave an optional one out. */
  given?: Record<string, unknown>
  /** A body the spec does not describe (its cell names no fields): sent as it is. */
  raw?: unknown
  form?: { payload: Buffer; contentType: string }
  headers?: Record<string, string>
  /** The credential: the tenant's key unless another or none ('') is given. */
  bearer?: string
}

/** Runs the whole check against `target`; the findings, and what was called. */
export async function checkConformance(target: ConformanceTarget): Promise<Report> {
  const spec = loadSpec()
  const { origin, platform, llm, provider } = target
  const doc = (await (await fetch(`${origin}/openapi.json`)).json()) as Schema
  const deref = derefIn(doc)
  const served = Object.entries<Schema>(doc.paths).flatMap(([path, item]) =>
    Object.keys(item).map((m) => ({ method: m.toUpperCase(), path, op: item[m] as Schema })),
  )
  const shape = (p: string) => p.replace(/\{[^}]+\}/g, '{}')
  const endpoints = spec.endpoints.map((e) => resolveMethod(e, served))
  const findings: Finding[] = []
  const called = new Set<string>()
  const skipped: Report['skipped'] = []
  const sent: Record<string, string[]> = {}
  const find = (endpoint: string, check: string, message: string): void => {
    findings.push({ endpoint, check, message })
  }
  const ep = (key: string): SpecEndpoint => {
    const e = endpoints.find((x) => x.key === key)
    if (!e) throw new Error(`the check calls ${key}, which is no endpoint of the spec`)
    return e
  }
  const operation = (e: SpecEndpoint) => served.find((s) => s.method === e.method && shape(s.path) === shape(e.path))

  // Every endpoint of the spec is a route of the server.
  for (const e of endpoints) {
    if (e.methodFromServer && e.method === '?')
      find(e.key, 'route', `the spec leaves the method to the gaps and the server serves ${e.path} by none or several`)
    else if (!operation(e)) find(e.key, 'route', 'the server has no such route (method and path)')
  }

  // Who calls: the tenant's owner (a password, for sign-in), its key, an operator key, a key with one permission.
  const email = `conformance-${suffix()}@example.com`
  const tenant = await createTenant(platform, {
    name: `Conformance ${suffix()}`,
    plan: 'enterprise',
    email,
    password: PASSWORD,
  })
  const { tenantId, apiKey } = tenant
  const operator = await operatorKey({ app: target.app, platform })
  /** A key of the tenant's that may read projects and nothing else. */
  const readOnlyKey = async (type: 'sdk' | 'ci') =>
    (
      await platform.db.system((sql) =>
        createKey(sql, apiKeyTags(platform.secrets), {
          tenantId,
          userId: tenant.userId,
          type,
          name: `read only ${type}`,
          permissions: ['projects:read'],
        }),
      )
    ).key
  const readOnly = await readOnlyKey('sdk')
  // "API keys start with a prefix identifying the key type. Prefixes given: svc_sdk_ ... and svc_ci_ ..."
  for (const key of [apiKey, readOnly, await readOnlyKey('ci')])
    if (!spec.keyPrefixes.some((p) => key.startsWith(p)))
      find(
        'errors',
        'key-prefix',
        `a tenant's key starts ${key.slice(0, 8)}, not one of ${spec.keyPrefixes.join(', ')}`,
      )
  const values = { regionCodes: spec.regionCodes, eventKinds: spec.eventKinds }

  async function http(
    method: string,
    path: string,
    o: { body?: unknown; form?: Send['form']; headers?: Record<string, string>; stream?: boolean } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = { ...o.headers }
    let body: BodyInit | undefined
    if (o.form) {
      headers['content-type'] = o.form.contentType
      body = new Uint8Array(o.form.payload)
    } else if (o.body !== undefined) {
      headers['content-type'] = 'application/json'
      body = JSON.stringify(o.body)
    }
    const res = await fetch(`${origin}${path}`, {
      method,
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(90_000),
    })
    if (o.stream) return { status: res.status, headers: res.headers, body: res }
    const text = await res.text()
    let parsed: Json = null
    if (/json/.test(res.headers.get('content-type') ?? '')) {
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
    }
    return { status: res.status, headers: res.headers, body: parsed }
  }

  /** The URL of an endpoint with its path parameters (those not given: a value the API documents, e.g. featureKey). */
  function urlOf(e: SpecEndpoint, params: Record<string, string>): string {
    const op = operation(e)
    return e.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (params[name] !== undefined) return encodeURIComponent(params[name])
      const p = ((op?.op.parameters ?? []) as Schema[]).map(deref).find((x) => x.in === 'path' && x.name === name)
      return encodeURIComponent(String(sample(p?.schema, deref, origin, name)))
    })
  }

  /** Calls an endpoint as the spec describes its request; the answer, and the spec's fields as sent. */
  async function call(e: SpecEndpoint, o: Send = {}, stream = false): Promise<Answer & { sent?: Json }> {
    called.add(e.key)
    let url = urlOf(e, o.params ?? {})
    let body: unknown
    let fields: Record<string, unknown> | undefined
    const r = e.request
    if (r.kind === 'fields') {
      fields = requestFields(r.fields, o.given ?? {}, values)
      sent[e.key] = leafNames(fields)
      if (r.in === 'query') url += `?${new URLSearchParams(Object.entries(fields).map(([k, v]) => [k, String(v)]))}`
      else body = fields
    } else if (o.raw !== undefined) body = o.raw
    else if (r.kind === 'multipart' && !o.form) throw new Error(`${e.key} takes a form`)
    const bearer = o.bearer ?? apiKey
    const a = await http(e.method, url, {
      body,
      form: o.form,
      stream,
      headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...o.headers },
    })
    return { ...a, sent: fields }
  }

  const limited = (e: { path: string; rateLimitExempt: boolean }) => e.path.startsWith('/api/v1/') && !e.rateLimitExempt

  /** The X-RateLimit-* headers of the Limits table, on an /api/v1 answer the limit applies to. */
  function checkHeaders(key: string, a: Answer): void {
    for (const name of spec.rateLimitHeaders) {
      const v = a.headers.get(name)
      if (v === null || !/^\d+$/.test(v)) find(key, 'headers', `${name} is ${v === null ? 'missing' : `"${v}"`}`)
    }
    const limit = a.headers.get(spec.rateLimitHeaders[0]!)
    if (limit !== null && Number(limit) !== spec.defaultRateLimit.requests)
      find(
        key,
        'headers',
        `${spec.rateLimitHeaders[0]} is ${limit}, the spec's default is ${spec.defaultRateLimit.requests}`,
      )
  }

  /** The envelope's meta: a request id, and a timestamp in ISO 8601 UTC. */
  function checkMeta(key: string, body: Json): void {
    for (const f of spec.envelope.filter((x) => x.name.startsWith('meta.'))) {
      const v = getPath(body, f.name)
      if (typeof v !== 'string' || !v) find(key, 'envelope', `${f.name} is ${JSON.stringify(v)}`)
      else if (/UTC timestamp/.test(f.notes) && !ISO_UTC.test(v))
        find(key, 'envelope', `${f.name} "${v}" is not an ISO 8601 UTC timestamp`)
    }
  }

  /** One field of data against the spec's words about it. */
  function checkField(key: string, data: Json, f: SpecField, o: { nonNull?: boolean; where?: string } = {}): void {
    const v = getPath(data, f.name) as Json
    const at = `${o.where ?? ''}${f.name}`
    if (v === undefined) {
      // A secret the client chose, or a key sealed at rest, need not come back: no response carries a secret.
      if (!f.secret) find(key, `field:${f.name}`, `${at} is missing`)
      return
    }
    if (v === null) {
      if (o.nonNull || (f.typed && f.required !== false)) find(key, `field:${f.name}`, `${at} is null`)
      return
    }
    if (f.secret || !f.typed) return
    const bad = (why: string) => find(key, `field:${f.name}`, `${at} ${JSON.stringify(v)} ${why}`)
    if (f.type === 'string' && typeof v !== 'string') return bad('is not a string')
    if (f.type === 'integer' && !Number.isInteger(v)) return bad('is not an integer')
    if (f.type === 'boolean' && typeof v !== 'boolean') return bad('is not a boolean')
    if (f.type === 'array' && !Array.isArray(v)) return bad('is not an array')
    if (/ISO 8601/.test(f.notes) && !(/UTC/.test(f.notes) ? ISO_UTC : ISO).test(v))
      return bad(`is not an ISO 8601${/UTC/.test(f.notes) ? ' UTC' : ''} timestamp`)
    if (/sha256:<hex/.test(f.notes) && !/^sha256:[0-9a-f]{64}$/.test(v)) return bad('is not sha256:<hex digest>')
    if (f.closed && f.values && !f.values.includes(v)) return bad(`is not one of ${f.values.join(', ')}`)
    if (/Url$/.test(f.name) && !/^https?:\/\//.test(v)) return bad('is not an absolute URL')
  }

  /**
   * A success as the spec describes it: a 2xx status, the headers, the envelope (or a stream), the
   * response's fields; and, for what was sent that the response shows, the same values back.
   */
  function checkSuccess(e: SpecEndpoint, a: Answer, request?: Record<string, unknown>): boolean {
    if (a.status < 200 || a.status > 299) {
      const err = a.body?.error
      find(
        e.key,
        'status',
        `${a.status}${err ? ` ${err.code}: ${err.message}${err.details ? ` ${JSON.stringify(err.details)}` : ''}` : ''}`,
      )
      return false
    }
    if (limited(e)) checkHeaders(e.key, a)
    const r = e.response
    if (r.stream) return true
    if (a.body === null || a.body === undefined || !/json/.test(a.headers.get('content-type') ?? '')) {
      find(e.key, 'envelope', `the answer is ${a.headers.get('content-type') ?? 'untyped'}, not a JSON envelope`)
      return false
    }
    if (!('data' in a.body) || 'error' in a.body)
      find(e.key, 'envelope', `the body is not the envelope: it has ${Object.keys(a.body).join(', ') || 'nothing'}`)
    checkMeta(e.key, a.body)
    const data = a.body.data
    if (data === undefined) return false
    const items: Json[] = r.list ? (Array.isArray(data) ? data : []) : [data]
    if (r.list && !Array.isArray(data)) find(e.key, 'list', 'data is not a list')
    for (const [i, item] of items.entries()) {
      const where = r.list ? `data[${i}].` : 'data.'
      for (const f of r.fields) {
        const when = r.presentWhen?.[f.name]
        if (when && getPath(item, when.field) !== when.value) continue
        checkField(e.key, item, f, { nonNull: r.nonNull?.includes(f.name), where })
      }
    }
    if (r.statusValues) {
      const v = getPath(data, r.statusValues.field)
      if (!r.statusValues.values.includes(v as string))
        find(
          e.key,
          `field:${r.statusValues.field}`,
          `${JSON.stringify(v)} is not one of ${r.statusValues.values.join(', ')}`,
        )
    }
    if (r.identifier && typeof (data?.[r.identifier] ?? data?.id) !== 'string')
      find(e.key, 'field:identifier', `neither data.${r.identifier} nor data.id`)
    if (r.url && !Object.values(data ?? {}).some((v) => typeof v === 'string' && /^https?:\/\/\S+$/.test(v)))
      find(e.key, 'field:url', 'data holds no absolute URL')
    const initial = spec.initialStates.get(e.key)
    if (initial && r.fields.some((f) => f.name === 'status') && data?.status !== initial.state)
      find(
        e.key,
        'state',
        `a new ${initial.resource} is ${JSON.stringify(data?.status)}, the spec's first state is ${initial.state}`,
      )
    // Sent and shown: a field the request set and the resource shows comes back as it was sent.
    if (request && !r.list)
      for (const name of leafNames(request)) {
        const f = r.fields.find((x) => x.name === name)
        if (!f || f.secret) continue
        const back = getPath(data, name)
        if (back !== undefined && JSON.stringify(back) !== JSON.stringify(getPath(request, name)))
          find(e.key, `echo:${name}`, `sent ${JSON.stringify(getPath(request, name))}, shown ${JSON.stringify(back)}`)
      }
    return true
  }

  /** Calls and checks; the answer, whether it is a success as the spec describes, and the fields sent. */
  async function check(key: string, o: Send = {}): Promise<Answer & { ok: boolean; sent?: Json }> {
    const e = ep(key)
    const a = await call(e, o)
    return { ...a, ok: checkSuccess(e, a, e.request.kind === 'fields' && e.request.in === 'body' ? a.sent : undefined) }
  }

  /** An error answer as the Errors section says: its code's status, the envelope {error: {code, message, details}, meta}. */
  function checkError(what: string, a: Answer, code: string): void {
    const row = spec.errors.find((x) => x.code === code)!
    if (a.status !== row.status || a.body?.error?.code !== code) {
      find('errors', code, `${what}: ${a.status} ${a.body?.error?.code ?? ''}, expected ${row.status} ${code}`)
      return
    }
    const err = a.body.error
    if (typeof err.message !== 'string' || !err.message) find('errors', code, `${what}: error.message is missing`)
    if (
      err.details !== undefined &&
      (typeof err.details !== 'object' || err.details === null || Array.isArray(err.details))
    )
      find('errors', code, `${what}: error.details is not an object`)
    if ('data' in a.body) find('errors', code, `${what}: an error answer has data`)
    checkMeta('errors', a.body)
  }

  /** When a spec call fails, what later calls need is made as the API documents it (its route's required fields). */
  async function fallback(key: string, params: Record<string, string> = {}): Promise<Json> {
    const e = ep(key)
    const schema = operation(e)?.op.requestBody?.content?.['application/json']?.schema
    const a = await http(e.method, urlOf(e, params), {
      body: schema ? sample(deref(schema), deref, origin) : undefined,
      headers: { authorization: `Bearer ${apiKey}` },
    })
    return a.body?.data ?? null
  }

  const step = async (key: string, fn: () => Promise<unknown>) => {
    try {
      await fn()
    } catch (err) {
      find(key, 'error', (err as Error).stack ?? String(err))
    }
  }

  /** Polls a job's GET until its status leaves `waiting`; the last answer. */
  async function until(key: string, params: Record<string, string>, waiting: string[]): Promise<Answer> {
    let a: Answer = await call(ep(key), { params })
    for (let i = 0; i < 1200 && a.status === 200 && waiting.includes(a.body?.data?.status); i++) {
      await sleep(50)
      a = await call(ep(key), { params })
    }
    return a
  }

  // ---- Tenant
  await step('GET /api/v1/tenant', async () => {
    const a = await check('GET /api/v1/tenant')
    if (a.ok && (a.body.data.tenantId ?? a.body.data.id) !== tenantId)
      find('GET /api/v1/tenant', 'field:identifier', `the identifier is not the tenant's (${tenantId})`)
  })
  await step('GET /api/v1/tenant/settings/llm', () => check('GET /api/v1/tenant/settings/llm'))
  // "the LLM settings fields ...: not shown": the fields docs/llm.md gives, pointing the tenant at the fake provider.
  await step('PATCH /api/v1/tenant/settings/llm', () =>
    check('PATCH /api/v1/tenant/settings/llm', {
      raw: {
        provider: 'openai-compatible',
        baseUrl: llm.url,
        model: 'test-model',
        apiKey: 'sk-conformance-0123456789',
      },
    }),
  )
  await step('GET /api/v1/tenant/team/members', () => check('GET /api/v1/tenant/team/members'))

  // ---- Projects
  let projectId = ''
  await step('POST /api/v1/projects', async () => {
    const a = await check('POST /api/v1/projects', {
      given: { name: `Conformance-${suffix()}`, description: 'A project of the check', language: 'typescript' },
    })
    projectId = a.ok ? a.body.data.id : ((await fallback('POST /api/v1/projects'))?.id ?? '')
  })
  const project = { id: projectId, projectId }
  await step('GET /api/v1/projects', async () => {
    const a = await check('GET /api/v1/projects')
    if (a.ok && !a.body.data.some((p: Json) => p.id === projectId))
      find('GET /api/v1/projects', 'list', 'the project just created is not listed')
  })
  await step('GET /api/v1/projects/{id}', () => check('GET /api/v1/projects/{id}', { params: project }))
  await step('PATCH /api/v1/projects/{id}', () =>
    check('PATCH /api/v1/projects/{id}', {
      params: project,
      given: { name: `Renamed-${suffix()}`, description: 'Changed by the check', language: 'python' },
    }),
  )

  // ---- Agents
  let agentId = ''
  await step('POST /api/v1/agents', async () => {
    const a = await check('POST /api/v1/agents')
    agentId = a.ok ? a.body.data.id : ((await fallback('POST /api/v1/agents'))?.id ?? '')
  })
  await step('GET /api/v1/agents', () => check('GET /api/v1/agents'))
  let runId = ''
  await step('POST /api/v1/agents/{id}/execute', async () => {
    const a = await check('POST /api/v1/agents/{id}/execute', {
      params: { id: agentId },
      given: { goal: 'Say ok', projectId },
    })
    // "Run identifier is used as run_id in the path": the run's id.
    runId = a.body?.data?.id ?? a.body?.data?.runId ?? a.body?.data?.run_id ?? ''
  })
  await step('GET /api/v1/agents/{id}/runs/{run_id}', () =>
    check('GET /api/v1/agents/{id}/runs/{run_id}', { params: { id: agentId, run_id: runId } }),
  )

  // ---- Chat
  let sessionId = ''
  await step('POST /api/v1/chat/sessions', async () => {
    // "Request bodies of session creation ...: not shown": a session of nothing but itself.
    const a = await check('POST /api/v1/chat/sessions', { raw: {} })
    sessionId = a.ok ? a.body.data.id : ((await fallback('POST /api/v1/chat/sessions'))?.id ?? '')
  })
  let posted = false
  await step('POST /api/v1/chat/sessions/{id}/messages', async () => {
    const a = await check('POST /api/v1/chat/sessions/{id}/messages', {
      params: { id: sessionId },
      given: { sessionId, content: 'Hello from the conformance check', projectId },
    })
    posted = a.ok
  })
  await step('GET /api/v1/chat/sessions/{id}/stream', async () => {
    const e = ep('GET /api/v1/chat/sessions/{id}/stream')
    const a = await call(e, { params: { id: sessionId } }, true)
    const res = a.body as Response
    try {
      if (!checkSuccess(e, a)) return
      if (!/^text\/event-stream/.test(a.headers.get('content-type') ?? ''))
        return find(e.key, 'stream', `content-type ${a.headers.get('content-type')}, not text/event-stream`)
      if (!posted) return // nothing was said, so nothing streams: the headers are what there is to check
      // The reply to the message streams: its first event.
      const reader = res.body!.getReader()
      const decoder = new TextDecoder()
      let events = 0
      const parse = sseParser(() => events++)
      const deadline = AbortSignal.timeout(60_000)
      while (!events && !deadline.aborted) {
        const { value, done } = await Promise.race([
          reader.read(),
          new Promise<{ value?: undefined; done: true }>((resolve) =>
            deadline.addEventListener('abort', () => resolve({ done: true })),
          ),
        ])
        if (done) break
        parse(decoder.decode(value, { stream: true }))
      }
      if (!events) find(e.key, 'stream', 'no event of the reply came')
    } finally {
      await res.body?.cancel().catch(() => {})
    }
  })
  const today = new Date().toISOString().slice(0, 10)
  await step('POST /api/v1/chat/export', () =>
    check('POST /api/v1/chat/export', { given: { 'dateRange.start': today, 'dateRange.end': today } }),
  )
  await step('POST /api/v1/gdpr/export', () => check('POST /api/v1/gdpr/export'))

  // ---- Webhooks: a receiver on loopback (deliveries are off in this app; registering is what is checked).
  await step('POST /api/v1/webhooks', () =>
    check('POST /api/v1/webhooks', { given: { url: `${origin}/conformance/receiver` } }),
  )

  // ---- Project backup, versions
  let backup: Buffer | null = null
  await step('POST /api/v1/projects/{projectId}/backup', async () => {
    const key = 'POST /api/v1/projects/{projectId}/backup'
    const a = await check(key, { params: project })
    const data = a.body?.data
    if (!a.ok || typeof data?.downloadUrl !== 'string') return
    const file = await fetch(data.downloadUrl, { signal: AbortSignal.timeout(60_000) })
    if (file.status !== 200) return find(key, 'download', `GET downloadUrl answered ${file.status}`)
    backup = Buffer.from(await file.arrayBuffer())
    if (data.size !== backup.length) find(key, 'field:size', `size ${data.size}, the file has ${backup.length} bytes`)
    const digest = `sha256:${createHash('sha256').update(backup).digest('hex')}`
    if (data.checksum !== digest) find(key, 'field:checksum', `checksum ${data.checksum}, the file's is ${digest}`)
  })
  let versionId = ''
  await step('GET /api/v1/projects/{projectId}/versions', async () => {
    const a = await check('GET /api/v1/projects/{projectId}/versions', { params: project })
    // "a version is addressed by versionId": the oldest listed (the project as created).
    const v = a.body?.data?.at?.(-1)
    versionId = v?.versionId ?? v?.id ?? ''
  })
  await step('POST /api/v1/projects/{projectId}/versions/{versionId}/restore', () =>
    check('POST /api/v1/projects/{projectId}/versions/{versionId}/restore', { params: { projectId, versionId } }),
  )

  // ---- Export, restore, schedule
  const tenantPath = { tenantId }
  let exportId = ''
  await step('POST /api/v1/platform/tenants/{tenantId}/export', async () => {
    const a = await check('POST /api/v1/platform/tenants/{tenantId}/export', { params: tenantPath })
    exportId = a.body?.data?.exportId ?? ''
  })
  await step('GET /api/v1/platform/tenants/{tenantId}/export/{exportId}', async () => {
    const key = 'GET /api/v1/platform/tenants/{tenantId}/export/{exportId}'
    const a = await until(key, { tenantId, exportId }, ['pending', 'running'])
    if (checkSuccess(ep(key), a) && a.body.data.status !== 'completed')
      find(key, 'state', `the export ended ${a.body.data.status}: ${JSON.stringify(a.body.data.error ?? null)}`)
  })
  let restoreId = ''
  await step('POST /api/v1/platform/tenants/{tenantId}/restore', async () => {
    const e = ep('POST /api/v1/platform/tenants/{tenantId}/restore')
    const r = e.request
    if (r.kind !== 'multipart') throw new Error('the restore takes a form')
    if (!backup) throw new Error('no project backup file to restore (see its endpoint)')
    // "Name of the file part in the restore form: not shown": the name the API documents (its one binary property).
    const form = operation(e)?.op.requestBody?.content?.['multipart/form-data']?.schema
    const filePart = Object.entries<Schema>(deref(form ?? {}).properties ?? {}).find(
      ([, s]) => s.format === 'binary',
    )?.[0]
    if (!filePart) return find(e.key, 'route', 'the API documents no file part for the form')
    // merge true "adds to existing data"; validate false: the restore runs, not only its checks.
    const options = requestFields(r.options, { merge: true, validate: false }, values)
    sent[e.key] = [filePart, ...leafNames(options).map((n) => `${r.jsonPart}.${n}`)]
    // The form as the restore tests build it (portability.ts), whose JSON part is named as the spec names it.
    if (r.jsonPart !== 'options') throw new Error(`restoreForm names its JSON part options, not ${r.jsonPart}`)
    const { payload, headers } = restoreForm(backup, options, { fileField: filePart })
    const a = await check(e.key, {
      params: tenantPath,
      form: { payload, contentType: headers['content-type']! },
    })
    restoreId = a.body?.data?.restoreId ?? ''
  })
  await step('GET /api/v1/platform/tenants/{tenantId}/restore/{restoreId}', async () => {
    const key = 'GET /api/v1/platform/tenants/{tenantId}/restore/{restoreId}'
    const a = await until(key, { tenantId, restoreId }, ['processing'])
    // Versioning: "Backup files carry a version and must be compatible with the service on restore."
    if (checkSuccess(ep(key), a) && a.body.data.status === 'failed')
      find(key, 'state', `the restore of the service's own backup failed: ${JSON.stringify(a.body.data.error ?? null)}`)
  })
  const scheduleKey = 'POST /api/v1/platform/tenants/{tenantId}/export/schedule'
  if (!target.buckets) skipped.push({ endpoint: scheduleKey, why: 'needs an S3 store (TEST_S3_ENDPOINT) to export to' })
  else
    await step(scheduleKey, async () => {
      await check(scheduleKey, {
        params: tenantPath,
        given: {
          s3Bucket: target.buckets!.schedule,
          s3Prefix: 'conformance',
          s3AccessKey: services.s3AccessKey,
          s3SecretKey: services.s3SecretKey,
        },
      })
    })

  // ---- Regions and storage
  let region = spec.regionCodes[0]!
  await step('GET /api/v1/regions', async () => {
    const a = await check('GET /api/v1/regions')
    // The deployment's own region (the spec lists fifteen; a deployment serves some).
    region = a.body?.data?.find?.((r: Json) => r.default)?.code ?? region
  })
  await step('GET /api/v1/regions/preferences/{tenantId}', () =>
    check('GET /api/v1/regions/preferences/{tenantId}', { params: tenantPath }),
  )
  // Without residency, no residency region; a failover region needs a second region this deployment does not serve.
  await step('PATCH /api/v1/regions/preferences/{tenantId}', () =>
    check('PATCH /api/v1/regions/preferences/{tenantId}', {
      params: tenantPath,
      given: { primaryRegion: region, secondaryRegion: OMIT, dataResidencyRequired: false, dataResidencyRegion: OMIT },
    }),
  )
  // The platform's route is for platform operators (docs/regions.md): an operator key.
  await step('PATCH /api/v1/platform/tenants/{tenantId}/regional-preferences', () =>
    check('PATCH /api/v1/platform/tenants/{tenantId}/regional-preferences', {
      params: tenantPath,
      bearer: operator.key,
      given: { primaryRegion: region, secondaryRegion: OMIT, dataResidencyRequired: true, dataResidencyRegion: region },
    }),
  )
  await step('GET /api/v1/regions/storage/{tenantId}', () =>
    check('GET /api/v1/regions/storage/{tenantId}', { params: tenantPath }),
  )
  // A store of the tenant's own: a bucket of the test's S3 store, or (without one) an address nothing answers.
  const store = target.buckets
    ? {
        byosEndpoint: services.s3Endpoint,
        byosBucket: target.buckets.byos,
        byosRegion: 'us-east-1',
        byosAccessKey: services.s3AccessKey,
        byosSecretKey: services.s3SecretKey,
      }
    : { byosEndpoint: `http://127.0.0.1:${await freePort()}`, byosBucket: 'conformance-none', byosRegion: 'us-east-1' }
  await step('POST /api/v1/regions/storage/{tenantId}/validate', () =>
    check('POST /api/v1/regions/storage/{tenantId}/validate', { params: tenantPath, given: store }),
  )
  await step('PUT /api/v1/regions/storage/{tenantId}', () =>
    check('PUT /api/v1/regions/storage/{tenantId}', {
      params: tenantPath,
      given: target.buckets
        ? { storageMode: 'byos', platformRegion: region, ...store }
        : {
            storageMode: 'platform',
            platformRegion: region,
            ...Object.fromEntries(
              ['byosProvider', 'byosEndpoint', 'byosBucket', 'byosRegion', 'byosAccessKey', 'byosSecretKey'].map(
                (k) => [k, OMIT],
              ),
            ),
          },
    }),
  )
  await step('GET /api/v1/regions/features/{tenantId}/check/{featureKey}', () =>
    check('GET /api/v1/regions/features/{tenantId}/check/{featureKey}', { params: tenantPath }),
  )
  await step('GET /api/v1/routing-info', () => check('GET /api/v1/routing-info'))

  // ---- Authentication endpoints
  // "Client operations without paths given: login (email, password)": the server's sign-in gives the session token.
  const login = await http('POST', '/api/v1/auth/login', { body: { email, password: PASSWORD } })
  const sessionToken: string = login.body?.data?.token ?? ''
  let accessToken = ''
  await step('POST /api/v1/auth/exchange', async () => {
    const a = await check('POST /api/v1/auth/exchange', { bearer: '', given: { token: sessionToken } })
    accessToken = a.body?.data?.accessToken ?? ''
    if (a.ok && !accessToken) find('POST /api/v1/auth/exchange', 'field:accessToken', 'no access token was set')
  })
  const startKey = endpoints.find((e) => e.path === `/oauth/{provider}/start`)!.key
  await step(startKey, async () => {
    const sub = `conformance-${suffix()}`
    target.idpAccounts.set(sub, { email, email_verified: true })
    const start = await check(startKey, { bearer: '', params: { provider } })
    const url =
      start.body?.data?.authorizationUrl ??
      Object.values(start.body?.data ?? {}).find((v) => /^https?:/.test(String(v)))
    if (!start.ok || !url) return
    const cookie = (start.headers.getSetCookie?.() ?? []).map((c) => c.split(';')[0]).join('; ')
    const callback = await signInAtIdp(String(url), sub, `${origin}/oauth/${provider}/callback`)
    // "state-changing OAuth step; POST only" names no fields: the callback as the API documents it ({callbackUrl}),
    // from the browser that started (its cookie, its origin).
    await check('POST /oauth/{provider}/authorize', {
      bearer: '',
      params: { provider },
      raw: { callbackUrl: callback.search },
      headers: { cookie, origin },
    })
  })
  await step('POST /cli/auth/start', async () => {
    // The device login as the spec's steps go: start with a random state and a PKCE S256 challenge.
    const { verifier, challenge } = pkcePair()
    const started = await check('POST /cli/auth/start', {
      bearer: '',
      given: { codeChallenge: challenge, cliVersion: '1.0.0', platform: 'linux-x64' },
    })
    if (!started.ok) return
    const { loginId, verificationCode } = started.body.data
    const state = started.sent.state as string
    const status = async (expected: string) => {
      const a = await check('GET /cli/auth/status', { bearer: '', given: { loginId } })
      if (a.ok && a.body.data.status !== expected)
        find('GET /cli/auth/status', 'state', `the login is ${a.body.data.status}, expected ${expected}`)
    }
    await status(spec.initialStates.get('POST /cli/auth/start')?.state ?? 'pending')
    const info = await check('GET /cli/auth/info', { bearer: '', given: { loginId } })
    if (info.ok && info.body.data.verificationCode !== verificationCode)
      find('GET /cli/auth/info', 'field:verificationCode', 'not the code the start gave the terminal')
    // The signed-in user approves: the access token the exchange set.
    await check('POST /cli/auth/complete', { bearer: accessToken, given: { loginId, state } })
    await status('approved')
    const token = await check('POST /cli/auth/token', { bearer: '', given: { loginId, codeVerifier: verifier } })
    if (token.ok) {
      const me = await http('GET', '/api/v1/tenant', { headers: { authorization: `Bearer ${token.body.data.token}` } })
      if (me.status !== 200) find('POST /cli/auth/token', 'token', `the token it gave is refused: ${me.status}`)
    }
    // "A session can be consumed once only."
    const again = await call(ep('POST /cli/auth/token'), { bearer: '', given: { loginId, codeVerifier: verifier } })
    if (again.status < 400) find('POST /cli/auth/token', 'single-use', `a second redemption answered ${again.status}`)
    else
      checkError(
        'a second redemption of a login',
        again,
        spec.errors.find((x) => x.status === again.status)?.code ?? '?',
      )
    await status('consumed')
  })

  // ---- Errors
  await step('errors', async () => {
    const projects = ep('GET /api/v1/projects')
    const none = await call(projects, { bearer: '' })
    checkError('no credential', none, 'UNAUTHORIZED')
    checkHeaders('errors', none)
    checkError(
      'an unknown key',
      await call(projects, { bearer: `${spec.keyPrefixes[0]}${'x'.repeat(40)}` }),
      'UNAUTHORIZED',
    )
    checkError(
      'a key without the permission',
      await call(ep('POST /api/v1/projects'), { bearer: readOnly, given: { name: 'Refused' } }),
      'FORBIDDEN',
    )
    checkError(
      'a malformed id',
      await call(ep('GET /api/v1/projects/{id}'), { params: { id: 'not-an-id' } }),
      'VALIDATION_ERROR',
    )
    checkError(
      'a field of the wrong type',
      await call(ep('POST /api/v1/projects'), { given: { name: 42 as unknown as string } }),
      'VALIDATION_ERROR',
    )
    // Authentication 3: "requests carry no tenant header and a client must not send one".
    checkError('a tenant header', await call(projects, { headers: { 'x-tenant-id': tenantId } }), 'VALIDATION_ERROR')
    // "Default rate limit | 1000 requests per 60 seconds": a key of its own spends it.
    const spender = await readOnlyKey('ci')
    let over: Answer | null = null
    for (let sentCount = 0; !over && sentCount < spec.defaultRateLimit.requests + 100; sentCount += 25) {
      const batch = await Promise.all(Array.from({ length: 25 }, () => call(projects, { bearer: spender })))
      over = batch.find((a) => a.status === 429) ?? null
    }
    if (!over) find('errors', 'RATE_LIMIT_EXCEEDED', `no 429 after ${spec.defaultRateLimit.requests + 100} requests`)
    else {
      checkError('over the rate limit', over, 'RATE_LIMIT_EXCEEDED')
      checkHeaders('errors', over)
    }
  })

  // ---- Deleted last: then it is a missing resource.
  await step('DELETE /api/v1/projects/{id}', async () => {
    await check('DELETE /api/v1/projects/{id}', { params: project })
    const gone = await call(ep('GET /api/v1/projects/{id}'), { params: project })
    checkError('a deleted project', gone, 'RESOURCE_NOT_FOUND')
    // "error.details (object of context, for example the identifier of the missing resource)"
    if (!JSON.stringify(gone.body?.error?.details ?? {}).includes(projectId))
      find(
        'errors',
        'RESOURCE_NOT_FOUND',
        `details do not name the missing project: ${JSON.stringify(gone.body?.error?.details)}`,
      )
  })

  for (const e of endpoints)
    if (!called.has(e.key) && !skipped.some((s) => s.endpoint === e.key))
      find(e.key, 'called', 'the check never called it')
  return { findings, called: [...called], skipped, sent, spec, endpoints }
}
