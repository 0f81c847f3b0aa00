import t from 'tap'
import { ok } from '../../../server/http/envelope.js'
import { findUnstorableText, jsonTooDeep, MAX_JSON_DEPTH } from '../../../server/domain/text.js'
import { testApp } from '../../helpers/app.js'

const h = await testApp(
  t,
  {},
  {
    // webhook URLs are judged against DNS; this one answers without the network
    resolver: async () => [{ address: '93.184.215.14', family: 4 }],
    routes: (app) => {
      // No body schema: whatever parses reaches the handler, so the parser alone decides.
      app.post('/api/v1/test-echo', { config: { auth: false } }, async (request) => ok(request, request.body))
    },
  },
)

const arrays = (depth: number, leaf = '1') => '['.repeat(depth) + leaf + ']'.repeat(depth)
const objects = (depth: number, leaf = '1') => '{"a":'.repeat(depth) + leaf + '}'.repeat(depth)
const TOO_DEEP = {
  errors: [{ field: 'body', message: `must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep` }],
}
const NUL = 'must not contain NUL (\\u0000) characters'
const UNPAIRED = 'must not contain unpaired surrogates (\\ud800-\\udfff): it is not Unicode text'
const where = (body: unknown) => findUnstorableText(body)?.field ?? null

t.test('finds a NUL character anywhere in a body and names its place', async (t) => {
  t.same(findUnstorableText({ a: 'ok', b: ['x', { c: 'bad\u0000' }] }), { field: 'body.b.1.c', message: NUL })
  t.equal(where({ ['k\u0000']: 1 }), 'body.k\u0000')
  t.equal(where('\u0000'), 'body')
  t.equal(where(['ok', 'first\u0000', ['second\u0000']]), 'body.1', 'the first one in order')
})

t.test('finds a surrogate without its pair, in a value or a key', async (t) => {
  t.same(findUnstorableText({ name: '\ud800' }), { field: 'body.name', message: UNPAIRED })
  t.equal(where({ a: ['x', 'a\udc00b'] }), 'body.a.1', 'a low one alone')
  t.equal(where({ a: 'end \ud83d' }), 'body.a', 'a high one at the end')
  t.equal(where({ ['\udfff']: 1 }), 'body.\udfff')
  t.equal(where({ a: 'ok \ud83d\ude00 pair' }), null, 'a pair is an emoji, not a problem')
})

t.test('clean bodies pass', async (t) => {
  for (const body of [
    undefined,
    null,
    1,
    true,
    'text \\u0000 written out',
    '\\ud800 written out',
    { a: [1, 'b', { c: null }] },
  ])
    t.equal(findUnstorableText(body), null)
})

t.test('finds a NUL at the bottom of a value nested 100,000 levels without running out of stack', async (t) => {
  let list: unknown = 'deep\u0000'
  let record: unknown = 'deep\u0000'
  for (let i = 0; i < 100_000; i++) {
    list = [list]
    record = { k: record }
  }
  t.equal(where(list), `body${'.0'.repeat(100_000)}`)
  t.equal(where(record), `body${'.k'.repeat(100_000)}`)
})

t.test('JSON text is too deep past the limit, counting arrays and objects but not brackets in strings', async (t) => {
  t.equal(jsonTooDeep(arrays(MAX_JSON_DEPTH)), false)
  t.equal(jsonTooDeep(arrays(MAX_JSON_DEPTH + 1)), true)
  t.equal(jsonTooDeep(objects(MAX_JSON_DEPTH)), false)
  t.equal(jsonTooDeep(objects(MAX_JSON_DEPTH + 1)), true)
  t.equal(jsonTooDeep('[{"a":[{"b":{}}]}]', 5), false)
  t.equal(jsonTooDeep('[{"a":[{"b":{}}]}]', 4), true, 'objects and arrays count alike')
  t.equal(jsonTooDeep(`["${'[{'.repeat(1000)}"]`), false, 'brackets inside a string')
  t.equal(jsonTooDeep(`["\\"${'['.repeat(1000)}"]`), false, 'an escaped quote does not end the string')
  t.equal(jsonTooDeep(`["\\\\",${arrays(MAX_JSON_DEPTH - 1)}]`), false, 'an escaped backslash does end it')
  t.equal(jsonTooDeep(`["\\\\",${arrays(MAX_JSON_DEPTH)}]`), true)
  t.equal(jsonTooDeep(`[${arrays(MAX_JSON_DEPTH - 1)},${arrays(MAX_JSON_DEPTH - 1)}]`), false, 'siblings do not add up')
})

t.test(
  'a body nested 5,000 or 100,000 levels deep is VALIDATION_ERROR on the unauthenticated routes, never 500',
  async (t) => {
    for (const url of ['/api/v1/auth/login', '/cli/auth/start']) {
      for (const depth of [5_000, 100_000]) {
        for (const [shape, deep] of [
          ['arrays', arrays(depth)],
          ['objects', objects(depth)],
          ['a field', `{"email":${arrays(depth)},"password":"x"}`],
        ]) {
          const r = await h.anonymous('POST', url, deep, { 'content-type': 'application/json' })
          const what = `${url} ${depth} ${shape}`
          t.equal(r.status, 400, what)
          t.same(Object.keys(r.body).sort(), ['error', 'meta'], what)
          t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
          t.same(r.body.error.details, TOO_DEEP, what)
          t.match(r.body.meta, { request_id: String, timestamp: String }, what)
        }
      }
    }
  },
)

