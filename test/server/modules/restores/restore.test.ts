// Restores through the API: an export restored into an empty tenant exports again as the same data,
// merge and replace, validate only, and who may restore where.
import { createHash } from 'node:crypto'
import t from 'tap'
import { caller, testApp } from '../../../helpers/app.js'
import { faultProxy } from '../../../helpers/fault-proxy.js'
import { services, testEnv } from '../../../helpers/platform.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { goneFrom, portability, restoreForm, storedKeys, tenantState } from '../../../helpers/portability.js'
import { fillTenant } from '../../../helpers/tenant-data.js'
import { unzipRaw } from '../../../helpers/zip.js'
import { isError } from '../../../helpers/answers.js'
import { derivedId, restoreIdKey, RESTORED_BY } from '../../../../server/modules/exports/format.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { createKey } from '../../../../server/modules/api-keys/service.js'
import { fileBlobKey, projectFilesService } from '../../../../server/modules/projects/files-service.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const p = portability(h)
const source = await h.tenant('enterprise')
const data = await fillTenant(source.call, llm)
const exported = await p.exported(source.call, source.tenantId)
const archive = exported.archive!

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
const KEY = restoreIdKey(h.platform.secrets)
/** A record's id once restored into a tenant that did not have it. */
const remapped = (id: string, to: string) => derivedId(KEY, to, id)

/**
 * An archive's data as comparable text: entry names and JSON with the id of every record of `from`
 * written as it is once restored into `to` (derived: format.ts derivedId), file bytes as their
 * digest. Into another tenant, who started a run is the restore's mark (RESTORED_BY): the user or
 * key of the tenant it came from is none of `to`'s. The two entries that describe the export itself
 * (metadata.json, tenant.json) are left out.
 */
async function dataOf(zip: Buffer, from: string, to: string): Promise<Record<string, unknown>> {
  const entries = await unzipRaw(zip)
  const records = new Set<string>()
  for (const [name, bytes] of Object.entries(entries)) {
    if (!name.endsWith('.json') || name.includes('/files/')) continue
    const value = JSON.parse(bytes.toString('utf8')) as unknown
    for (const r of Array.isArray(value) ? value : [value])
      if (r && typeof r === 'object' && typeof (r as { id?: unknown }).id === 'string')
        records.add((r as { id: string }).id)
  }
  const map = (text: string) =>
    from === to ? text : text.replace(UUID, (id) => (records.has(id) ? remapped(id, to) : id))
  const out: Record<string, unknown> = {}
  for (const [name, bytes] of Object.entries(entries)) {
    if (name === 'metadata.json' || name === 'tenant.json') continue
    let value: unknown =
      name.endsWith('.json') && !name.includes('/files/')
        ? JSON.parse(map(bytes.toString('utf8')))
        : createHash('sha256').update(bytes).digest('hex')
    if (from !== to && /^agents\/[^/]+\/runs\//.test(name))
      value = (value as object[]).map((r) => ({ ...r, started_by: RESTORED_BY }))
    out[map(name)] = value
  }
  return out
}

const snapshot = (tenantId: string) => tenantState(h, tenantId)

t.test('round trip: restored into an empty tenant (merge=false), it exports again as the same data', async (t) => {
  const target = await h.tenant('enterprise')
  const done = await p.restored(target.call, target.apiKey, target.tenantId, archive, { merge: false })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report, {
    archive: { tenantId: source.tenantId, exportId: exported.job.exportId, formatVersion: 1 },
    merge: false,
    validateOnly: false,
    counts: {
      projects: { inArchive: 2, restored: 2, conflicts: 0, skipped: 0 },
      agent_runs: { restored: 1 },
      chat_messages: { restored: 2 },
      llm_settings: { restored: 1 },
    },
    files: { inArchive: 4, stored: 4 },
    skipped: [],
    conflicts: [],
  })
  const again = await p.exported(target.call, target.tenantId)
  t.same(
    await dataOf(again.archive!, target.tenantId, target.tenantId),
    await dataOf(archive, source.tenantId, target.tenantId),
    'every record and file, ids mapped',
  )

  // The restored tenant works as its own: the API reads what was restored.
  const [p1] = data.projectIds.map((id) => remapped(id, target.tenantId))
  const file = await target.call('GET', `/api/v1/projects/${p1}/files/src/main.ts`)
  t.equal(file.raw.toString('utf8'), data.files['src/main.ts'])
  const run = await target.call(
    'GET',
    `/api/v1/agents/${remapped(data.agentId, target.tenantId)}/runs/${remapped(data.runId, target.tenantId)}`,
  )
  t.match(run.body.data, { status: 'completed', output: 'Nothing to change: the project looks fine.' })
  const versions = await target.call('GET', `/api/v1/projects/${p1}/versions`)
  const oldest = versions.body.data[versions.body.data.length - 1]
  t.equal(
    (await target.call('POST', `/api/v1/projects/${p1}/versions/${oldest.id}/restore`)).status,
    200,
    'an old version comes back, with the bytes only history held',
  )
  const settings = await target.call('GET', '/api/v1/tenant/settings/llm')
  t.match(
    settings.body.data,
    { provider: 'openai-compatible', baseUrl: llm.url, model: 'test-model', apiKey: { configured: false } },
    'the key never travelled: it is set again after a restore',
  )
  t.same(await goneFrom(h, `tenants/${target.tenantId}/restores/`), [], 'the upload is removed once restored')
})

