// Every operation of the OpenAPI document with the inputs of issue 40's items 7 and 8, sent over
// real HTTP: a NUL in every query parameter and in every text field of a body, an unpaired
// surrogate in every text field, a Last-Event-ID past PostgreSQL's integers, and every operation on a
// database not migrated yet. No answer may be a 500: an input is refused in the envelope, a database
// that is not ready is 503.
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { apiKeyTags, generateKey } from '../../../server/modules/api-keys/keys.js'
import type { Resolver } from '../../../server/platform/outbound.js'
import { sample } from '../../helpers/api-sweep.js'
import { appOn, testApp, type TestApp } from '../../helpers/app.js'
import { derefIn, operationsOf, type Operation, type Schema } from '../../helpers/openapi.js'
import { testPlatform } from '../../helpers/platform.js'
import { operatorKey } from '../../helpers/operator.js'

// Names resolve to a public address without asking DNS (the sandbox may have none).
const resolver: Resolver = async () => [{ address: '93.184.215.14', family: 4 }]

interface Sent {
  what: string
  op: Operation
  status: number
  body: string
}

/** Sends each variant of each operation to `h` (listening), authenticated as `auth(op)`; the answers. */
async function sendAll(
  h: TestApp,
  variants: (
    op: Operation,
    deref: (s: Schema) => Schema,
  ) => { what: string; path: string; body?: string; headers?: Record<string, string> }[],
  auth: (op: Operation) => string,
  param: (op: Operation, name: string) => string,
) {
  await h.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
  const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Schema
  const deref = derefIn(doc)
  const sent: Sent[] = []
  for (const op of operationsOf(doc).sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'))) {
    const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURI(param(op, name)))
    for (const v of variants({ ...op, path }, deref)) {
      const res = await fetch(`${base}${v.path}`, {
        method: op.method,
        headers: {
          authorization: auth(op),
          ...(v.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...v.headers,
        },
        body: v.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(30_000),
      })
      const text = /event-stream/.test(res.headers.get('content-type') ?? '')
        ? (await res.body?.cancel(), '')
        : await res.text()
      sent.push({ what: v.what, op, status: res.status, body: text.slice(0, 300) })
    }
  }
  return sent
}

/** Every string property a body schema names, however deep, by its JSON path. */
function stringFields(schema: Schema | null, deref: (s: Schema) => Schema, at: string[] = [], depth = 0): string[][] {
  if (!schema || depth > 4) return []
  const s = deref(schema)
  const alternatives = (s.anyOf ?? s.oneOf) as Schema[] | undefined
  if (alternatives) return alternatives.flatMap((a) => stringFields(a, deref, at, depth + 1))
  if (s.type === 'string' && !s.enum && s.format !== 'uuid' && s.format !== 'date-time') return [at]
  if (s.type === 'object')
    return Object.entries<Schema>(s.properties ?? {}).flatMap(([k, v]) => stringFields(v, deref, [...at, k], depth + 1))
  return []
}

const setAt = (value: unknown, path: string[], to: string): unknown => {
  if (!path.length) return to
  const o = value && typeof value === 'object' && !Array.isArray(value) ? { ...(value as Record<string, unknown>) } : {}
  o[path[0]!] = setAt(o[path[0]!], path.slice(1), to)
  return o
}

