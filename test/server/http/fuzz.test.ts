// Property-based fuzzing of the HTTP boundary. Every operation of the OpenAPI document gets random
// paths, query strings, bodies and headers, sent over real HTTP on loopback: unlike inject(), a
// socket carries raw percent-encodings, Latin-1 bytes, oversized heads and unknown methods through
// Node's own parser, where a client reaches code that inject() skips. A third of the cases are well
// formed (existing ids, schema-valid bodies, a credential that may act) so the run gets past
// validation into the handlers; the rest are hostile. Every answer must be below 500 and every
// error the envelope, with a code of the catalog and its status.
// FUZZ_SEED and FUZZ_RUNS override the fixed seed and the case count; a failure prints the seed and
// path, and FUZZ_PATH replays exactly that case. FUZZ_VERBOSE=1 lists the statuses per operation.
import { createHash } from 'node:crypto'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import t from 'tap'
import { ERRORS, type ErrorCode } from '../../../server/domain/errors.js'
import { MAX_JSON_DEPTH } from '../../../server/domain/text.js'
import { createTenant } from '../../../server/modules/tenants/service.js'
import type { Resolver } from '../../../server/platform/outbound.js'
import { caller, testApp } from '../../helpers/app.js'
import { suffix } from '../../helpers/platform.js'
import { derefIn, operationsOf, type Operation, type Schema } from '../../helpers/openapi.js'
import { operatorKey } from '../../helpers/operator.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20_261_125)
const RUNS = Number(process.env.FUZZ_RUNS ?? 3000)

// Webhook and LLM URLs are judged against DNS: answered here, so the run needs no network and
// reaches the allowed, the refused and the unknown name alike.
const resolver: Resolver = async (host) => {
  if (host.startsWith('nx')) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
  return [{ address: host.startsWith('internal') ? '10.0.0.7' : '93.184.215.14', family: 4 }]
}

// The general rate limit would turn most of the run into 429s; it has its own tests.
const h = await testApp(t, { RATE_LIMIT_MAX: '1000000' }, { resolver })
await h.app.listen({ port: 0, host: '127.0.0.1' })
const port = (h.app.server.address() as AddressInfo).port

// ---- credentials and things that exist --------------------------------------------------------