t.test('merge=true into the tenant it came from adds nothing and reports every record as a conflict', async (t) => {
  const before = await snapshot(source.tenantId)
  const done = await p.restored(source.call, source.apiKey, source.tenantId, archive, { merge: true })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report.counts, {
    projects: { inArchive: 2, restored: 0, conflicts: 2 },
    agents: { restored: 0, conflicts: 1 },
    chat_sessions: { conflicts: 1 },
    llm_settings: { conflicts: 1 },
  })
  t.match(
    done.report.counts.project_versions,
    { restored: 0, skipped: done.report.counts.project_versions.inArchive },
    'children of a record already there are skipped with it',
  )
  t.ok(
    done.report.conflicts.some(
      (c: { kind: string; id: string }) => c.kind === 'projects' && c.id === data.projectIds[0],
    ),
  )
  t.same(await snapshot(source.tenantId), before, 'nothing changed')
})

t.test(
  'merge=false puts the archive’s state back: what changed since is undone, and the rest of the tenant is kept',
  async (t) => {
    const tn = await h.tenant('enterprise')
    const first = await p.restored(tn.call, tn.apiKey, tn.tenantId, archive, { merge: false })
    t.equal(first.status, 'completed')
    const wanted = await snapshot(tn.tenantId)
    const [p1, p2] = data.projectIds.map((id) => remapped(id, tn.tenantId))
    await tn.call('DELETE', `/api/v1/projects/${p2}`)
    await tn.call('PATCH', `/api/v1/projects/${p1}`, { name: 'changed' })
    await tn.call('PUT', `/api/v1/projects/${p1}/files/new.txt`, 'new', { 'content-type': 'text/plain' })
    await tn.call('POST', '/api/v1/projects', { name: 'made later' })
    const again = await p.restored(tn.call, tn.apiKey, tn.tenantId, archive, { merge: false })
    t.equal(again.status, 'completed', JSON.stringify(again.error))
    t.same((await snapshot(tn.tenantId)).rows, wanted.rows, 'row for row as the first restore left it')
    t.ok((await tn.call('GET', '/api/v1/tenant')).status === 200, 'the tenant itself, its members and keys stay')
  },
)

t.test('validate=true checks everything and reports, writing nothing', async (t) => {
  const tn = await h.tenant('enterprise')
  const before = await snapshot(tn.tenantId)
  const done = await p.restored(tn.call, tn.apiKey, tn.tenantId, archive, { validate: true })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report, {
    validateOnly: true,
    counts: { projects: { inArchive: 2 }, chat_messages: { inArchive: 2 } },
    files: { inArchive: 4, stored: 4 },
  })
  t.same(await snapshot(tn.tenantId), before)
})