t.test(
  'a NUL or an unpaired surrogate in any query parameter or text field, and a Last-Event-ID past 2^31, never answer 500',
  async (t) => {
    const h = await testApp(t, { RATE_LIMIT_MAX: '1000000' }, { resolver })
    const { call, apiKey, tenantId } = await h.tenant()
    const admin = await operatorKey(h, 'sweep operator')
    const made = async (r: Promise<{ status: number; body: { data?: Record<string, unknown> } }>, what: string) => {
      const x = await r
      if (x.status >= 300) throw new Error(`${what}: ${x.status} ${JSON.stringify(x.body)}`)
      return x.body.data as Record<string, string> & { id: string }
    }
    await made(
      call('PATCH', '/api/v1/tenant/settings/llm', {
        provider: 'openai-compatible',
        baseUrl: 'https://llm.example.com/v1',
        model: 'm',
      }),
      'llm settings',
    )
    const project = await made(call('POST', '/api/v1/projects', { name: 'swept' }), 'project')
    await call('PUT', `/api/v1/projects/${project.id}/files/notes.txt`, 'hello', { 'content-type': 'text/plain' })
    const agent = await made(
      call('POST', '/api/v1/agents', { name: 'a', systemPrompt: '', config: { autonomyLevel: 'low' } }),
      'agent',
    )
    const run = await made(
      call('POST', `/api/v1/agents/${agent.id}/execute?wait=0`, { goal: 'g', projectId: project.id }),
      'run',
    )
    const session = await made(call('POST', '/api/v1/chat/sessions', {}), 'session')
    const hook = await made(
      call('POST', '/api/v1/webhooks', {
        url: 'https://hooks.example.com/in',
        events: ['project.created'],
        secret: 'whsec-sweep-0123456789abcdef',
      }),
      'webhook',
    )
    const key = await made(
      call('POST', '/api/v1/api-keys', { name: 'to delete', type: 'sdk', permissions: ['projects:read'] }),
      'api key',
    )
    const member = await made(
      call('POST', '/api/v1/tenant/team/members', { email: 'member@example.com', role: 'member' }),
      'member',
    )
    const ids: Record<string, string> = {
      agents: agent.id,
      projects: project.id,
      sessions: session.id,
      webhooks: hook.id,
      'api-keys': key.id,
      members: (member as unknown as { member: { id: string } }).member.id,
      tenants: tenantId,
    }

    const sent = await sendAll(
      h,
      (op, deref) => {
        const out: { what: string; path: string; body?: string; headers?: Record<string, string> }[] = []
        const body = op.body ? sample(op.body, deref, 'https://hooks.example.com/x') : undefined
        const q = op.query.filter((p) => deref(p.schema).type === 'string' || !deref(p.schema).type)
        if (q.length)
          out.push({
            what: 'NUL in the query',
            path: `${op.path}?${q.map((p) => `${encodeURIComponent(p.name)}=a%00b`).join('&')}`,
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          })
        for (const field of stringFields(op.body, deref)) {
          for (const [what, bad] of [
            ['NUL', 'a\u0000b'],
            ['unpaired surrogate', 'a\ud800b'],
          ]) {
            // JSON.stringify writes \u0000 and \ud800 as escapes: the text a client would send.
            out.push({
              what: `${what} in body.${field.join('.')}`,
              path: op.path,
              body: JSON.stringify(setAt(body ?? {}, field, bad!)),
            })
          }
        }
        for (const id of ['2147483648', '4294967296', '9999999999'])
          out.push({
            what: `Last-Event-ID ${id}`,
            path: op.path,
            headers: { 'last-event-id': id },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          })
        return out
      },
      (op) => `Bearer ${op.path.startsWith('/api/v1/platform/') ? admin.key : apiKey}`,
      (op, name) => {
        if (name === 'run_id') return run.id
        if (name === '*') return 'notes.txt'
        if (name === 'projectId') return project.id
        if (name === 'userId') return ids.members!
        if (name === 'tenantId') return tenantId
        if (name === 'provider') return 'corp'
        const resource = /^\/api\/v1\/(?:platform\/|chat\/|tenant\/team\/)?([a-z-]+)\//.exec(op.path)?.[1]
        return (resource && ids[resource]) || '01a22364-f828-77a4-875c-e617ba7304db'
      },
    )
    const failures = sent
      .filter((s) => s.status >= 500)
      .map((s) => `${s.op.method} ${s.op.path} (${s.what}): ${s.status} ${s.body}`)
    t.same(
      failures,
      [],
      `${sent.length} requests to ${new Set(sent.map((s) => `${s.op.method} ${s.op.path}`)).size} operations, none 5xx`,
    )
    const refusedNul = sent.filter((s) => s.what === 'NUL in the query' && s.status === 400).length
    t.ok(refusedNul > 5, `${refusedNul} operations refused a NUL in their query`)
    t.ok(
      sent.some((s) => s.what.startsWith('NUL in body') && s.status === 400 && s.body.includes('NUL')),
      'NUL in bodies is named',
    )
  },
)

t.test('on a database not migrated yet, every operation answers 503 or a refusal, never 500', async (t) => {
  const platform = await testPlatform(t, { MIGRATE_ON_START: 'false' }, { emptyDatabase: true })
  const h = await appOn(t, platform)
  // A key this deployment could have issued (its tag is right), so that it is looked up: in tables not there yet.
  const key = generateKey('ci', apiKeyTags(platform.secrets)).key
  const sent = await sendAll(
    h,
    (op, deref) => [
      {
        what: 'as it is',
        path: op.path,
        ...(op.body ? { body: JSON.stringify(sample(op.body, deref, 'https://hooks.example.com/x')) } : {}),
      },
    ],
    () => `Bearer ${key}`,
    (_op, name) => (name === '*' ? 'notes.txt' : name === 'provider' ? 'corp' : '01a22364-f828-77a4-875c-e617ba7304db'),
  )
  const failures = sent
    .filter((s) => s.status >= 500 && s.status !== 503)
    .map((s) => `${s.op.method} ${s.op.path}: ${s.status} ${s.body}`)
  t.same(failures, [], `${sent.length} operations, none 500`)
  const unavailable = sent.filter((s) => s.status === 503)
  t.ok(unavailable.length > 50, `${unavailable.length} answered 503`)
  t.same(
    unavailable
      .filter((s) => !s.body.startsWith('{"error":{"code":"SERVICE_UNAVAILABLE"'))
      .map((s) => `${s.op.method} ${s.op.path}`),
    [],
    'each 503 in the envelope',
  )
})