const PASSWORD = 'correct horse battery staple'
const email = `fuzz-${suffix()}@example.com`
const owner = await createTenant(h.platform, {
  name: `Fuzz ${suffix()}`,
  plan: 'enterprise',
  email,
  password: PASSWORD,
})
const anonymous = caller(h.app)
async function signIn() {
  const login = await anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  const ex = await anonymous('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  if (ex.status !== 200) throw new Error(`no access token: ${JSON.stringify(ex.body)}`)
  return { session: login.body.data.token as string, access: ex.body.data.accessToken as string }
}
const main = await signIn()
// Logging out ends the session of the credential: logout is sent with a session of its own.
const spare = await signIn()
const admin = await operatorKey(h, 'fuzz operator')
const asKey = caller(h.app, owner.apiKey)
const asAdmin = admin.call

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
async function made(r: { status: number; body: any }, what: string) {
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.data
}
const sdk = await made(
  await asKey('POST', '/api/v1/api-keys', { name: 'fuzz sdk', type: 'sdk', permissions: ['projects:read'] }),
  'sdk key',
)
const project = await made(await asKey('POST', '/api/v1/projects', { name: 'Fuzz one' }), 'project')
await made(await asKey('POST', '/api/v1/projects', { name: 'Fuzz two' }), 'project')
await made(await asKey('PATCH', `/api/v1/projects/${project.id}`, { description: 'changed' }), 'project change')
const versions: { id: string }[] = await made(await asKey('GET', `/api/v1/projects/${project.id}/versions`), 'versions')
const backup = await made(
  await asKey('POST', `/api/v1/projects/${project.id}/backup`, { includeHistory: true, includeAgents: false }),
  'backup',
)
const hook = {
  url: 'https://hooks.example.com/in',
  events: ['project.created'],
  secret: 'fuzz-secret-0123456789abcdef',
}
const webhook = await made(await asKey('POST', '/api/v1/webhooks', hook), 'webhook')
const delivery = await made(await asKey('POST', `/api/v1/webhooks/${webhook.id}/test`), 'delivery')
const platformHook = await made(
  await asAdmin('POST', '/api/v1/platform/webhooks', { ...hook, events: ['user.created'] }),
  'platform webhook',
)
const platformDelivery = await made(
  await asAdmin('POST', `/api/v1/platform/webhooks/${platformHook.id}/test`),
  'platform delivery',
)
const member = await made(
  await asKey('POST', '/api/v1/tenant/team/members', { email: `member-${suffix()}@example.com`, role: 'member' }),
  'member',
)
// A device login the run can approve (state) and redeem (the PKCE verifier of its challenge).
const cliState = 'a'.repeat(64)
const codeVerifier = `fuzz-verifier-${'v'.repeat(40)}`
const cliStart = await made(
  await anonymous('POST', '/cli/auth/start', {
    state: cliState,
    codeChallenge: createHash('sha256').update(codeVerifier).digest('base64url'),
    codeChallengeMethod: 'S256',
    cliVersion: '1.0.0',
    platform: 'linux-x64',
  }),
  'cli login',
)

/**
 * Values that exist, by where they go: ids by the collection they belong to (the path template
 * before their parameter), text by field name, cursors. Things the run creates join them. The
 * owner's user id and the keys in use are left out: deleting them would end the run's credentials.
 */
const pools = new Map<string, string[]>()
function remember(key: string, value: unknown) {
  if (typeof value !== 'string') return
  const pool = pools.get(key) ?? []
  if (pool.length < 50 && !pool.includes(value)) pool.push(value)
  pools.set(key, pool)
}
remember('/api/v1/projects', project.id)
for (const v of versions) remember('/api/v1/projects/{projectId}/versions', v.id)
remember('/api/v1/api-keys', sdk.id)
remember('/api/v1/webhooks', webhook.id)
remember('/api/v1/webhooks/{id}/deliveries', delivery.id)
remember('/api/v1/platform/webhooks', platformHook.id)
remember('/api/v1/platform/webhooks/{id}/deliveries', platformDelivery.id)
remember('/api/v1/tenant/team/members', member.member.id)
remember('loginId', cliStart.loginId)
remember('state', cliState)
remember('codeVerifier', codeVerifier)
remember('token', spare.session)
remember('token', member.invitation.token)
remember('email', email)
remember('password', PASSWORD)
remember('id', backup.backupId)
remember('id', owner.tenantId)
for (const list of [
  '/api/v1/projects',
  '/api/v1/api-keys',
  '/api/v1/tenant/team/members',
  '/api/v1/audit-log',
  `/api/v1/projects/${project.id}/versions`,
]) {
  remember('cursor', (await asKey('GET', `${list}?limit=1`)).body.meta?.nextCursor)
}
const download = new URL(backup.downloadUrl)
const blobPath = download.pathname.startsWith('/blobs/') ? download : null

// ---- the OpenAPI document -----------------------------------------------------------------------

const doc = (await anonymous('GET', '/openapi.json')).body
const deref = derefIn(doc)
const operations = operationsOf(doc)
/** Where the ids of a path parameter come from: the collection before it. */
const collectionOf = (op: Operation, name: string) => op.path.slice(0, op.path.indexOf(`/{${name}}`))
/** The local store's download route, whose wildcard is a signed link (project files' wildcard is a path). */
const isBlobLink = (op: Operation) => op.path.startsWith('/blobs/')

// ---- generators ---------------------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** A value of a pool, picked when the case runs (pools grow as the run creates things). */
interface Pick {
  pick: string
  n: number
  mutate: number
  exact?: true
}
const pickFrom = (pool: string) => fc.record({ pick: fc.constant(pool), n: fc.nat(), mutate: fc.nat({ max: 5 }) })
/** A pick that is never damaged: a well-formed case uses things exactly as they exist. */
const exactly = (p: Pick): Pick => ({ ...p, exact: true })
const isPick = (v: unknown): v is Pick =>
  isObject(v) && typeof v.pick === 'string' && typeof v.n === 'number' && typeof v.mutate === 'number'
function resolve(p: Pick): string {
  const pool = pools.get(p.pick)?.length ? pools.get(p.pick)! : [...pools.values()].flat()
  const v = pool[p.n % pool.length] ?? ''
  // 0-2: as it is; otherwise damaged the ways a copy and paste or a hostile client would
  switch (p.exact ? 0 : p.mutate) {
    case 3:
      return v.slice(0, -1)
    case 4:
      return `${v}A`
    case 5:
      return v.toUpperCase()
    default:
      return v
  }
}
type Text = string | Pick
/** A generated value with its picks resolved (generated values nest a few levels at most). */
function materialize(v: unknown, exact = false): unknown {
  if (isPick(v)) return resolve(exact ? exactly(v) : v)
  if (Array.isArray(v)) return v.map((x) => materialize(x, exact))
  if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, materialize(x, exact)]))
  return v
}

