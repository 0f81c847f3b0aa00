// A project backup (POST /projects/{projectId}/backup, downloaded from its link) restored through
// the restore endpoint: into the project it was made of after that changed (merge=false and
// merge=true), into another project, as a new project, into another tenant, on a plan that keeps
// fewer versions; validate only; and a version 1 backup.
import { createHash } from 'node:crypto'
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { goneFrom, portability, tenantState } from '../../../helpers/portability.js'
import { fillTenant } from '../../../helpers/tenant-data.js'
import { rawZip, unzipRaw, zipDirectory } from '../../../helpers/zip.js'
import { isUuid } from '../../../../common/ids.js'
import { derivedId, restoreIdKey } from '../../../../server/modules/exports/format.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const p = portability(h)
const KEY = restoreIdKey(h.platform.secrets)

// A project with files, a history (one file changed, so an older version holds other bytes) and an
// agent that ran on it, backed up with its history and agents.
const source = await h.tenant('enterprise')
const data = await fillTenant(source.call, llm)
const pid = data.projectIds[0]!
const { backup, archive } = await p.backedUp(source.call, pid, { includeHistory: true, includeAgents: true })
const entries = await unzipRaw(archive)
const parsed = (name: string) => JSON.parse(entries[name]!.toString('utf8'))
const backedUpProject = parsed('project.json') as { name: string; description: string; version: number }
// As versionsOf reads them.
const backedUpVersions = (
  parsed('versions.json') as {
    id: string
    version: number
    name: string
    change: string
    restored_from: number | null
  }[]
).map(({ id, version, name, change, restored_from }) => ({ id, version, name, change, restored_from }))
const backedUpFiles = parsed('files.json') as { path: string; size: number; sha256: string; contentType: string }[]

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex')

const filesOf = (tenantId: string, projectId: string) =>
  h.platform.db.system(
    (sql) => sql<{ path: string; size: number; sha256: string; contentType: string }[]>`
      select path, size::float8 as size, sha256, content_type as "contentType" from project_files
       where tenant_id = ${tenantId} and project_id = ${projectId} order by path`,
  )
const versionsOf = (tenantId: string, projectId: string) =>
  h.platform.db.system(
    (sql) => sql<{ id: string; version: number; name: string; change: string; restored_from: number | null }[]>`
      select id, version, name, change, restored_from from project_versions
       where tenant_id = ${tenantId} and project_id = ${projectId} order by version`,
  )
const projectOf = async (call: typeof source.call, id: string) =>
  (await call('GET', `/api/v1/projects/${id}`)).body.data
const text = async (call: typeof source.call, projectId: string, path: string) =>
  (await call('GET', `/api/v1/projects/${projectId}/files/${path}`)).raw.toString('utf8')
const put = (call: typeof source.call, projectId: string, path: string, content: string | Buffer) =>
  call('PUT', `/api/v1/projects/${projectId}/files/${path}`, content, { 'content-type': 'text/plain' })

t.test('the backup is the zip its result describes: checksum, format, and file bytes stored as they are', async (t) => {
  t.equal(backup.size, archive.length)
  t.equal(backup.checksum, `sha256:${sha256(archive)}`)
  t.match(parsed('manifest.json'), {
    format: 'atrium.project-backup',
    formatVersion: 2,
    tenantId: source.tenantId,
    projectId: pid,
    includes: { history: true, agents: true, files: true },
  })
  t.same(
    backedUpFiles.map((f) => f.path),
    Object.keys(data.files).sort(),
  )
  const stored = (await zipDirectory(archive)).filter((e) => e.name.startsWith('files/') || e.name === 'versions.json')
  t.ok(
    stored.every((e) => e.method === 0),
    'file bytes and the history are stored, within the ratio a restore allows',
  )
})

