// Tenant exports through the API: the job, the archive's layout and contents in each format, the
// download link, who may export which tenant, and the free plan's monthly allowance.
import { createHash } from 'node:crypto'
import t from 'tap'
import { caller, testApp, type Caller } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { fillTenant } from '../../../helpers/tenant-data.js'
import { unzip, unzipRaw } from '../../../helpers/zip.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { createKey } from '../../../../server/modules/api-keys/service.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The export once it has ended. */
async function ended(call: Caller, tenantId: string, exportId: string) {
  for (let i = 0; i < 400; i++) {
    const r = await call('GET', `/api/v1/platform/tenants/${tenantId}/export/${exportId}`)
    if (r.status !== 200) throw new Error(`export: ${r.status} ${JSON.stringify(r.body)}`)
    if (r.body.data.status === 'completed' || r.body.data.status === 'failed') return r.body.data
    await sleep(50)
  }
  throw new Error('the export did not end')
}

async function download(url: string): Promise<Buffer> {
  const u = new URL(url)
  if (h.platform.blobs.kind === 'local')
    return (await h.app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
  return Buffer.from(await (await fetch(u)).arrayBuffer())
}

const owner = await h.tenant('enterprise')
const data = await fillTenant(owner.call, llm)
const base = `/api/v1/platform/tenants/${owner.tenantId}/export`

t.test('a zip export holds every kind of record and the files, in the layout of the specification', async (t) => {
  const asked = await owner.call('POST', base, { format: 'zip', include: ['all'] })
  t.equal(asked.status, 202)
  t.match(asked.body.data, {
    status: 'pending',
    format: 'zip',
    include: ['projects', 'agents', 'chat_history', 'settings'],
    destination: 'download',
    downloadUrl: null,
  })
  const done = await ended(owner.call, owner.tenantId, asked.body.data.exportId)
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.ok(Date.parse(done.expiresAt) - Date.now() > 6.9 * 86400_000, 'the link is valid about 7 days')
  const zip = await download(done.downloadUrl)
  t.equal(zip.length, done.size, 'size is the archive’s')
  t.equal(
    `sha256:${createHash('sha256').update(zip).digest('hex')}`,
    done.checksum,
    'checksum is of exactly the bytes downloaded',
  )
  t.match(
    new URL(done.downloadUrl).search + new URL(done.downloadUrl).pathname,
    new RegExp(`export_${owner.tenantId}_\\d{8}T\\d{6}Z\\.zip`),
  )

  const entries = await unzip(zip)
  const raw = await unzipRaw(zip)
  const [p1] = data.projectIds
  const meta = JSON.parse(entries['metadata.json']!)
  t.match(meta, {
    format: 'atrium.tenant-export',
    formatVersion: 1,
    tenantId: owner.tenantId,
    exportId: done.exportId,
    include: ['projects', 'agents', 'chat_history', 'settings'],
  })
  t.match(JSON.parse(entries['tenant.json']!), { id: owner.tenantId, plan: 'enterprise' })
  t.same(
    JSON.parse(entries['projects/index.json']!)
      .map((p: { id: string }) => p.id)
      .sort(),
    [...data.projectIds].sort(),
  )
  t.match(JSON.parse(entries[`projects/${p1}/project.json`]!), { id: p1, name: 'Atlas', description: 'Renamed once' })
  const versions = JSON.parse(entries[`projects/${p1}/versions/00001.json`]!)
  t.same(
    versions.map((v: { version: number }) => v.version),
    versions.map((_: unknown, i: number) => i + 1),
    'every version, oldest first',
  )
  const manifest = JSON.parse(entries[`projects/${p1}/manifest/00001.json`]!)
  t.same(manifest.map((f: { path: string }) => f.path).sort(), Object.keys(data.files).sort())
  t.notOk('blob_key' in manifest[0], 'no store keys: they are derived where the data is restored')
  for (const [path, content] of Object.entries(data.files))
    t.equal(raw[`projects/${p1}/files/${path}`]?.toString('utf8'), content, path)
  const oldSha = createHash('sha256').update(data.oldContent).digest('hex')
  t.equal(
    raw[`projects/${p1}/history/${oldSha}`]?.toString('utf8'),
    data.oldContent,
    'the bytes only an older version holds',
  )
  t.ok(
    JSON.parse(entries[`projects/${p1}/version-files/00001.json`]!).some(
      (f: { sha256: string }) => f.sha256 === oldSha,
    ),
  )
  t.match(JSON.parse(entries[`projects/${p1}/agents.json`]!), [{ id: data.agentId, name: 'Helper' }])
  t.match(JSON.parse(entries['agents.json']!), [
    { id: data.agentId, name: 'Helper', system_prompt: 'You are careful.' },
  ])
  t.match(JSON.parse(entries[`agents/${data.agentId}.json`]!), { id: data.agentId, config: { autonomyLevel: 'low' } })
  t.match(JSON.parse(entries[`agents/${data.agentId}/runs/00001.json`]!), [
    { id: data.runId, status: 'completed', output: 'Nothing to change: the project looks fine.' },
  ])
  t.match(JSON.parse(entries['chat/sessions.json']!), [
    { id: data.sessionId, title: 'Planning', project_id: p1, message_count: 2 },
  ])
  t.match(JSON.parse(entries['chat/messages/00001.json']!), [
    { session_id: data.sessionId, role: 'user', content: 'Make a plan, please' },
    { role: 'assistant', content: 'Here is a plan.', status: 'completed' },
  ])
  const settings = JSON.parse(entries['settings/preferences.json']!)
  t.match(settings, { llm: { provider: 'openai-compatible', base_url: llm.url, model: 'test-model' } })
  t.notMatch(zip.toString('latin1'), /sk-export-test-key/, 'the LLM key never leaves')
  t.notMatch(JSON.stringify(settings), /sealed|last_four/)
})

t.test('include narrows the archive to the kinds asked for', async (t) => {
  const asked = await owner.call('POST', base, { include: ['chat history', 'settings'] })
  t.same(asked.body.data.include, ['chat_history', 'settings'], '"chat history" is chat_history')
  const done = await ended(owner.call, owner.tenantId, asked.body.data.exportId)
  const names = Object.keys(await unzipRaw(await download(done.downloadUrl))).sort()
  t.same(names, [
    'chat/messages/00001.json',
    'chat/sessions.json',
    'metadata.json',
    'settings/preferences.json',
    'tenant.json',
  ])
})

t.test('json is one document whose members are the archive’s entries, file bytes in base64', async (t) => {
  const asked = await owner.call('POST', base, { format: 'json', include: ['projects'] })
  const done = await ended(owner.call, owner.tenantId, asked.body.data.exportId)
  t.equal(done.status, 'completed')
  const text = (await download(done.downloadUrl)).toString('utf8')
  t.match(new URL(done.downloadUrl).pathname + new URL(done.downloadUrl).search, /\.json/)
  const doc = JSON.parse(text)
  const [p1] = data.projectIds
  t.match(doc['metadata.json'], { format: 'atrium.tenant-export', include: ['projects'] })
  t.match(doc[`projects/${p1}/project.json`], { name: 'Atlas' })
  t.same(doc[`projects/${p1}/files/src/main.ts`], {
    encoding: 'base64',
    data: Buffer.from(data.files['src/main.ts']!).toString('base64'),
  })
  t.equal(
    Buffer.from(doc[`projects/${p1}/files/data/blob.bin`].data, 'base64').toString('utf8'),
    data.files['data/blob.bin'],
  )
  t.equal(Object.keys(doc)[0], 'metadata.json', 'in the zip’s order')
})

t.test('csv is a zip with one CSV per table, quoted as RFC 4180 says and safe to open in a spreadsheet', async (t) => {
  const asked = await owner.call('POST', base, { format: 'csv' })
  const done = await ended(owner.call, owner.tenantId, asked.body.data.exportId)
  t.equal(done.status, 'completed')
  const entries = await unzip(await download(done.downloadUrl))
  t.same(Object.keys(entries).sort(), [
    'agent_runs.csv',
    'agents.csv',
    'chat_messages.csv',
    'chat_sessions.csv',
    'llm_settings.csv',
    'metadata.json',
    'project_files.csv',
    'project_version_files.csv',
    'project_versions.csv',
    'projects.csv',
    'tenant.csv',
  ])
  const lines = entries['projects.csv']!.split('\r\n')
  t.equal(lines[0], 'id,name,description,language,version,created_at,updated_at')
  t.equal(lines.length, 4, 'a header, two rows and the last line break')
  t.ok(
    lines.some((l) => l.includes(`"Beacon, ""quoted"""`)),
    'commas and quotes are quoted',
  )
  t.ok(
    lines.some((l) => l.includes(`'=1+1 looks like a formula`)),
    'a formula-looking text is defused',
  )
  t.match(entries['agent_runs.csv'], /"\{""inputTokens"":30,""outputTokens"":9\}"/, 'JSON values as their text')
})

t.test('who may export which tenant', async (t) => {
  const other = await h.tenant('enterprise')
  const theirs = await other.call('POST', base, {})
  t.equal(theirs.status, 404, 'another tenant’s id is not there for this credential')
  t.equal(theirs.body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await other.call('GET', `${base}/${(await owner.call('GET', base)).body.data[0].exportId}`)).status, 404)

  const reader = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), {
      tenantId: owner.tenantId,
      type: 'ci',
      permissions: ['projects:read'],
    }),
  )
  const refused = await caller(h.app, reader.key)('POST', base, {})
  t.equal(refused.status, 403)
  t.same(refused.body.error.details, { required: 'export' })

  const operator = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), { tenantId: null, type: 'admin', permissions: ['*'] }),
  )
  const asOperator = caller(h.app, operator.key)
  const byOperator = await asOperator('POST', `/api/v1/platform/tenants/${other.tenantId}/export`, {
    include: ['settings'],
  })
  t.equal(byOperator.status, 202, 'a deployment operator key exports any tenant')
  t.equal((await ended(asOperator, other.tenantId, byOperator.body.data.exportId)).status, 'completed')
  const nobody = await asOperator('POST', `/api/v1/platform/tenants/00000000-0000-7000-8000-000000000000/export`, {})
  t.equal(nobody.status, 404)
  t.equal(nobody.body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await asOperator('GET', '/api/v1/projects')).status, 403, 'still no tenant routes for it')
})