// Lone surrogates have no UTF-8: encodeURIComponent throws on them, so they go as U+FFFD (the
// bytes they would be, %ED%A0%80, are among the hostile path parameters).
const wellFormed = (s: string) =>
  s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
const enc = (s: string) => encodeURIComponent(wellFormed(s))
const char = (min: number, max: number) => fc.integer({ min, max }).map((c) => String.fromCharCode(c))
const hostileString = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({ unit: char(0xd800, 0xdfff), minLength: 1, maxLength: 3 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '',
    ' ',
    '\u202e',
    '\ufeff',
    '../../etc/passwd',
    '<script>',
    "'; drop table users; --",
    '%',
    '{{7*7}}',
    'null',
    '__proto__',
  ),
  fc.integer({ min: 1_000, max: 200_000 }).map((n) => 'x'.repeat(n)),
)
const hugeNumber = fc.constantFrom(1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, -(2 ** 63), 2 ** 64, 5e-324, -0, 0.1)
const anything: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: hostileString },
  { weight: 1, arbitrary: hugeNumber },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}, [null], { '': '' }) },
)
// mostly a URL the policy allows; otherwise one it refuses, or no URL
const url = fc
  .tuple(
    fc.oneof(
      { weight: 3, arbitrary: fc.constant('https://') },
      { weight: 1, arbitrary: fc.constantFrom('http://', 'ftp://', '') },
    ),
    fc.oneof(
      { weight: 3, arbitrary: fc.constant('hooks.example.com') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'internal.example',
          'nx.example',
          '127.0.0.1',
          '[::1]',
          '169.254.169.254',
          '2852039166',
          'user:pw@example.com',
        ),
      },
    ),
    fc.webPath(),
  )
  .map(([scheme, host, p]) => `${scheme}${host}${p}`)

/** Values the schema allows, as far as fast-check can honour patterns and formats; `name` is the field's. */
function valid(schema: Schema, name = '', depth = 0): fc.Arbitrary<unknown> {
  const s = deref(schema)
  if (s.const !== undefined) return fc.constant(s.const)
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]))
  const union = (s.anyOf ?? s.oneOf) as Schema[] | undefined
  if (union) return fc.oneof(...union.map((u) => valid(u, name, depth)))
  if (s.allOf) return valid(s.allOf[0], name, depth)
  if (Array.isArray(s.type)) return fc.oneof(...(s.type as string[]).map((type) => valid({ ...s, type }, name, depth)))
  switch (s.type) {
    case 'string': {
      const min = s.minLength ?? 0
      const max = Math.min(s.maxLength ?? 60, 60)
      const known = pickFrom(name)
      if (s.format === 'uuid') return fc.oneof(known, fc.uuid())
      if (s.format === 'date-time')
        return fc
          .date({ min: new Date('1970-01-01'), max: new Date('2200-01-01'), noInvalidDate: true })
          .map((d) => d.toISOString())
      if (s.format === 'email' || /email/i.test(name)) return fc.oneof(fc.emailAddress(), known)
      if (/url$/i.test(name)) return url
      if (pools.has(name)) return fc.oneof(known, fc.string({ minLength: min, maxLength: max }))
      if (typeof s.pattern === 'string') {
        // A character-class pattern repeated stays in the class: long enough for minLength.
        const re = new RegExp(s.pattern)
        return fc
          .stringMatching(re)
          .map((v) =>
            (v.length && v.length < min ? v.repeat(Math.ceil(min / v.length)) : v).slice(0, Math.max(max, min)),
          )
      }
      return fc.string({ minLength: Math.max(min, 1), maxLength: Math.max(max, min, 1) })
    }
    case 'integer':
      return fc.integer({ min: Math.ceil(s.minimum ?? -1_000_000), max: Math.floor(s.maximum ?? 1_000_000) })
    case 'number':
      return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true })
    case 'boolean':
      return fc.boolean()
    case 'null':
      return fc.constant(null)
    case 'array': {
      const items = depth > 4 ? fc.constant(null) : valid(s.items ?? {}, name, depth + 1)
      return fc.array(items, { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 4, 4) })
    }
    case 'object': {
      if (depth > 4) return fc.constant({})
      const props = Object.entries<Schema>(s.properties ?? {})
      return fc.record(Object.fromEntries(props.map(([k, v]) => [k, valid(v, k, depth + 1)])), {
        requiredKeys: (s.required ?? []) as string[],
      })
    }
    default:
      return anything
  }
}

