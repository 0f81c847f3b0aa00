import { statfs } from 'node:fs/promises'
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

const metricsOf = async (b: { anonymous: typeof h.anonymous }) => (await b.anonymous('GET', '/metrics')).raw.toString()

t.test('the readiness gauges say what /readyz says, probed on each scrape', async (t) => {
  const b = await testApp(t)
  let text = await metricsOf(b)
  t.match(text, /^atrium_ready 1$/m)
  for (const d of ['database', 'cache', 'blobs'])
    t.match(text, new RegExp(`^atrium_dependency_up\\{dependency="${d}"\\} 1$`, 'm'))
  failing(b.platform.blobs, 'bucket gone')
  text = await metricsOf(b)
  t.match(text, /^atrium_dependency_up\{dependency="blobs"\} 0$/m, 'the store is down')
  t.match(text, /^atrium_ready 1$/m, 'degraded is still ready, as /readyz answers 200')
  failing(b.platform.db, 'connect ECONNREFUSED')
  text = await metricsOf(b)
  t.match(text, /^atrium_dependency_up\{dependency="database"\} 0$/m)
  t.match(text, /^atrium_ready 0$/m, 'without its database it is not')
  t.notMatch(text, /ECONNREFUSED|bucket gone/, 'causes stay in the log')
})

t.test('atrium_ready is 0 while draining', async (t) => {
  const b = await testApp(t)
  b.app.draining = true
  t.match(await metricsOf(b), /^atrium_ready 0$/m)
})

t.test('requests answered 503 are counted by the dependency that failed; readiness answers are not', async (t) => {
  const b = await testApp(t)
  const { call } = await b.tenant()
  t.match(await metricsOf(b), /^atrium_dependency_errors_total\{dependency="database"\} 0$/m, 'present from the start')
  const p = (await call('POST', '/api/v1/projects', { name: 'm' })).body.data
  const put = b.platform.storage.forTenant
  // The tenant's store refuses every write from now on.
  b.platform.storage.forTenant = async (...args) => {
    const store = await put(...args)
    return {
      ...store,
      put: async () => {
        throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
      },
    }
  }
  const r = await call('PUT', `/api/v1/projects/${p.id}/files/a.txt`, 'hello', { 'content-type': 'text/plain' })
  t.equal(r.status, 503, JSON.stringify(r.body))
  t.equal(r.body.error.details.dependency, 'storage')
  b.platform.storage.forTenant = put
  failing(b.platform.db, 'down')
  t.equal((await b.anonymous('GET', '/readyz')).status, 503)
  const text = await metricsOf(b)
  t.match(text, /^atrium_dependency_errors_total\{dependency="storage"\} 1$/m)
  t.match(text, /^atrium_dependency_errors_total\{dependency="other"\} 0$/m, "readyz's 503 is its answer, not an error")
})

t.test('the filesystem under DATA_DIR is measured when scraped', async (t) => {
  const text = await metricsOf(h)
  const free = Number(/^atrium_data_path_free_bytes (\d+)$/m.exec(text)?.[1])
  const size = Number(/^atrium_data_path_size_bytes (\d+)$/m.exec(text)?.[1])
  const fs = await statfs(h.platform.config.DATA_DIR)
  t.equal(size, fs.blocks * fs.bsize)
  t.ok(free > 0 && free <= size, `free ${free} of ${size}`)
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
