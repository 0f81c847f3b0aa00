import { connect, type AddressInfo } from 'node:net'
import t from 'tap'
import { AppError } from '../../../server/domain/errors.js'
import { genReqId } from '../../../server/http/envelope.js'
import { appOn, testApp } from '../../helpers/app.js'
import { testPlatform } from '../../helpers/platform.js'

const h = await testApp(
  t,
  { MAX_REQUEST_BODY_BYTES: '2048' },
  {
    routes: (app) => {
      app.get('/api/v1/test-boom', { config: { auth: false } }, async () => {
        throw new Error('connection string postgres://admin:hunter2@db leaked?')
      })
      app.get('/api/v1/test-app-error', { config: { auth: false } }, async () => {
        throw new AppError('FORBIDDEN', 'nope', { why: 'test' })
      })
    },
  },
)
const { call } = await h.tenant()
const TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

t.test('a success carries data and meta with request id and timestamp', async (t) => {
  const r = await call('GET', '/api/v1/projects')
  t.equal(r.status, 200)
  t.same(Object.keys(r.body).sort(), ['data', 'meta'])
  t.match(r.body.meta, { request_id: String, timestamp: TS })
  t.equal(r.headers['x-request-id'], r.body.meta.request_id)
})

t.test('an incoming X-Request-Id is honoured and echoed; a malformed one is replaced', async (t) => {
  const r = await call('GET', '/api/v1/projects', undefined, { 'x-request-id': 'trace-abc.123:7' })
  t.equal(r.body.meta.request_id, 'trace-abc.123:7')
  t.equal(r.headers['x-request-id'], 'trace-abc.123:7')
  const bad = await call('GET', '/api/v1/projects', undefined, { 'x-request-id': 'has spaces and <html>' })
  t.match(bad.body.meta.request_id, /^[0-9a-f-]{36}$/)
  t.match(genReqId({ headers: { 'x-request-id': 'x'.repeat(129) } }), /^[0-9a-f-]{36}$/, 'too long')
  const err = await h.anonymous('GET', '/api/v1/projects', undefined, { 'x-request-id': 'on-error' })
  t.equal(err.body.meta.request_id, 'on-error', 'errors echo it too')
})

t.test('an error carries code, message, details and meta, and nothing else', async (t) => {
  const r = await h.anonymous('GET', '/api/v1/test-app-error')
  t.equal(r.status, 403)
  t.same(Object.keys(r.body).sort(), ['error', 'meta'])
  t.same(r.body.error, { code: 'FORBIDDEN', message: 'nope', details: { why: 'test' } })
  t.match(r.body.meta, { request_id: String, timestamp: TS })
})

t.test('an unexpected failure is INTERNAL_ERROR with its details hidden', async (t) => {
  const r = await h.anonymous('GET', '/api/v1/test-boom')
  t.equal(r.status, 500)
  t.same(r.body.error, { code: 'INTERNAL_ERROR', message: 'Internal server error', details: {} })
  t.notMatch(r.raw.toString(), /hunter2|postgres/)
})

t.test('an unknown route is RESOURCE_NOT_FOUND', async (t) => {
  for (const url of ['/api/v1/nothing-here', '/nowhere', '/api/v1/projects/a/b/c']) {
    const r = await call('GET', url)
    t.equal(r.status, 404, url)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND', url)
    t.match(r.body.meta, { request_id: String })
  }
})

t.test('a known route with another method is METHOD_NOT_ALLOWED with Allow', async (t) => {
  const r = await call('PUT', '/api/v1/projects')
  t.equal(r.status, 405)
  t.equal(r.body.error.code, 'METHOD_NOT_ALLOWED')
  t.equal(r.headers.allow, 'GET, HEAD, POST')
  const one = await call('POST', '/api/v1/projects/01900000-0000-7000-8000-000000000000')
  t.equal(one.status, 405)
  t.equal(one.headers.allow, 'GET, HEAD, PATCH, DELETE')
})

t.test('an oversized body is PAYLOAD_TOO_LARGE', async (t) => {
  const r = await call('POST', '/api/v1/projects', { name: 'x', description: 'y'.repeat(4000) })
  t.equal(r.status, 413)
  t.equal(r.body.error.code, 'PAYLOAD_TOO_LARGE')
})

t.test('malformed JSON, an empty JSON body and a foreign media type are refused', async (t) => {
  const malformed = await call('POST', '/api/v1/projects', '{"name":', { 'content-type': 'application/json' })
  t.equal(malformed.status, 400)
  t.equal(malformed.body.error.code, 'VALIDATION_ERROR')
  const empty = await call('POST', '/api/v1/projects', '', { 'content-type': 'application/json' })
  t.equal(empty.status, 400, 'an empty body where one is required')
  t.match(empty.body.error, {
    code: 'VALIDATION_ERROR',
    details: { errors: [{ field: 'body.name', message: /required/ }] },
  })
  const text = await call('POST', '/api/v1/projects', 'name=x', { 'content-type': 'text/xml' })
  t.equal(text.status, 415)
  t.equal(text.body.error.code, 'UNSUPPORTED_MEDIA_TYPE')
})