/** A body the schema allows, then perhaps broken: a field of another type, an unknown field, a required field gone. */
function shaped(schema: Schema): fc.Arbitrary<unknown> {
  return fc
    .tuple(valid(schema), fc.nat({ max: 9 }), fc.string({ maxLength: 12 }), anything)
    .map(([body, how, name, junk]) => {
      if (!isObject(body)) return how < 5 ? body : junk
      const copy: Record<string, unknown> = { ...body }
      const keys = Object.keys(copy)
      if (how === 5 && keys.length) copy[keys[name.length % keys.length]!] = junk
      if (how === 6) copy[name || 'extra'] = junk
      if (how === 7 && keys.length) delete copy[keys[name.length % keys.length]!]
      if (how === 8) return junk
      return copy
    })
}

const REAL_BLOB = '\u0000the real download link'
const nest = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)
const OVERSIZED = `{"name":"${'x'.repeat(1024 * 1024)}"}`

/** A body: a value to send as JSON (perhaps cut short), or text or bytes as they are. */
type Body = { json: unknown; cut?: number } | Text | Buffer
function hostileBody(schema: Schema | null): fc.Arbitrary<Body> {
  const json = schema ? shaped(schema) : anything
  return fc.oneof(
    { weight: 10, arbitrary: json.map((v) => ({ json: v })) },
    { weight: 2, arbitrary: anything.map((v) => ({ json: v })) },
    { weight: 2, arbitrary: fc.tuple(json, fc.nat()).map(([v, cut]) => ({ json: v, cut })) },
    { weight: 1, arbitrary: fc.constantFrom(MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 5_000, 100_000).map(nest) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(MAX_JSON_DEPTH, 5_000).map((d) => `{"name":"x","description":${nest(d)}}`),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '',
        '   ',
        'null',
        '"\\u0000"',
        '{"name":"a\\u0000"}',
        '{"\\u0000":1}',
        '{"name":"\\ud800"}',
        '\ufeff{}',
        '{"name":1e999}',
        `{"limit":${'9'.repeat(5000)}}`,
        '{"name":"a","name":1}',
        '{"__proto__":{"admin":true}}',
        '{"constructor":{"prototype":{"x":1}}}',
        '[',
        '{',
        '{"a":',
        '}',
        'tru',
        '01',
        'NaN',
        '\u0000',
        '{"a":1}{"a":2}',
        '/* */{}',
      ),
    },
    { weight: 1, arbitrary: hostileString },
    // invalid UTF-8 inside a JSON string
    {
      weight: 1,
      arbitrary: fc.constant(Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d])),
    },
    { weight: 1, arbitrary: pickFrom('') },
    { weight: 1, arbitrary: fc.constant(OVERSIZED) },
  )
}

const contentType = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json;charset=utf-16',
      'application/json; charset="latin1"',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=----x',
      'application/octet-stream',
      'application/vnd.api+json',
      ';;;',
      'application/json; boundary="',
      'application/*',
      '*/*',
      'json',
      undefined,
    ),
  },
)