t.test(
  'into the project it was made of, after it changed (merge=false): fields and files come back as a new version',
  async (t) => {
    t.equal((await source.call('PATCH', `/api/v1/projects/${pid}`, { name: 'Changed', description: 'x' })).status, 200)
    t.equal((await put(source.call, pid, 'src/main.ts', 'changed\n')).status, 200)
    t.equal((await put(source.call, pid, 'new.txt', 'made after the backup')).status, 201)
    t.equal((await source.call('DELETE', `/api/v1/projects/${pid}/files/data/blob.bin`)).status, 204)
    t.equal((await source.call('PATCH', `/api/v1/agents/${data.agentId}`, { name: 'Renamed' })).status, 200)
    const history = await versionsOf(source.tenantId, pid)

    const done = await p.restored(source.call, source.apiKey, source.tenantId, archive)
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    t.match(done, { merge: false, projectId: null, asNewProject: false })
    t.match(done.report, {
      archive: {
        format: 'atrium.project-backup',
        formatVersion: 2,
        tenantId: source.tenantId,
        projectId: pid,
        includes: { history: true, agents: true, files: true },
      },
      project: { id: pid, into: 'source', created: false },
      counts: {
        projects: { inArchive: 1, restored: 1, conflicts: 0 },
        project_files: { inArchive: 3, restored: 3 },
        project_versions: { inArchive: backedUpVersions.length, restored: 0, skipped: backedUpVersions.length },
        agents: { inArchive: 1, restored: 1, conflicts: 0 },
      },
      files: { inArchive: 3 },
      replaced: { project_files: 1 },
      projectVersion: history.at(-1)!.version + 1,
    })
    t.equal(done.report.files.stored + done.report.files.alreadyPresent, 3)

    t.match(await projectOf(source.call, pid), { name: backedUpProject.name, description: backedUpProject.description })
    t.same(await filesOf(source.tenantId, pid), backedUpFiles, 'the backup’s files, and only they')
    t.equal(await text(source.call, pid, 'src/main.ts'), data.files['src/main.ts'])
    const after = await versionsOf(source.tenantId, pid)
    t.same(after.slice(0, -1), history, 'the history is kept')
    t.match(after.at(-1), {
      version: history.at(-1)!.version + 1,
      change: 'restored',
      restored_from: backedUpProject.version,
    })
    t.equal((await source.call('GET', `/api/v1/agents/${data.agentId}`)).body.data.name, 'Helper', 'the agent too')
    t.same(await goneFrom(h, `tenants/${source.tenantId}/restores/`), [], 'the upload is removed')
  },
)

t.test(
  'merge=true into it: its fields stay, the files it lacks come back, the paths it has are conflicts',
  async (t) => {
    await source.call('PATCH', `/api/v1/projects/${pid}`, { name: 'Kept name' })
    await put(source.call, pid, 'src/main.ts', 'mine\n')
    await source.call('DELETE', `/api/v1/projects/${pid}/files/docs/readme.md`)
    const history = await versionsOf(source.tenantId, pid)

    const done = await p.restored(source.call, source.apiKey, source.tenantId, archive, { merge: true })
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    t.match(done.report, {
      merge: true,
      project: { id: pid, into: 'source', created: false },
      counts: {
        projects: { restored: 0, conflicts: 1 },
        project_files: { inArchive: 3, restored: 1, conflicts: 2 },
        agents: { restored: 0, conflicts: 1 },
      },
    })
    t.same(
      done.report.conflicts
        .filter((c: { kind: string }) => c.kind === 'project_files')
        .map((c: { id: string }) => c.id)
        .sort(),
      ['data/blob.bin', 'src/main.ts'],
    )
    t.equal((await projectOf(source.call, pid)).name, 'Kept name')
    t.equal(await text(source.call, pid, 'src/main.ts'), 'mine\n', 'a path it has keeps its bytes')
    t.equal(await text(source.call, pid, 'docs/readme.md'), data.files['docs/readme.md'], 'a path it lacks is back')
    const after = await versionsOf(source.tenantId, pid)
    t.same(after.slice(0, -1), history)
    t.match(after.at(-1), { change: 'restored', restored_from: null })

    const again = await p.restored(source.call, source.apiKey, source.tenantId, archive, { merge: true })
    t.match(again.report.counts.project_files, { restored: 0, conflicts: 3 })
    t.same(await versionsOf(source.tenantId, pid), after, 'nothing added: no version')
  },
)