t.test('who may restore where', async (t) => {
  const other = await h.tenant('enterprise')
  const theirs = await p.upload(other.apiKey, source.tenantId, archive)
  t.equal(theirs.status, 404, 'another tenant’s id is not there')
  t.equal(theirs.body.error.code, 'RESOURCE_NOT_FOUND')
  const exporter = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), {
      tenantId: other.tenantId,
      type: 'ci',
      permissions: ['export', 'projects:write'],
    }),
  )
  const refused = await p.upload(exporter.key, other.tenantId, archive)
  t.equal(refused.status, 403)
  t.same(refused.body.error.details, { required: 'restore' })
  const operator = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), { tenantId: null, type: 'admin', permissions: ['*'] }),
  )
  const done = await p.restored(caller(h.app, operator.key), operator.key, other.tenantId, archive, { validate: true })
  t.equal(done.status, 'completed', 'a deployment operator key restores into any tenant')
  t.same(await goneFrom(h, `tenants/${other.tenantId}/restores/`), [], 'refused uploads left nothing in the store')
})

t.test('a form that is not one is refused in the envelope, and nothing is queued', async (t) => {
  const tn = await h.tenant('enterprise')
  const cases: [string, () => Promise<{ status: number; body: { error: { code: string } } }>, number, string][] = [
    ['options not JSON', () => p.upload(tn.apiKey, tn.tenantId, archive, '{merge'), 400, 'VALIDATION_ERROR'],
    [
      'an unknown option',
      () => p.upload(tn.apiKey, tn.tenantId, archive, { merge: true, force: true }),
      400,
      'VALIDATION_ERROR',
    ],
    ['merge not a boolean', () => p.upload(tn.apiKey, tn.tenantId, archive, { merge: 'yes' }), 400, 'VALIDATION_ERROR'],
    [
      'the file under another name',
      () => p.upload(tn.apiKey, tn.tenantId, archive, {}, { fileField: 'archive' }),
      400,
      'VALIDATION_ERROR',
    ],
    [
      'a form cut short before its end',
      async () => {
        const { payload, headers } = restoreForm(archive, { merge: false })
        const cut = payload.subarray(0, payload.length - 40)
        const r = await h.app.inject({
          method: 'POST',
          url: `/api/v1/platform/tenants/${tn.tenantId}/restore`,
          payload: cut,
          headers: { ...headers, authorization: `Bearer ${tn.apiKey}` },
        })
        return { status: r.statusCode, body: r.json() }
      },
      400,
      'VALIDATION_ERROR',
    ],
    [
      'not multipart',
      async () => {
        const r = await h.app.inject({
          method: 'POST',
          url: `/api/v1/platform/tenants/${tn.tenantId}/restore`,
          payload: { file: 'x' },
          headers: { authorization: `Bearer ${tn.apiKey}` },
        })
        return { status: r.statusCode, body: r.json() }
      },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
  ]
  for (const [what, send, status, code] of cases) isError(t, await send(), status, code, what)
  t.same((await tn.call('GET', `/api/v1/platform/tenants/${tn.tenantId}/restore`)).body.data, [])
  t.same(await storedKeys(h, `tenants/${tn.tenantId}/`), [])
})

t.test(
  'the store down while the archive is uploaded: 503, nothing queued, and the server goes on',
  { skip: services.s3Endpoint ? false : 'needs an S3 store (TEST_S3_ENDPOINT) behind a proxy' },
  async (t) => {
    const env = await testEnv(t)
    const proxy = await faultProxy(t, env.R2_ENDPOINT!)
    const cut = await testApp(t, {
      R2_ENDPOINT: proxy.via(env.R2_ENDPOINT!),
      R2_BUCKET: env.R2_BUCKET!,
      R2_ACCESS_KEY_ID: env.R2_ACCESS_KEY_ID!,
      R2_SECRET_ACCESS_KEY: env.R2_SECRET_ACCESS_KEY!,
    })
    const tn = await cut.tenant('enterprise')
    proxy.cut()
    const r = await portability(cut).upload(tn.apiKey, tn.tenantId, archive, { merge: false })
    t.equal(r.status, 503)
    t.equal(r.body.error.code, 'SERVICE_UNAVAILABLE')
    proxy.restore()
    t.same((await tn.call('GET', `/api/v1/platform/tenants/${tn.tenantId}/restore`)).body.data, [])
    const again = await portability(cut).upload(tn.apiKey, tn.tenantId, archive, { validate: true })
    t.equal(again.status, 202, 'accepted once the store is back')
  },
)

t.test(
  'a replace that fails at its end (over the plan’s bounds) writes nothing: the previous data stays, row by row',
  async (t) => {
    const many = await h.tenant('enterprise')
    for (let i = 0; i < 101; i++)
      t.equal((await many.call('POST', '/api/v1/chat/sessions', { title: `Session ${i}` })).status, 201)
    const { archive: sessions } = await p.exported(many.call, many.tenantId, { include: ['chat_history'] })
    const free = await h.tenant('free')
    await free.call('POST', '/api/v1/projects', { name: 'Mine, kept' })
    await free.call('POST', '/api/v1/chat/sessions', { title: 'Mine, kept too' })
    const before = await snapshot(free.tenantId)
    const done = await p.restored(free.call, free.apiKey, free.tenantId, sessions!, { merge: false })
    t.equal(done.status, 'failed')
    t.equal(done.error.code, 'QUOTA_EXCEEDED', 'free tenants keep 100 chat sessions')
    t.match(done.error.details, { limit: 100, requested: 101 })
    t.same(await snapshot(free.tenantId), before, 'the deletes of the replace were rolled back with it')
  },
)

t.test(
  'a restore that fails at its end lets go of the bytes it wrote, but not of bytes another upload holds',
  async (t) => {
    const many = await h.tenant('enterprise')
    const project = (await many.call('POST', '/api/v1/projects', { name: 'With files' })).body.data
    for (const [path, content] of [
      ['a.txt', 'first file, also being uploaded by the target meanwhile'],
      ['b.txt', 'second file, only the restore writes it'],
    ]) {
      t.equal(
        (
          await many.call('PUT', `/api/v1/projects/${project.id}/files/${path}`, content, {
            'content-type': 'text/plain',
          })
        ).status,
        201,
      )
    }
    for (let i = 0; i < 101; i++) await many.call('POST', '/api/v1/chat/sessions', { title: `Session ${i}` })
    const { archive: both } = await p.exported(many.call, many.tenantId, { include: ['projects', 'chat_history'] })
    const free = await h.tenant('free')
    // An upload of a.txt's bytes into the same project key, in flight while the restore runs.
    const key = (content: string) =>
      fileBlobKey(
        free.tenantId,
        derivedId(restoreIdKey(h.platform.secrets), free.tenantId, project.id),
        createHash('sha256').update(content).digest('hex'),
      )
    const files = projectFilesService({ db: h.platform.db, storage: h.platform.storage })
    const held = await files.hold(
      free.tenantId,
      key('first file, also being uploaded by the target meanwhile'),
      3600_000,
    )
    const done = await p.restored(free.call, free.apiKey, free.tenantId, both!, { merge: false })
    t.match(
      done,
      { status: 'failed', error: { code: 'QUOTA_EXCEEDED' } },
      'the sessions are over the free plan, found as the records are written',
    )
    t.same(
      await storedKeys(h, `tenants/${free.tenantId}/projects/`),
      [held.blobKey],
      "the restore's bytes are gone; the held one stays",
    )
    await files.release(free.tenantId, [held])
    t.same(await storedKeys(h, `tenants/${free.tenantId}/projects/`), [], 'let go of, it goes too')
  },
)