/** A path parameter: an id that exists, a well-formed one that does not, or something hostile. */
const hostileParam = (collection: string): fc.Arbitrary<Text> =>
  fc.oneof(
    { weight: 6, arbitrary: pickFrom(collection) },
    { weight: 4, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: fc.string({ maxLength: 40 }).map(enc) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }).map(enc) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '%',
        '%zz',
        '%00',
        '%C0%AF',
        '%E2%82',
        '%ED%A0%80',
        '%2F',
        '%2e%2e',
        '..',
        '.',
        '%u0041',
        '\\',
        '-1',
        '0',
        'null',
        '%20',
        'a;b=c',
        ':id',
        '*',
        '%25',
        '%2500',
        '0190b7a8-7c1e-7000-8000-00000000000g',
        '{00000000-0000-0000-0000-000000000000}',
        'urn:uuid:00000000-0000-0000-0000-000000000000',
        '00000000000000000000000000000000',
        '%F0%9F%92%A9',
      ),
    },
    // Latin-1 bytes travel raw (Node sends them as single bytes): not UTF-8, not percent-encoded.
    { weight: 1, arbitrary: fc.string({ unit: char(0x21, 0xff), maxLength: 20 }).map((s) => s.replace(/[/?#]/g, '')) },
    { weight: 1, arbitrary: fc.constantFrom(101, 1_000, 8_000, 20_000).map((n) => 'a'.repeat(n)) },
    { weight: 1, arbitrary: fc.constant('') },
  )

const queryText = (v: unknown): Text =>
  isPick(v) || typeof v === 'string' ? v : isObject(v) || Array.isArray(v) ? JSON.stringify(materialize(v)) : String(v)
const queryValue = (q: { name: string; schema: Schema }): fc.Arbitrary<Text> =>
  fc.oneof(
    { weight: 4, arbitrary: valid(q.schema, q.name).map(queryText) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '',
        '0',
        '-1',
        '201',
        '1.5',
        '1e309',
        '9'.repeat(400),
        'NaN',
        'true',
        '[]',
        '%',
        '%zz',
        '%00',
        'a%00b',
        '\u00e9',
      ),
    },
    { weight: 2, arbitrary: pickFrom('cursor') },
    { weight: 1, arbitrary: hostileString.map((s) => s.slice(0, 5000)) },
  )
const queryName = fc.oneof(
  fc.constantFrom('limit', 'cursor', '__proto__', 'constructor', 'a[b]', 'a[]', 'tenant_id', 'x-tenant-id', ''),
  fc.string({ maxLength: 10 }),
)

const AUTH = [
  'none',
  'garbage',
  'bearer-garbage',
  'fake-key',
  'key',
  'jwt',
  'admin',
  'sdk',
  'jwt-tampered',
  'basic',
  'lowercase',
  'no-space',
] as const
type Auth = (typeof AUTH)[number]
const headerValue = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: char(0x20, 0x7e), maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: char(0x80, 0xff), maxLength: 10 }) },
  // past Node's 16 KiB limit on the whole head
  { weight: 1, arbitrary: fc.constantFrom(4_000, 20_000).map((n) => 'v'.repeat(n)) },
  { weight: 1, arbitrary: pickFrom('') },
)
const headerName = fc.oneof(
  fc.constantFrom(
    'x-request-id',
    'x-tenant-id',
    'tenant-id',
    'x-atrium-tenant',
    'accept',
    'accept-encoding',
    'accept-language',
    'cookie',
    'origin',
    'referer',
    'x-forwarded-for',
    'x-forwarded-proto',
    'x-forwarded-host',
    'x-real-ip',
    'user-agent',
    'if-none-match',
    'if-modified-since',
    'range',
    'content-encoding',
    'x-http-method-override',
    'sec-fetch-site',
    'forwarded',
  ),
  fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
)

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'SEARCH']
interface Case {
  op: number
  method: string | null
  params: [string, Text][]
  tail: string
  query: [string, Text][]
  rawQuery: string | null
  rawlyEncoded: boolean
  /** Picks are used exactly as they exist (well-formed cases). */
  exact: boolean
  body: Body | null
  type: string | undefined
  auth: Auth
  headers: [string, Text][]
  cookie: string | null
}

/** What a careful client would send: the run gets past validation into the handlers. */
function wellFormedCase(op: number): fc.Arbitrary<Case> {
  const o = operations[op]!
  const admins = o.path.startsWith('/api/v1/platform/')
  return fc.record({
    op: fc.constant(op),
    method: fc.constant(null),
    params: fc.tuple(
      ...o.pathParams.map((name) =>
        fc.tuple(
          fc.constant(name),
          name !== '*'
            ? pickFrom(collectionOf(o, name))
            : isBlobLink(o)
              ? fc.constant<Text>(REAL_BLOB)
              : fc.constantFrom<Text>('a.txt', 'notes/b.md', 'dir/sub/ünï.txt'),
        ),
      ),
    ),
    tail: fc.constant(''),
    query: fc
      .tuple(
        ...o.query.map((q) =>
          fc.option(
            valid(q.schema, q.name).map((v) => [q.name, queryText(v)] as [string, Text]),
            { freq: 2 },
          ),
        ),
      )
      .map((pairs) => pairs.filter((p): p is [string, Text] => p !== null)),
    rawQuery: fc.constant(null),
    rawlyEncoded: fc.constant(false),
    exact: fc.constant(true),
    body: o.body ? valid(o.body).map((json) => ({ json })) : fc.constant(null),
    type: fc.constant('application/json'),
    auth: admins ? fc.constant<Auth>('admin') : fc.constantFrom<Auth>('key', 'jwt'),
    headers: fc.constant([]),
    cookie: fc.constant(null),
  })
}