t.test('into another project of the tenant (options.projectId): it takes the backup’s fields and files', async (t) => {
  const other = (await source.call('POST', '/api/v1/projects', { name: 'Other' })).body.data
  await put(source.call, other.id, 'only-mine.txt', 'only in the other project')
  const sourceFiles = await filesOf(source.tenantId, pid)

  const done = await p.restored(source.call, source.apiKey, source.tenantId, archive, { projectId: other.id })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done, { projectId: other.id, asNewProject: false })
  t.match(done.report, {
    project: { id: other.id, into: 'projectId', created: false },
    counts: { project_files: { restored: 3 } },
    replaced: { project_files: 1 },
  })
  t.match(await projectOf(source.call, other.id), { id: other.id, name: backedUpProject.name })
  t.same(await filesOf(source.tenantId, other.id), backedUpFiles)
  t.equal(await text(source.call, other.id, 'docs/readme.md'), data.files['docs/readme.md'])
  t.match(await versionsOf(source.tenantId, other.id), [
    { version: 1, change: 'created' },
    { version: 2, change: 'files' },
    { version: 3, change: 'restored', restored_from: null },
  ])
  t.same(await filesOf(source.tenantId, pid), sourceFiles, 'the project the backup was made of is as it was')
})

t.test('as a new project (asNewProject): a project of its own, with the backup’s history', async (t) => {
  const made: string[] = []
  for (let i = 0; i < 2; i++) {
    const done = await p.restored(source.call, source.apiKey, source.tenantId, archive, { asNewProject: true })
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    t.ok(isUuid(done.projectId), 'the new project’s id is in the restore’s record from the start')
    t.match(done.report, {
      project: { id: done.projectId, into: 'asNewProject', created: true },
      counts: {
        projects: { restored: 1 },
        project_versions: { restored: backedUpVersions.length, skipped: 0 },
        project_files: { restored: 3 },
      },
      projectVersion: backedUpProject.version + 1,
    })
    made.push(done.projectId)
    t.match(await projectOf(source.call, done.projectId), {
      name: backedUpProject.name,
      version: backedUpProject.version + 1,
    })
    t.same(await filesOf(source.tenantId, done.projectId), backedUpFiles)
    t.equal(await text(source.call, done.projectId, 'data/blob.bin'), data.files['data/blob.bin'])
    const versions = await versionsOf(source.tenantId, done.projectId)
    t.same(
      versions.slice(0, -1),
      backedUpVersions.map((v) => ({ ...v, id: derivedId(KEY, done.projectId, v.id) })),
      'the backup’s versions, under ids derived for the new project',
    )
    t.match(versions.at(-1), {
      version: backedUpProject.version + 1,
      change: 'restored',
      restored_from: backedUpProject.version,
    })
  }
  t.not(made[0], made[1], 'twice: two projects')
  t.not(made[0], pid)
})