t.test('bad requests are refused in the envelope, and nothing is queued', async (t) => {
  const manual = async () =>
    (await owner.call('GET', `${base}?limit=200`)).body.data.filter((e: { kind: string }) => e.kind === 'manual').length
  const before = await manual()
  for (const body of [
    { format: 'xml' },
    { include: [] },
    { include: ['everything'] },
    { destination: 'ftp' },
    { destination: 's3' },
    { destination: 's3', s3Endpoint: 'file:///etc', s3Bucket: 'abc', s3AccessKey: 'a', s3SecretKey: 'b' },
    { extra: 1 },
  ]) {
    const r = await owner.call('POST', base, body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.body.error.code, 'VALIDATION_ERROR')
  }
  t.equal(await manual(), before)
})

t.test('the free plan has one manual export a month; a refused one is QUOTA_EXCEEDED and queues nothing', async (t) => {
  const free = await h.tenant('free')
  const url = `/api/v1/platform/tenants/${free.tenantId}/export`
  const first = await free.call('POST', url, { include: ['settings'] })
  t.equal(first.status, 202)
  const second = await free.call('POST', url, { include: ['settings'] })
  t.equal(second.status, 413)
  t.equal(second.body.error.code, 'QUOTA_EXCEEDED')
  t.match(second.body.error.details, {
    limit: 1,
    used: 1,
    period: 'month',
    resetsAt: /^\d{4}-\d{2}-01T00:00:00\.000Z$/,
  })
  t.equal((await free.call('GET', url)).body.data.length, 1, 'free tenants have no automatic backups either')
  const jobs = await h.platform.db.system(
    (sql) => sql`select count(*)::int as n from jobs where tenant_id = ${free.tenantId} and queue = 'exports.run'`,
  )
  t.equal(jobs[0]!.n, 1, 'the refused request queued no job')
})

t.test('exports are audited: who asked, and the archive that was written', async (t) => {
  const rows = await h.platform.db.system(
    (sql) =>
      sql`select action, actor_type, details from audit_events where tenant_id = ${owner.tenantId} and action like 'export.%' order by id`,
  )
  t.ok(rows.some((r) => r.action === 'export.requested' && r.actor_type === 'api_key'))
  const completed = rows.find(
    (r) => r.action === 'export.completed' && (r.details as { kind: string }).kind === 'manual',
  )
  t.match(completed?.details, { kind: 'manual', format: 'zip', size: Number, checksum: /^sha256:/ })
})