function hostileCase(op: number): fc.Arbitrary<Case> {
  const o = operations[op]!
  return fc.record({
    op: fc.constant(op),
    // mostly the operation's own method; sometimes another (405) or one Node or Fastify may not know
    method: fc.oneof(
      { weight: 8, arbitrary: fc.constant(null) },
      { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
    ),
    params: fc.tuple(
      ...o.pathParams.map((name) =>
        fc.tuple(
          fc.constant(name),
          name === '*' && blobPath && isBlobLink(o)
            ? fc.oneof(fc.constant<Text>(REAL_BLOB), hostileParam(''))
            : hostileParam(collectionOf(o, name)),
        ),
      ),
    ),
    tail: fc.oneof(
      { weight: 12, arbitrary: fc.constant('') },
      { weight: 1, arbitrary: fc.constantFrom('/', '//', '/x', '/..', '%2F', '.json', '?', '#frag', ';x') },
    ),
    query: fc
      .tuple(
        fc.tuple(
          ...o.query.map((q) =>
            fc.option(
              queryValue(q).map((v) => [q.name, v] as [string, Text]),
              { freq: 2 },
            ),
          ),
        ),
        fc.array(fc.tuple(queryName, queryValue({ name: '', schema: {} })), { maxLength: 2 }),
        fc.boolean(),
      )
      .map(([declared, extra, repeat]) => {
        const pairs = [...declared.filter((p): p is [string, Text] => p !== null), ...extra]
        return repeat && pairs.length ? [...pairs, pairs[0]!] : pairs
      }),
    rawQuery: fc.oneof(
      { weight: 8, arbitrary: fc.constant(null) },
      {
        weight: 1,
        arbitrary: fc.constantFrom('%', '&&&', '=x', '?', '#', '%zz=1', 'limit', 'limit=1&limit=2', 'a=%E2%82'),
      },
    ),
    rawlyEncoded: fc.boolean(),
    exact: fc.constant(false),
    body:
      o.body || o.method !== 'GET'
        ? fc.oneof(
            { weight: o.body ? 1 : 4, arbitrary: fc.constant(null) },
            { weight: o.body ? 6 : 1, arbitrary: hostileBody(o.body) },
          )
        : fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: hostileBody(null) }),
    type: contentType,
    auth: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom<Auth>('key', 'jwt') },
      { weight: 2, arbitrary: fc.constantFrom<Auth>(...AUTH) },
    ),
    headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 3 }),
    cookie: fc.oneof(
      { weight: 6, arbitrary: fc.constant(null) },
      { weight: 1, arbitrary: fc.constant(`atrium_session=${spare.session}`) },
      { weight: 1, arbitrary: fc.string({ unit: char(0x21, 0x7e), maxLength: 60 }).map((v) => `atrium_session=${v}`) },
    ),
  })
}

const cases: fc.Arbitrary<Case> = fc
  .nat({ max: operations.length - 1 })
  .chain((op) => fc.oneof({ weight: 1, arbitrary: wellFormedCase(op) }, { weight: 2, arbitrary: hostileCase(op) }))

// ---- sending and judging ------------------------------------------------------------------------

interface Sent {
  method: string
  path: string
  headers: Record<string, string>
  body: Buffer | string | null
  params: Map<string, string>
}
interface Answer {
  status: number
  headers: IncomingHttpHeaders
  raw: Buffer
}