t.test('into another tenant: a new project and agent under ids derived for it; again, the same project', async (t) => {
  const other = await h.tenant('enterprise')
  const before = await tenantState(h, source.tenantId)
  const done = await p.restored(other.call, other.apiKey, other.tenantId, archive)
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  const id = derivedId(KEY, other.tenantId, pid)
  t.match(done.report, {
    archive: { tenantId: source.tenantId, projectId: pid },
    project: { id, into: 'new', created: true },
    counts: { agents: { restored: 1 }, project_versions: { restored: backedUpVersions.length } },
  })
  t.match(await projectOf(other.call, id), { name: backedUpProject.name })
  t.same(await filesOf(other.tenantId, id), backedUpFiles)
  t.equal(await text(other.call, id, 'src/main.ts'), data.files['src/main.ts'])
  t.match((await other.call('GET', `/api/v1/agents/${derivedId(KEY, other.tenantId, data.agentId)}`)).body.data, {
    name: 'Helper',
    systemPrompt: 'You are careful.',
  })
  t.same(
    (await versionsOf(other.tenantId, id)).slice(0, -1).map((v) => v.id),
    backedUpVersions.map((v) => derivedId(KEY, id, v.id)),
  )
  t.equal((await source.call('GET', `/api/v1/projects/${id}`)).status, 404, 'nothing of it in the tenant it came from')
  t.same(await tenantState(h, source.tenantId), before, 'which is as it was')

  await other.call('PATCH', `/api/v1/projects/${id}`, { name: 'Changed there' })
  const again = await p.restored(other.call, other.apiKey, other.tenantId, archive)
  t.equal(again.status, 'completed', JSON.stringify(again.error))
  t.match(again.report.project, { id, into: 'earlierRestore', created: false })
  t.equal((await projectOf(other.call, id)).name, backedUpProject.name)
  const projects = (await other.call('GET', '/api/v1/projects')).body.data
  t.same(
    projects.map((p: { id: string }) => p.id),
    [id],
    'one project: the second restore met the first one’s',
  )
})

t.test('a plan that keeps fewer versions keeps the newest of the backup’s', async (t) => {
  const free = await h.tenant('free')
  const done = await p.restored(free.call, free.apiKey, free.tenantId, archive)
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  const kept = 5 - 1 // the free plan keeps 5 versions; the restore is one
  t.match(done.report.counts.project_versions, {
    inArchive: backedUpVersions.length,
    restored: kept,
    skipped: backedUpVersions.length - kept,
  })
  t.match(done.report.skipped[0], { kind: 'project_versions', reason: /versions the Free plan keeps/ })
  const versions = await versionsOf(free.tenantId, derivedId(KEY, free.tenantId, pid))
  t.same(
    versions.map((v) => v.version),
    [...backedUpVersions.slice(-kept).map((v) => v.version), backedUpProject.version + 1],
  )
})

t.test('validate=true checks the backup and reports what it would do, writing nothing', async (t) => {
  const other = await h.tenant('enterprise')
  const before = await tenantState(h, other.tenantId)
  const done = await p.restored(other.call, other.apiKey, other.tenantId, archive, { validate: true })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report, {
    validateOnly: true,
    project: { id: derivedId(KEY, other.tenantId, pid), into: 'new', created: true },
    counts: { projects: { inArchive: 1 }, project_files: { inArchive: 3 }, agents: { inArchive: 1 } },
    files: { inArchive: 3, stored: 3 },
  })
  t.same(await tenantState(h, other.tenantId), before)
})

t.test('a version 1 backup (no files) restores its fields and leaves the files as they are', async (t) => {
  const v1 = rawZip(
    Object.entries(entries)
      .filter(([name]) => name !== 'files.json' && !name.startsWith('files/'))
      .map(([name, bytes]) => ({
        name,
        data:
          name === 'manifest.json'
            ? Buffer.from(
                JSON.stringify({
                  ...parsed('manifest.json'),
                  formatVersion: 1,
                  includes: { history: true, agents: true },
                }),
              )
            : bytes,
      })),
  )
  await source.call('PATCH', `/api/v1/projects/${pid}`, { name: 'Before the old backup' })
  const files = await filesOf(source.tenantId, pid)
  const done = await p.restored(source.call, source.apiKey, source.tenantId, v1)
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report, {
    archive: { formatVersion: 1 },
    counts: { project_files: { inArchive: 0 } },
    files: { inArchive: 0 },
  })
  t.equal((await projectOf(source.call, pid)).name, backedUpProject.name)
  t.same(await filesOf(source.tenantId, pid), files)
})
