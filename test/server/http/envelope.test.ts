import t from 'tap'
import { AppError } from '../../../server/http/errors.js'
import { genReqId } from '../../../server/http/envelope.js'
import { testApp } from '../../helpers/app.js'

const h = await testApp(t, { MAX_REQUEST_BODY_BYTES: '2048' }, {
  routes: (app) => {
    app.get('/api/v1/test-boom', { config: { auth: false } }, async () => {
      throw new Error('connection string postgres://admin:hunter2@db leaked?')
    })
    app.get('/api/v1/test-app-error', { config: { auth: false } }, async () => {
      throw new AppError('FORBIDDEN', 'nope', { why: 'test' })
    })
  },
})
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
  t.match(empty.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'body.name', message: /required/ }] } })
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