// Headers that frame the message itself: Node's client sets them.
const FRAMING = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'expect',
  'upgrade',
  'te',
  'trailer',
  'keep-alive',
])
const rawly = (s: string) => wellFormed(s).replace(/[^\x21-\xff]|[#&=]/gu, enc)
const tamper = (token: string) => token.slice(0, -1) + (token.at(-1) === 'A' ? 'B' : 'A')

function build(c: Case): Sent {
  const op = operations[c.op]!
  const text = (v: Text) => (typeof v === 'string' ? v : resolve(c.exact ? exactly(v) : v))
  // a value that exists goes percent-encoded (a pool holds text too); generated ones as they are
  const params = new Map(c.params.map(([name, v]) => [name, typeof v === 'string' ? v : enc(text(v))]))
  const real = params.get('*') === REAL_BLOB && blobPath
  let path = real ? blobPath.pathname : op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => params.get(name) ?? '')
  path += c.tail
  const pairs = c.query.map(([k, v]) => [k, text(v)])
  // the real download link: with its own signed query unless some other was generated
  const query =
    real && !pairs.length
      ? blobPath.search.slice(1)
      : (c.rawQuery ??
        pairs.map(([k, v]) => (c.rawlyEncoded ? `${rawly(k!)}=${rawly(v!)}` : `${enc(k!)}=${enc(v!)}`)).join('&'))
  if (query) path += `${path.includes('?') ? '&' : '?'}${query}`

  const method = c.method ?? op.method
  const headers: Record<string, string> = {}
  // Node's client refuses control characters and anything past Latin-1 in a header value
  for (const [k, v] of c.headers) if (!FRAMING.has(k)) headers[k] = text(v).replace(/[^\t\x20-\x7e\x80-\xff]/g, '?')
  if (c.cookie) headers.cookie = c.cookie
  const jwt = op.path === '/api/v1/auth/logout' ? spare.access : main.access
  const authorization: Record<Auth, string | null> = {
    none: null,
    garbage: 'garbage',
    'bearer-garbage': 'Bearer x.y.z',
    'fake-key': `Bearer svc_ci_${'0'.repeat(40)}`,
    key: `Bearer ${owner.apiKey}`,
    jwt: `Bearer ${jwt}`,
    admin: `Bearer ${admin.key}`,
    sdk: `Bearer ${sdk.key}`,
    'jwt-tampered': `Bearer ${tamper(jwt)}`,
    basic: 'Basic dXNlcjpwYXNz',
    lowercase: `bearer ${owner.apiKey}`,
    'no-space': `Bearer${owner.apiKey}`,
  }
  const a = authorization[c.auth]
  if (a) headers.authorization = a
  let body: Buffer | string | null = null
  if (c.body !== null) {
    const b = c.body
    if (Buffer.isBuffer(b)) body = b
    else if (typeof b === 'string' || isPick(b)) body = text(b)
    else {
      const json = JSON.stringify(materialize(b.json, c.exact)) ?? ''
      body = b.cut === undefined ? json : json.slice(0, b.cut % (json.length + 1))
    }
    if (c.type) headers['content-type'] = c.type
    // No route reads a GET body: Node answers, then closes the connection while a large body is
    // still arriving, and the reset loses the answer on the client's side (TCP, not this API).
    if (['GET', 'HEAD', 'TRACE'].includes(method) && body.length > 16 * 1024) body = body.slice(0, 16 * 1024)
  }
  return { method, path, headers, body, params }
}

function send(req: Sent): Promise<Answer> {
  // Node's client frames a GET, DELETE or OPTIONS body by closing the connection, not by length:
  // the server would read it as a second request. Every body is sent with its length.
  const headers =
    req.body === null ? req.headers : { ...req.headers, 'content-length': String(Buffer.byteLength(req.body)) }
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      { host: '127.0.0.1', port, method: req.method, path: req.path, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = []
        // An event stream (a chat session's) stays open: its first bytes are the answer.
        if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          res.once('data', (c: Buffer) => {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: c })
            res.destroy()
          })
          return
        }
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) }))
        res.on('error', reject)
      },
    )
    r.setTimeout(20_000, () => r.destroy(new Error('no answer within 20 s')))
    // an answer Node's client cannot parse: what it got is the evidence
    r.on('error', (err: Error & { rawPacket?: Buffer }) =>
      reject(err.rawPacket ? new Error(`${err.message}: ${err.rawPacket.toString('latin1').slice(-700)}`) : err),
    )
    r.end(req.body ?? undefined)
  })
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const sameKeys = (o: Record<string, unknown>, keys: string[]) =>
  JSON.stringify(Object.keys(o).sort()) === JSON.stringify(keys)

/** What is wrong with an answer, or null. */
function problem(req: Sent, res: Answer): string | null {
  if (res.status >= 500) return `status ${res.status}`
  if (res.status < 400) return null
  const type = String(res.headers['content-type'] ?? '')
  if (!type.startsWith('application/json')) return `an error answered as ${type || 'no content type'}`
  if (req.method === 'HEAD') return null // the headers of the GET answer, without its body
  let body: unknown
  try {
    body = JSON.parse(res.raw.toString('utf8'))
  } catch {
    return 'an error answer that is not JSON'
  }
  if (!isObject(body) || !sameKeys(body, ['error', 'meta'])) return 'not {error, meta}'
  const { error, meta } = body
  if (!isObject(error) || !sameKeys(error, ['code', 'details', 'message']))
    return 'error is not {code, message, details}'
  const code = error.code as ErrorCode
  if (!Object.hasOwn(ERRORS, code)) return `code ${String(code)} is not in the catalog`
  if (ERRORS[code].status !== res.status) return `code ${code} answered with status ${res.status}`
  if (typeof error.message !== 'string' || !error.message) return 'no message'
  if (!isObject(error.details)) return 'details is not an object'
  if (
    !isObject(meta) ||
    typeof meta.request_id !== 'string' ||
    !meta.request_id ||
    typeof meta.timestamp !== 'string' ||
    !ISO.test(meta.timestamp)
  )
    return 'meta is not {request_id, timestamp}'
  if (res.headers['x-request-id'] !== meta.request_id) return 'X-Request-Id differs from meta.request_id'
  return null
}

