import { createHash } from 'node:crypto'
import t from 'tap'
import { testApp, type Caller } from '../../../helpers/app.js'
import { unzip } from '../../../helpers/zip.js'
import { allPages, isError, listedIds } from '../../../helpers/answers.js'

const h = await testApp(t)

async function countRows(table: 'projects' | 'project_versions', tenantId: string): Promise<number> {
  const [row] = await h.platform.db.system(
    (sql) => sql`select count(*)::int as n from ${sql(table)} where tenant_id = ${tenantId}`,
  )
  return (row as { n: number }).n
}

async function makeProject(call: Caller, name = 'Demo'): Promise<{ id: string; version: number }> {
  const r = await call('POST', '/api/v1/projects', { name, description: 'd', language: 'typescript' })
  if (r.status !== 201) throw new Error(`project not created: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.data
}

t.test('a project is created, read, changed and deleted through the envelope', async (t) => {
  const { call } = await h.tenant()
  const created = await call('POST', '/api/v1/projects', { name: '  Apollo ', description: 'moon', language: 'python' })
  t.equal(created.status, 201)
  t.match(created.body, {
    data: { name: 'Apollo', description: 'moon', language: 'python', version: 1 },
    meta: { request_id: String, timestamp: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ },
  })
  const id = created.body.data.id as string
  t.match(created.body.data.created_at, /Z$/)

  const got = await call('GET', `/api/v1/projects/${id}`)
  t.same(got.body.data, created.body.data)

  const patched = await call('PATCH', `/api/v1/projects/${id}`, { description: 'to the moon' })
  t.equal(patched.status, 200)
  t.match(patched.body.data, { name: 'Apollo', description: 'to the moon', version: 2 })

  const deleted = await call('DELETE', `/api/v1/projects/${id}`, '', { 'content-type': 'application/json' })
  t.same(deleted.body.data, { id, deleted: true })
  t.equal((await call('GET', `/api/v1/projects/${id}`)).body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await call('DELETE', `/api/v1/projects/${id}`)).status, 404)
})

t.test('creating with only a name fills description and language with empty text', async (t) => {
  const { call } = await h.tenant()
  const r = await call('POST', '/api/v1/projects', { name: 'Bare' })
  t.match(r.body.data, { name: 'Bare', description: '', language: '' })
})

t.test('bad input is refused with VALIDATION_ERROR and writes nothing', async (t) => {
  const { call, tenantId } = await h.tenant()
  const cases: [string, unknown][] = [
    ['missing name', { description: 'x' }],
    ['name of wrong type', { name: 42 }],
    ['blank name', { name: '   ' }],
    ['name too long', { name: 'x'.repeat(201) }],
    ['unknown field', { name: 'ok', owner: 'me' }],
    ['null description', { name: 'ok', description: null }],
    ['array body', [{ name: 'ok' }]],
  ]
  for (const [what, body] of cases) {
    const r = await call('POST', '/api/v1/projects', body)
    isError(t, r, 400, 'VALIDATION_ERROR', what)
    t.ok(
      Array.isArray(r.body.error.details.errors) && r.body.error.details.errors.length > 0,
      `${what}: details name the field`,
    )
  }
  const nul = await call('POST', '/api/v1/projects', '{"name":"a\\u0000b"}', { 'content-type': 'application/json' })
  t.equal(nul.status, 400, 'a NUL character in text')
  t.match(nul.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'body.name' }] } })
  const malformed = await call('POST', '/api/v1/projects', '{"name": "x"', { 'content-type': 'application/json' })
  t.equal(malformed.status, 400)
  t.equal(malformed.body.error.code, 'VALIDATION_ERROR')
  t.equal(await countRows('projects', tenantId), 0, 'nothing was written')
})

t.test('a PATCH that changes nothing, or is empty or invalid, adds no version', async (t) => {
  const { call, tenantId } = await h.tenant()
  const p = await makeProject(call)
  t.equal((await call('PATCH', `/api/v1/projects/${p.id}`, { name: 'Demo' })).body.data.version, 1)
  t.equal((await call('PATCH', `/api/v1/projects/${p.id}`, {})).body.error.code, 'VALIDATION_ERROR')
  t.equal((await call('PATCH', `/api/v1/projects/${p.id}`, { name: 7 })).body.error.code, 'VALIDATION_ERROR')
  t.equal((await call('PATCH', `/api/v1/projects/${p.id}`, { id: 'x' })).body.error.code, 'VALIDATION_ERROR')
  t.equal(await countRows('project_versions', tenantId), 1)
  t.equal((await call('GET', `/api/v1/projects/${p.id}`)).body.data.version, 1)
})

t.test('malformed and unknown ids', async (t) => {
  const { call } = await h.tenant()
  for (const id of [
    'not-a-uuid',
    'urn:uuid:01900000-0000-7000-8000-000000000000',
    '{01900000-0000-7000-8000-000000000000}',
    '01900000000070008000000000000000',
  ])
    isError(t, await call('GET', `/api/v1/projects/${encodeURIComponent(id)}`), 400, 'VALIDATION_ERROR', id)
  const badVersion = await call(
    'POST',
    `/api/v1/projects/01900000-0000-7000-8000-000000000000/versions/${encodeURIComponent('urn:uuid:01900000-0000-7000-8000-000000000000')}/restore`,
  )
  t.equal(badVersion.status, 400)
  const missing = await call('GET', '/api/v1/projects/01900000-0000-7000-8000-000000000000')
  t.equal(missing.status, 404)
  t.same(missing.body.error.details, { resource: 'project', id: '01900000-0000-7000-8000-000000000000' })
})

t.test('the list pages with a cursor, newest first, without gaps or repeats', async (t) => {
  const { call } = await h.tenant()
  const ids: string[] = []
  for (let i = 0; i < 7; i++) ids.push((await makeProject(call, `p${i}`)).id)
  const pages = await allPages(call, '/api/v1/projects', 3)
  for (const page of pages) {
    t.equal(page.status, 200)
    t.ok(page.body.data.length <= 3)
  }
  t.equal(pages.length, 3)
  t.same(listedIds(pages), [...ids].reverse())

  const all = await call('GET', '/api/v1/projects')
  t.equal(all.body.data.length, 7, 'default limit 50 holds them all')
  t.equal(all.body.meta.nextCursor, null)
})

t.test('bad paging parameters are VALIDATION_ERROR', async (t) => {
  const { call } = await h.tenant()
  for (const q of [
    'limit=0',
    'limit=201',
    'limit=abc',
    'cursor=not-a-cursor',
    `cursor=${Buffer.from('v1:nope').toString('base64url')}`,
    'extra=1',
  ])
    isError(t, await call('GET', `/api/v1/projects?${q}`), 400, 'VALIDATION_ERROR', q)
})

t.test('every change keeps a version, and a version can be restored', async (t) => {
  const { call } = await h.tenant('pro')
  const p = await makeProject(call, 'v1 name')
  await call('PATCH', `/api/v1/projects/${p.id}`, { name: 'v2 name' })
  await call('PATCH', `/api/v1/projects/${p.id}`, { language: 'go' })
  const versions = await call('GET', `/api/v1/projects/${p.id}/versions`)
  t.equal(versions.status, 200)
  t.match(versions.body.data, [
    { version: 3, name: 'v2 name', language: 'go', change: 'updated' },
    { version: 2, name: 'v2 name', language: 'typescript', change: 'updated' },
    { version: 1, name: 'v1 name', change: 'created', restored_from: null },
  ])
  const first = versions.body.data[2].id as string
  const restored = await call('POST', `/api/v1/projects/${p.id}/versions/${first}/restore`)
  t.equal(restored.status, 200)
  t.match(restored.body.data, { name: 'v1 name', language: 'typescript', version: 4 })
  const after = await call('GET', `/api/v1/projects/${p.id}/versions?limit=1`)
  t.match(after.body.data, [{ version: 4, change: 'restored', restored_from: 1 }])
  t.type(after.body.meta.nextCursor, 'string')

  t.equal(
    (await call('POST', `/api/v1/projects/${p.id}/versions/01900000-0000-7000-8000-000000000000/restore`)).status,
    404,
  )
  const other = await makeProject(call, 'other')
  t.equal(
    (await call('POST', `/api/v1/projects/${other.id}/versions/${first}/restore`)).status,
    404,
    'a version of another project',
  )
})

t.test('versions are pruned to the plan limit', async (t) => {
  for (const [plan, limit] of [
    ['free', 5],
    ['pro', 20],
  ] as const) {
    const { call } = await h.tenant(plan)
    const p = await makeProject(call)
    for (let i = 1; i <= limit + 2; i++) await call('PATCH', `/api/v1/projects/${p.id}`, { description: `change ${i}` })
    const r = await call('GET', `/api/v1/projects/${p.id}/versions?limit=200`)
    t.equal(r.body.data.length, limit, `${plan} keeps ${limit}`)
    t.equal(r.body.data[0].version, limit + 3, `${plan}: newest kept`)
    t.equal(r.body.data.at(-1).version, 4, `${plan}: oldest pruned`)
  }
  const { call } = await h.tenant('enterprise')
  const p = await makeProject(call)
  for (let i = 1; i <= 60; i++) await call('PATCH', `/api/v1/projects/${p.id}`, { description: `change ${i}` })
  const r = await call('GET', `/api/v1/projects/${p.id}/versions?limit=200`)
  t.equal(r.body.data.length, 61, 'enterprise keeps every version')
})

async function download(url: string): Promise<Buffer> {
  const u = new URL(url)
  if (h.platform.blobs.kind === 'local') {
    // the server serves local links itself
    const r = await h.app.inject({ method: 'GET', url: u.pathname + u.search })
    if (r.statusCode !== 200) throw new Error(`download failed: ${r.statusCode}`)
    return r.rawPayload
  }
  const r = await fetch(url)
  if (r.status !== 200) throw new Error(`download failed: ${r.status}`)
  return Buffer.from(await r.arrayBuffer())
}

t.test('a backup is a zip whose checksum is the sha256 of exactly the downloaded bytes', async (t) => {
  const { call, tenantId } = await h.tenant()
  const p = await makeProject(call, 'Backed up')
  await call('PATCH', `/api/v1/projects/${p.id}`, { description: 'second' })

  const r = await call('POST', `/api/v1/projects/${p.id}/backup`, { includeHistory: true, includeAgents: true })
  t.equal(r.status, 201)
  const b = r.body.data
  t.match(b, { downloadUrl: String, size: Number, checksum: /^sha256:[0-9a-f]{64}$/ })
  const [audited] = await h.platform.db.system(
    (sql) =>
      sql`select actor_type, target_id, details from audit_events where tenant_id = ${tenantId} and action = 'project.backup_created'`,
  )
  t.match(
    audited,
    { actor_type: 'api_key', target_id: p.id, details: { backupId: b.backupId, size: b.size } },
    'the audit log records who took the data out',
  )
  const expires = Date.parse(b.expiresAt)
  t.ok(expires > Date.now() + 6.9 * 86400_000 && expires < Date.now() + 7.1 * 86400_000, 'link lasts 7 days')

  const bytes = await download(b.downloadUrl)
  t.equal(bytes.length, b.size)
  t.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, b.checksum)

  const files = await unzip(bytes)
  t.same(Object.keys(files).sort(), ['agents.json', 'files.json', 'manifest.json', 'project.json', 'versions.json'])
  t.match(JSON.parse(files['manifest.json']!), {
    format: 'atrium.project-backup',
    formatVersion: 2,
    tenantId,
    projectId: p.id,
    includes: { history: true, agents: true, files: true },
  })
  t.match(JSON.parse(files['project.json']!), { id: p.id, name: 'Backed up', description: 'second', version: 2 })
  t.equal(JSON.parse(files['versions.json']!).length, 2)

  const plain = await call('POST', `/api/v1/projects/${p.id}/backup`)
  t.equal(plain.status, 201, 'no body: both flags default to false')
  const emptyJson = await call('POST', `/api/v1/projects/${p.id}/backup`, '', { 'content-type': 'application/json' })
  t.equal(emptyJson.status, 201, 'an empty body labelled JSON is no body')
  t.same(Object.keys(await unzip(await download(plain.body.data.downloadUrl))).sort(), [
    'files.json',
    'manifest.json',
    'project.json',
  ])

  t.equal(
    (await call('POST', `/api/v1/projects/${p.id}/backup`, { includeHistory: 'yes' })).body.error.code,
    'VALIDATION_ERROR',
  )
  t.equal((await call('POST', '/api/v1/projects/01900000-0000-7000-8000-000000000000/backup', {})).status, 404)
})

t.test('versions page by version number, with a cursor of their own kind', async (t) => {
  const { call } = await h.tenant()
  const p = await makeProject(call)
  for (let i = 0; i < 4; i++) await call('PATCH', `/api/v1/projects/${p.id}`, { description: `d${i}` })
  const first = await call('GET', `/api/v1/projects/${p.id}/versions?limit=2`)
  t.same(
    first.body.data.map((v: { version: number }) => v.version),
    [5, 4],
  )
  const second = await call('GET', `/api/v1/projects/${p.id}/versions?limit=2&cursor=${first.body.meta.nextCursor}`)
  t.same(
    second.body.data.map((v: { version: number }) => v.version),
    [3, 2],
  )
  const last = await call('GET', `/api/v1/projects/${p.id}/versions?limit=2&cursor=${second.body.meta.nextCursor}`)
  t.same(
    last.body.data.map((v: { version: number }) => v.version),
    [1],
  )
  t.equal(last.body.meta.nextCursor, null)
  await makeProject(call, 'another') // two projects: a first page of one has a next cursor
  const projectCursor = (await call('GET', '/api/v1/projects?limit=1')).body.meta.nextCursor
  t.type(projectCursor, 'string', 'the projects list gave a cursor')
  const mixed = await call('GET', `/api/v1/projects/${p.id}/versions?cursor=${projectCursor}`)
  t.equal(mixed.status, 400, 'a project cursor is not a version cursor')
  t.match(mixed.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'cursor' }] } })
  const versionCursor = first.body.meta.nextCursor
  t.equal(
    (await call('GET', `/api/v1/projects?cursor=${versionCursor}`)).status,
    400,
    'nor a version cursor a project cursor',
  )
})

t.test('concurrent changes to one project get distinct, gapless version numbers', async (t) => {
  const { call } = await h.tenant('enterprise')
  const p = await makeProject(call)
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => call('PATCH', `/api/v1/projects/${p.id}`, { description: `parallel ${i}` })),
  )
  t.ok(
    results.every((r) => r.status === 200),
    'every change succeeded',
  )
  const versions = (await call('GET', `/api/v1/projects/${p.id}/versions?limit=200`)).body.data.map(
    (v: { version: number }) => v.version,
  )
  t.same(
    versions,
    Array.from({ length: 13 }, (_, i) => 13 - i),
  )
  t.equal((await call('GET', `/api/v1/projects/${p.id}`)).body.data.version, 13)
})

t.test('a backup with a long history streams every version, in order', async (t) => {
  const { call, tenantId } = await h.tenant('enterprise')
  const p = await makeProject(call)
  // 1,200 more versions of 8 KB each, written directly: the API's rate limit would take minutes
  await h.platform.db.system(async (sql) => {
    await sql`insert into project_versions (id, tenant_id, project_id, version, name, description, language, change)
      select gen_random_uuid(), ${tenantId}, ${p.id}, v, 'Demo', v || ' ' || repeat('x', 8000), 'typescript', 'updated'
        from generate_series(2, 1201) as v`
    await sql`update projects set version = 1201 where id = ${p.id}`
  })
  const b = (await call('POST', `/api/v1/projects/${p.id}/backup`, { includeHistory: true })).body.data
  const bytes = await download(b.downloadUrl)
  t.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, b.checksum)
  const versions = JSON.parse((await unzip(bytes))['versions.json']!)
  t.equal(versions.length, 1201)
  t.same(
    versions.map((v: { version: number }) => v.version),
    Array.from({ length: 1201 }, (_, i) => i + 1),
  )
})

t.test('when object storage fails, the backup is SERVICE_UNAVAILABLE and nothing is recorded', async (t) => {
  const b = await testApp(t)
  const { call, tenantId } = await b.tenant()
  const p = (await call('POST', '/api/v1/projects', { name: 'x' })).body.data
  const put = b.platform.blobs.put
  b.platform.blobs.put = async () => {
    throw new Error('storage down')
  }
  const r = await call('POST', `/api/v1/projects/${p.id}/backup`, { includeHistory: true })
  t.equal(r.status, 503)
  t.equal(r.body.error.code, 'SERVICE_UNAVAILABLE')
  const rows = await b.platform.db.system((sql) => sql`select id from project_backups where tenant_id = ${tenantId}`)
  t.equal(rows.length, 0)
  b.platform.blobs.put = put
  const again = await call('POST', `/api/v1/projects/${p.id}/backup`, { includeHistory: true })
  t.equal(again.status, 201, 'the connection came back clean: the next backup works')
})