t.test('a body nested exactly to the limit is parsed and handled', async (t) => {
  for (const text of [arrays(MAX_JSON_DEPTH), objects(MAX_JSON_DEPTH)]) {
    const r = await h.anonymous('POST', '/api/v1/test-echo', text, { 'content-type': 'application/json' })
    t.equal(r.status, 200)
    t.same(r.body.data, JSON.parse(text))
    const over = await h.anonymous('POST', '/api/v1/test-echo', text.replace('1', '[1]'), {
      'content-type': 'application/json',
    })
    t.equal(over.status, 400)
    t.same(over.body.error.details, TOO_DEEP)
  }
  // On the login routes it gets as far as the schema, which names the field that is not a string.
  const login = await h.anonymous(
    'POST',
    '/api/v1/auth/login',
    `{"email":"a@example.com","password":${arrays(MAX_JSON_DEPTH - 1)}}`,
    { 'content-type': 'application/json' },
  )
  t.equal(login.status, 400)
  t.same(login.body.error.details.errors, [{ field: 'body.password', message: 'must be string' }])
  const rest = `"codeChallenge":"${'a'.repeat(43)}","codeChallengeMethod":"S256","cliVersion":"1.0.0","platform":"linux-x64"`
  const start = await h.anonymous('POST', '/cli/auth/start', `{"state":${objects(MAX_JSON_DEPTH - 1)},${rest}}`, {
    'content-type': 'application/json',
  })
  t.equal(start.status, 400)
  t.same(start.body.error.details.errors, [{ field: 'body.state', message: 'must be string' }])
})

t.test('text the database cannot store is VALIDATION_ERROR naming the field, and nothing is written', async (t) => {
  // found by fuzz.test.ts: a lone surrogate reached the audit log's jsonb and failed there with 500
  const { call } = await h.tenant()
  const before = (await call('GET', '/api/v1/tenant')).body.data.name
  const cases: [string, string, string, string][] = [
    ['PATCH', '/api/v1/tenant', '{"name":"\\ud800"}', 'body.name'],
    ['POST', '/api/v1/projects', '{"name":"a\\udc00b"}', 'body.name'],
    ['POST', '/api/v1/projects', '{"name":"a","description":"nul \\u0000"}', 'body.description'],
  ]
  for (const [method, url, body, field] of cases) {
    const r = await call(method as 'POST', url, body, { 'content-type': 'application/json' })
    t.equal(r.status, 400, body)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', body)
    t.equal(r.body.error.details.errors[0].field, field, body)
  }
  t.equal((await call('GET', '/api/v1/tenant')).body.data.name, before)
  t.same((await call('GET', '/api/v1/projects')).body.data, [])
  const pair = await call('POST', '/api/v1/projects', '{"name":"rocket \\ud83d\\ude80"}', {
    'content-type': 'application/json',
  })
  t.equal(pair.body.data.name, 'rocket \u{1f680}', 'an escaped pair is one character')
})

t.test('an id in a path is handled in lowercase whatever its case', async (t) => {
  // found by fuzz.test.ts: a capitalised webhook id sealed and opened its secret under the wrong
  // context, 500, and with overlapSeconds 0 stored a secret no later request could open
  const { call } = await h.tenant()
  const hook = await call('POST', '/api/v1/webhooks', {
    url: 'https://hooks.example.com/in',
    events: ['project.created'],
    secret: 'a-secret-of-24-characters-or-more',
  })
  const id = hook.body.data.id as string
  const shouted = id.toUpperCase()
  t.not(shouted, id)
  const rotated = await call('POST', `/api/v1/webhooks/${shouted}/rotate-secret`, { overlapSeconds: 0 })
  t.equal(rotated.status, 200)
  t.equal(rotated.body.data.webhook.id, id)
  const again = await call('POST', `/api/v1/webhooks/${id}/rotate-secret`, { overlapSeconds: 60 })
  t.equal(again.status, 200, 'the secret stored through the capitalised id opens under the real one')
  t.equal((await call('POST', `/api/v1/webhooks/${shouted}/rotate-secret`, { overlapSeconds: 60 })).status, 200)
  const project = await call('POST', '/api/v1/projects', { name: 'Case' })
  const got = await call('GET', `/api/v1/projects/${(project.body.data.id as string).toUpperCase()}`)
  t.equal(got.body.data.id, project.body.data.id)
})

t.test('a NUL in a query string is VALIDATION_ERROR naming it, never 500', async (t) => {
  // found by the second hardening round: a NUL in a file list's prefix failed in PostgreSQL with 500
  const { call } = await h.tenant()
  const project = (await call('POST', '/api/v1/projects', { name: 'queries' })).body.data
  const r = await call('GET', `/api/v1/projects/${project.id}/files?prefix=a%00b`)
  t.equal(r.status, 400)
  t.same(r.body.error.details.errors, [
    { field: 'querystring.prefix', message: 'must not contain NUL (\\u0000) characters' },
  ])
  // (an unpaired surrogate cannot be sent in a URL: its UTF-8 bytes decode to U+FFFD, which is text)
  t.equal(
    (await call('GET', `/api/v1/projects/${project.id}/files?prefix=src%2F`)).status,
    200,
    'a clean prefix is listed',
  )
})