/** What a success created joins the pools, so later cases act on it; what it deleted leaves them. */
function learn(op: Operation, req: Sent, res: Answer) {
  if (res.status < 200 || res.status >= 300 || req.method !== op.method) return
  if (op.method === 'DELETE') {
    const name = op.pathParams.at(-1)
    const id = name ? req.params.get(name)?.toLowerCase() : undefined
    const pool = name ? pools.get(collectionOf(op, name)) : undefined
    if (pool && id && pool.length > 1 && pool.includes(id)) pool.splice(pool.indexOf(id), 1)
    return
  }
  if (op.method !== 'POST') return
  try {
    const data = JSON.parse(res.raw.toString('utf8'))?.data
    remember(
      op.path.replace(/\/test$/, '/deliveries').replace(/\/deliveries\/\{deliveryId\}\/retry$/, '/deliveries'),
      data?.id,
    )
    remember(op.path, data?.member?.id)
    remember('token', data?.invitation?.token)
    remember('loginId', data?.loginId)
  } catch {
    // not JSON: nothing to learn
  }
}

// ---- the run -----------------------------------------------------------------------------------

t.test('no request to any operation answers 5xx or an error outside the envelope', async (t) => {
  t.ok(operations.length >= 40, `the document lists ${operations.length} operations`)
  const statuses = new Map<number, number>()
  const reached = new Map<string, Set<number>>()
  let last = null as Sent | null
  const property = fc.asyncProperty(cases, async (c) => {
    const op = operations[c.op]!
    const req = build(c)
    last = req
    const res = await send(req)
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    reached.set(`${op.method} ${op.path}`, (reached.get(`${op.method} ${op.path}`) ?? new Set()).add(res.status))
    learn(op, req, res)
    const wrong = problem(req, res)
    if (wrong)
      throw new Error(
        `${wrong}: ${req.method} ${req.path.slice(0, 300)} -> ${res.status} ${res.raw.toString('utf8').slice(0, 300)}`,
      )
  })
  const started = Date.now()
  const out = await fc.check(property, {
    seed: SEED,
    numRuns: RUNS,
    path: process.env.FUZZ_PATH,
    endOnFailure: !process.env.FUZZ_SHRINK,
  })
  t.comment(`fuzz: ${out.numRuns} cases, seed ${SEED}, ${Math.round((Date.now() - started) / 1000)} s`)
  t.comment(
    `statuses: ${[...statuses]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}x${n}`)
      .join(' ')}`,
  )
  if (process.env.FUZZ_VERBOSE) for (const [op, seen] of reached) t.comment(`${op}: ${[...seen].sort().join(' ')}`)
  if (out.failed) {
    // The counterexample can hold 100,000 characters: the error names the request; seed and path replay it.
    t.fail(String((out.errorInstance as Error | undefined)?.message ?? out.errorInstance).slice(0, 3000))
    t.comment(`replay: FUZZ_SEED=${out.seed} FUZZ_PATH=${out.counterexamplePath ?? ''}`)
    if (last)
      t.comment(
        `the request: ${JSON.stringify({ ...last, params: undefined, body: String(last.body ?? '').slice(0, 500) }, (_k, v: unknown) => (typeof v === 'string' ? v.slice(0, 300) : v))}`,
      )
    return
  }
  if (process.env.FUZZ_PATH) return // a replay starts mid-run: the totals below are not the seeded run's
  t.equal(out.numRuns, RUNS, 'every case ran')
  const missed = operations.filter((o) => !reached.has(`${o.method} ${o.path}`)).map((o) => `${o.method} ${o.path}`)
  t.same(missed, [], 'every operation was tried')
  // The run got past the front door: successes as well as refusals of several kinds.
  const succeeded = operations.filter((o) => [...(reached.get(`${o.method} ${o.path}`) ?? [])].some((s) => s < 300))
  t.ok(
    succeeded.length >= operations.length / 2,
    `${succeeded.length} of ${operations.length} operations succeeded at least once`,
  )
  t.ok([...statuses.keys()].filter((s) => s >= 400).length >= 5, 'several kinds of refusal')
})

t.test('the server is healthy after the run and the credentials still work', async (t) => {
  t.equal((await anonymous('GET', '/healthz')).status, 200)
  t.equal((await anonymous('GET', '/readyz')).status, 200)
  t.equal((await asKey('GET', '/api/v1/projects')).status, 200)
  t.equal((await caller(h.app, main.access)('GET', '/api/v1/auth/me')).status, 200)
  t.equal(
    (
      await send({
        method: 'GET',
        path: '/api/v1/tenant',
        headers: { authorization: `Bearer ${owner.apiKey}` },
        body: null,
        params: new Map(),
      })
    ).status,
    200,
    'over the socket too',
  )
})