t.test('validation details name each wrong field', async (t) => {
  const r = await call('POST', '/api/v1/projects', { name: 1, language: 2, extra: true })
  t.equal(r.status, 400)
  const fields = r.body.error.details.errors.map((e: { field: string }) => e.field).sort()
  t.same(fields, ['body.extra', 'body.language', 'body.name'])
  t.match(r.body.error.message, /^body\./)
})

/** One exchange over a socket, bytes as given; what came back, split at the first answer's end. */
async function raw(
  request: string,
): Promise<{ status: number; headers: Record<string, string>; body: string; after: string }> {
  if (!h.app.server.listening) await h.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = h.app.server.address() as AddressInfo
  const got = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request))
    let data = ''
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1')
    })
    socket.on('close', () => resolve(data))
    socket.on('error', reject)
  })
  const end = got.indexOf('\r\n\r\n')
  const [statusLine, ...lines] = got.slice(0, end).split('\r\n')
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  )
  const length = request.startsWith('HEAD ') ? 0 : Number(headers['content-length'])
  return {
    status: Number(statusLine!.split(' ')[1]),
    headers,
    body: got.slice(end + 4, end + 4 + length),
    after: got.slice(end + 4 + length),
  }
}

t.test('a request refused before any hook runs is still answered in the envelope', async (t) => {
  // found by fuzz.test.ts: Node's parser and Fastify's router answered these in Fastify's own format
  const big = 'v'.repeat(20_000)
  const cases: [string, string, string][] = [
    ['headers over 16 KiB', `GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nX-Big: ${big}\r\n\r\n`, 'HPE_HEADER_OVERFLOW'],
    ['a method Node does not know', 'BREW /api/v1/projects HTTP/1.1\r\nHost: x\r\n\r\n', 'HPE_INVALID_METHOD'],
    [
      'a path that does not decode',
      'GET /api/v1/projects/%C0%AF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'FST_ERR_BAD_URL',
    ],
    [
      'a path parameter over its length',
      `GET /api/v1/projects/${'a'.repeat(101)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      'FST_ERR_MAX_PARAM_LENGTH',
    ],
  ]
  for (const [what, request, reason] of cases) {
    const r = await raw(request)
    t.equal(r.status, 400, what)
    t.match(r.headers['content-type'], /^application\/json/, what)
    const body = JSON.parse(r.body || 'null')
    t.same(Object.keys(body ?? {}).sort(), ['error', 'meta'], what)
    t.match(body?.error, { code: 'VALIDATION_ERROR', message: String, details: { reason } }, what)
    t.match(body?.meta, { request_id: String, timestamp: TS }, what)
    t.equal(r.headers['x-request-id'], body?.meta?.request_id, what)
    t.equal(r.after, '', `${what}: one answer`)
  }
})

t.test('a refused HEAD gets no body, and bytes after a request that closes get no second answer', async (t) => {
  const head = await raw(`HEAD /api/v1/projects HTTP/1.1\r\nHost: x\r\nX-Big: ${'v'.repeat(20_000)}\r\n\r\n`)
  t.equal(head.status, 400)
  t.equal(head.after, '', 'nothing after the head')
  // The second "request" is garbage after one that asked to close: only the first is answered.
  const closing = await raw(
    'GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nBREW / HTTP/1.1\r\n\r\n',
  )
  t.equal(closing.status, 401)
  t.equal(JSON.parse(closing.body || 'null')?.error?.code, 'UNAUTHORIZED')
  t.equal(closing.after, '', 'one answer')
})

t.test(
  'on a database not yet migrated, sign-in and the CLI login answer 503 naming the schema, never 500',
  async (t) => {
    // found by the second hardening round: the missing tables failed these two unauthenticated routes with 500
    const platform = await testPlatform(t, { MIGRATE_ON_START: 'false' }, { emptyDatabase: true })
    const fresh = await appOn(t, platform)
    const login = await fresh.anonymous('POST', '/api/v1/auth/login', {
      email: 'owner@example.com',
      password: 'a long passphrase',
    })
    const start = await fresh.anonymous('POST', '/cli/auth/start', {
      state: 'a'.repeat(64),
      codeChallenge: 'b'.repeat(43),
      codeChallengeMethod: 'S256',
      cliVersion: '1.0.0',
      platform: 'linux-x64',
    })
    for (const [name, r] of [
      ['login', login],
      ['cli login', start],
    ] as const) {
      t.equal(r.status, 503, name)
      t.match(
        r.body.error,
        { code: 'SERVICE_UNAVAILABLE', details: { dependency: 'database', reason: 'schema' } },
        name,
      )
      t.ok(r.headers['retry-after'], `${name}: Retry-After`)
      t.notMatch(r.raw.toString(), /relation|42P01/, `${name}: the database's own words stay in the log`)
    }
  },
)
