import t from 'tap'
import { appOn, testApp } from '../../../helpers/app.js'
import { testPlatform } from '../../../helpers/platform.js'
import { loadMigrations, migrate } from '../../../../server/platform/migrate.js'

const h = await testApp(t)

/** From now on a readiness check of `dependency` fails with `message`. */
function failing(dependency: { ping: () => Promise<void> }, message: string) {
  dependency.ping = async () => {
    throw new Error(message)
  }
}

t.test('healthz answers in the envelope', async (t) => {
  const r = await h.anonymous('GET', '/healthz')
  t.equal(r.status, 200)
  t.match(r.body, { data: { status: 'ok' }, meta: { request_id: String } })
})

t.test('readyz checks the database, cache and blob storage', async (t) => {
  const r = await h.anonymous('GET', '/readyz')
  t.equal(r.status, 200)
  t.match(r.body.data, {
    status: 'ready',
    checks: {
      db: { status: 'pass', latencyMs: Number },
      schema: { status: 'pass', pending: [] },
      cache: { status: 'pass' },
      blobs: { status: 'pass' },
    },
  })
  t.equal(r.body.data.checks.db.mode, h.platform.db.mode)
})

t.test('readyz reports a failing dependency: degraded by default, 503 when strict', async (t) => {
  const b = await testApp(t)
  failing(b.platform.blobs, 'bucket gone')
  const r = await b.anonymous('GET', '/readyz')
  t.equal(r.status, 200)
  t.match(r.body.data, {
    status: 'degraded',
    checks: { blobs: { status: 'fail', error: 'failed (the server log says why)' } },
  })
  t.notMatch(r.raw.toString(), /bucket gone/, 'the cause stays in the log')
  const strict = await b.anonymous('GET', '/readyz?strict=true')
  t.equal(strict.status, 503)
  t.equal(strict.body.error.code, 'SERVICE_UNAVAILABLE')
  t.match(strict.body.error.details.checks.blobs, { status: 'fail' })
})

t.test('readyz is 503 when the database does not answer', async (t) => {
  const b = await testApp(t)
  failing(b.platform.db, 'connect ECONNREFUSED db.internal:5432 as user atrium')
  const r = await b.anonymous('GET', '/readyz')
  t.equal(r.status, 503)
  t.match(r.body.error, { code: 'SERVICE_UNAVAILABLE', message: /db/ })
  t.notMatch(r.raw.toString(), /db\.internal|atrium/)
})

t.test('readyz is 503 on a database without the schema this server needs, and ready once migrated', async (t) => {
  const platform = await testPlatform(t, { MIGRATE_ON_START: 'false' }, { emptyDatabase: true })
  const b = await appOn(t, platform)
  const versions = loadMigrations().map((m) => m.version)
  const r = await b.anonymous('GET', '/readyz')
  t.equal(r.status, 503)
  t.match(r.body.error, { code: 'SERVICE_UNAVAILABLE', message: /lacks migrations .*run `migrate`/ })
  t.match(r.body.error.details.checks, { schema: { status: 'fail', version: versions.at(-1), pending: versions } })

  await migrate(platform.db.sql)
  const ready = await b.anonymous('GET', '/readyz')
  t.equal(ready.status, 200)
  t.match(ready.body.data.checks.schema, { status: 'pass', pending: [] })
})

t.test('metrics count requests by route template, not by URL', async (t) => {
  const { call } = await h.tenant()
  const p = (await call('POST', '/api/v1/projects', { name: 'm' })).body.data
  await call('GET', `/api/v1/projects/${p.id}`)
  const r = await h.anonymous('GET', '/metrics')
  t.equal(r.status, 200)
  t.match(r.headers['content-type'], /text\/plain/)
  const text = r.raw.toString()
  t.match(text, /http_requests_total\{method="GET",route="\/api\/v1\/projects\/:id",status_code="200"\} 1/)
  t.match(
    text,
    /http_request_duration_seconds_bucket\{le="0.005",method="POST",route="\/api\/v1\/projects",status_code="201"\}/,
  )
  t.notMatch(text, new RegExp(p.id), 'no ids in labels')
  t.match(text, /process_resident_memory_bytes/)
  t.match(text, /^atrium_air_gapped 0$/m, 'a connected site says so')
})

t.test('an air-gapped site says so in its metrics', async (t) => {
  const b = await testApp(t, { AIR_GAPPED: 'true' })
  const text = (await b.anonymous('GET', '/metrics')).raw.toString()
  t.match(text, /# HELP atrium_air_gapped AIR_GAPPED: 1 when features that need outside APIs are off/)
  t.match(text, /^atrium_air_gapped 1$/m)
})

t.test('the OpenAPI document describes every route with its schemas', async (t) => {
  const r = await h.anonymous('GET', '/openapi.json')
  t.equal(r.status, 200)
  const doc = r.body
  t.equal(doc.openapi, '3.0.3')
  t.notOk(doc.data, 'a document, not an envelope')
  const documented = new Set<string>()
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`)
  }
  const expected = [
    'GET /api/v1/projects',
    'POST /api/v1/projects',
    'GET /api/v1/projects/{id}',
    'PATCH /api/v1/projects/{id}',
    'DELETE /api/v1/projects/{id}',
    'GET /api/v1/projects/{projectId}/versions',
    'POST /api/v1/projects/{projectId}/versions/{versionId}/restore',
    'POST /api/v1/projects/{projectId}/backup',
    'GET /healthz',
    'GET /readyz',
    'GET /metrics',
    'GET /openapi.json',
  ]
  for (const e of expected) t.ok(documented.has(e), e)
  const create = doc.paths['/api/v1/projects'].post
  t.ok(create.requestBody.content['application/json'].schema.properties.name, 'request schema')
  t.ok(create.responses['201'].content['application/json'].schema.properties.data, 'response schema')
  t.ok(create.responses['400'], 'error responses')
  t.ok(doc.components.schemas.ErrorEnvelope, 'the shared error envelope')
  t.same(doc.security, [{ bearer: [] }])
})

t.test('every registered route is in the OpenAPI document', async (t) => {
  const doc = (await h.anonymous('GET', '/openapi.json')).body
  const routes = h.app.routeTable.filter((r) => !r.hidden && r.method !== 'HEAD')
  t.ok(routes.length >= 12)
  for (const r of routes) {
    const path = r.url.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{*}')
    t.ok(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.url}`)
  }
})

t.test('the docs UI is served from the package (offline)', async (t) => {
  const r = await h.anonymous('GET', '/docs/')
  t.equal(r.status, 200)
  t.match(r.headers['content-type'], /text\/html/)
  const init = await h.anonymous('GET', '/docs/static/swagger-initializer.js')
  t.equal(init.status, 200)
  t.match(init.raw.toString(), /openapi\.json/)
  t.notMatch(r.raw.toString(), /https?:\/\/(?!localhost)[a-z]/i, 'no outside assets')
})

t.test('while draining, readyz is 503 so traffic moves elsewhere', async (t) => {
  const b = await testApp(t)
  b.app.draining = true
  const r = await b.anonymous('GET', '/readyz')
  t.equal(r.status, 503)
  t.match(r.body.error, { code: 'SERVICE_UNAVAILABLE', details: { draining: true } })
})
