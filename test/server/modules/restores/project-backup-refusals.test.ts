// Project backups a restore refuses: tampered or broken ones (each with its code, before anything is
// written), a newer format version, options that do not apply to the archive or name a project the
// tenant does not have, and restores over the plan's bounds on files. The tenant's records and
// stored objects are as they were, and the upload is gone.
import t, { type Test } from 'tap'
import { v7 } from 'uuid'
import { testApp } from '../../../helpers/app.js'
import { isError } from '../../../helpers/answers.js'
import { goneFrom, portability, projectWithFiles, storedKeys, tenantState } from '../../../helpers/portability.js'
import { rebuiltZip, unzipRaw, type RawEntry } from '../../../helpers/zip.js'

const h = await testApp(t, {}, { jobs: { pollMs: 50 } })
const p = portability(h)

// A project with three files and some history, backed up with its history.
const source = await h.tenant('enterprise')
const FILES = { 'a.txt': 'alpha alpha alpha\n', 'b.txt': 'bravo bravo bravo\n', 'c/d.txt': 'delta delta delta\n' }
const project = await projectWithFiles(source.call, 'Source', FILES)
const { archive: good } = await p.backedUp(source.call, project.id, { includeHistory: true, includeAgents: true })
const goodEntries = await unzipRaw(good)

// The tenant restored into holds a project of its own, which must stay as it is.
const target = await h.tenant('enterprise')
const own = await projectWithFiles(target.call, 'Mine', { 'keep.txt': 'keep me' })

/** The good backup's entries with some replaced or added (stored, as written byte by byte). */
const rebuilt = (change: (entries: RawEntry[]) => RawEntry[]) => rebuiltZip(goodEntries, change)
/** The good backup with one JSON entry's value changed. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each case reaches into its own entry's shape
const withJson = (name: string, change: (value: any) => unknown) =>
  rebuilt((e) =>
    e.map((x) =>
      x.name === name ? { ...x, data: Buffer.from(JSON.stringify(change(JSON.parse(x.data!.toString())))) } : x,
    ),
  )

/** Restores `archive` into `tn` and checks it failed with `code` (and `details`), leaving everything as it was. */
async function refused(
  t: Test,
  tn: typeof target,
  archive: Buffer,
  options: unknown,
  code: string,
  details?: Record<string, unknown>,
) {
  const before = await tenantState(h, tn.tenantId)
  const done = await p.restored(tn.call, tn.apiKey, tn.tenantId, archive, options)
  t.equal(done.status, 'failed')
  t.equal(done.error?.code, code, done.error?.message)
  if (details) t.match(done.error.details, details)
  t.same(await tenantState(h, tn.tenantId), before, 'the records and objects are as they were')
  t.same(await goneFrom(h, `tenants/${tn.tenantId}/restores/`), [], 'and the upload is gone')
  return done
}

const cases: { name: string; archive: () => Buffer; code: string; details?: Record<string, unknown> }[] = [
  {
    name: 'a file’s bytes changed (its CRC-32 no longer matches)',
    archive: () => {
      const copy = Buffer.from(good)
      const at = copy.indexOf(Buffer.from(FILES['b.txt']))
      copy[at] = copy[at]! ^ 0x20
      return copy
    },
    code: 'ARCHIVE_CORRUPT',
    details: { rule: 'crc' },
  },
  {
    name: 'a file’s bytes replaced, with a CRC-32 of their own (its checksum in files.json differs)',
    archive: () =>
      rebuilt((e) => e.map((x) => (x.name === 'files/b.txt' ? { ...x, data: Buffer.from('BRAVO bravo bravo\n') } : x))),
    code: 'ARCHIVE_CORRUPT',
    details: { rule: 'sha256', entry: 'files/b.txt' },
  },
  {
    name: 'a newer format version',
    archive: () => withJson('manifest.json', (m) => ({ ...m, formatVersion: 3 })),
    code: 'ARCHIVE_VERSION_UNSUPPORTED',
    details: { formatVersion: 3, supported: 2 },
  },
  {
    name: 'another format named in manifest.json',
    archive: () => withJson('manifest.json', (m) => ({ ...m, format: 'something.else' })),
    code: 'ARCHIVE_VERSION_UNSUPPORTED',
    details: { format: 'something.else' },
  },
  {
    name: 'an entry a project backup does not have',
    archive: () => rebuilt((e) => [...e, { name: 'install.sh', data: Buffer.from('#!/bin/sh\n') }]),
    code: 'ARCHIVE_UNKNOWN_ENTRY',
    details: { entry: 'install.sh', format: 'project-backup' },
  },
  {
    name: 'zip slip under files/',
    archive: () => rebuilt((e) => [...e, { name: 'files/../../tmp/evil', data: Buffer.from('x') }]),
    code: 'ARCHIVE_UNSAFE_PATH',
    details: { rule: "'..' segment" },
  },
  {
    name: 'a file files.json does not name',
    archive: () => rebuilt((e) => [...e, { name: 'files/extra.txt', data: Buffer.from('x') }]),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'files/extra.txt' },
  },
  {
    name: 'a file files.json names whose bytes are missing',
    archive: () => rebuilt((e) => e.filter((x) => x.name !== 'files/a.txt')),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'files.json', path: 'a.txt' },
  },
  {
    name: 'a field files.json does not have',
    archive: () => withJson('files.json', (l) => l.map((f: object) => ({ ...f, blobKey: 'tenants/other/x' }))),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'files.json', field: 'blobKey' },
  },
  {
    name: 'project.json of another project than manifest.json names',
    archive: () => withJson('project.json', (r) => ({ ...r, id: v7() })),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'project.json' },
  },
  {
    name: 'versions.json without manifest.json saying the backup holds the history',
    archive: () => withJson('manifest.json', (m) => ({ ...m, includes: { ...m.includes, history: false } })),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'versions.json' },
  },
]

for (const c of cases)
  t.test(`${c.name}: ${c.code}, nothing written`, (t) => refused(t, target, c.archive(), {}, c.code, c.details))

t.test(
  'options that do not apply, or name a project the tenant lacks, are refused before anything is queued',
  async (t) => {
    const theirs = (await source.call('POST', '/api/v1/projects', { name: 'Not yours' })).body.data.id
    const before = await tenantState(h, target.tenantId)
    const restores = async () =>
      (await target.call('GET', `/api/v1/platform/tenants/${target.tenantId}/restore?limit=200`)).body.data.length
    const queued = await restores()
    const answers: [unknown, number, string, string][] = [
      [{ asNewProject: true, merge: true }, 400, 'VALIDATION_ERROR', 'options.merge'],
      [{ asNewProject: true, projectId: own.id }, 400, 'VALIDATION_ERROR', 'options.projectId'],
      [{ projectId: 'not-a-project' }, 400, 'VALIDATION_ERROR', 'options.projectId'],
      [{ asNewProject: 'yes' }, 400, 'VALIDATION_ERROR', 'options.asNewProject'],
      [{ projectId: theirs }, 404, 'RESOURCE_NOT_FOUND', ''],
      [{ projectId: v7() }, 404, 'RESOURCE_NOT_FOUND', ''],
    ]
    const found: unknown[] = []
    for (const [options, status, code, field] of answers) {
      const r = await p.upload(target.apiKey, target.tenantId, good, options)
      isError(t, r, status, code, JSON.stringify(options))
      if (field) t.equal(r.body.error.details.errors[0].field, field)
      else found.push({ ...r.body.error.details, id: null })
    }
    t.same(found[0], found[1], 'another tenant’s project and nobody’s are alike')
    const unknown = await p.upload(target.apiKey, target.tenantId, good, { force: true })
    t.match(unknown.body.error.details.errors[0], {
      field: 'options.force',
      message: 'is not an option (merge, validate, projectId, asNewProject)',
    })
    t.equal(await restores(), queued, 'none queued')
    t.same(await tenantState(h, target.tenantId), before)
    t.same(await storedKeys(h, `tenants/${target.tenantId}/restores/`), [])
  },
)

t.test('a tenant export given a project backup’s options fails VALIDATION_ERROR naming the option', async (t) => {
  const { archive } = await p.exported(target.call, target.tenantId, { include: ['projects'] })
  for (const [options, field] of [
    [{ projectId: own.id }, 'options.projectId'],
    [{ asNewProject: true }, 'options.asNewProject'],
  ] as const) {
    const done = await refused(t, target, archive!, options, 'VALIDATION_ERROR')
    t.equal(done.error.details.errors[0].field, field)
    t.match(done.error.message, /applies to a project backup; this archive is a tenant export/)
  }
})

t.test('a file over the plan’s bound on one file: QUOTA_EXCEEDED, nothing written', async (t) => {
  const big = (await source.call('POST', '/api/v1/projects', { name: 'Big' })).body.data
  const bytes = Buffer.alloc(1536 * 1024, 'x')
  t.equal(
    (
      await source.call('PUT', `/api/v1/projects/${big.id}/files/big.bin`, bytes, {
        'content-type': 'application/octet-stream',
      })
    ).status,
    201,
  )
  const { archive } = await p.backedUp(source.call, big.id)
  const free = await h.tenant('free')
  await refused(t, free, archive, {}, 'QUOTA_EXCEEDED', {
    limit: 1024 * 1024,
    requested: bytes.length,
    path: 'big.bin',
  })
})

t.test(
  'merge that would take a project over the plan’s bound on its files: QUOTA_EXCEEDED, rolled back, its bytes gone',
  async (t) => {
    const free = await h.tenant('free')
    const full = (await free.call('POST', '/api/v1/projects', { name: 'Nearly full' })).body.data
    const MB = 1_000_000
    for (let i = 0; i < 10; i++) {
      const r = await free.call('PUT', `/api/v1/projects/${full.id}/files/part-${i}.bin`, Buffer.alloc(MB, i), {
        'content-type': 'application/octet-stream',
      })
      t.equal(r.status, 201)
    }
    const more = (await source.call('POST', '/api/v1/projects', { name: 'One more' })).body.data
    await source.call('PUT', `/api/v1/projects/${more.id}/files/more.bin`, Buffer.alloc(MB, 'm'), {
      'content-type': 'application/octet-stream',
    })
    const { archive } = await p.backedUp(source.call, more.id)
    await refused(t, free, archive, { projectId: full.id, merge: true }, 'QUOTA_EXCEEDED', {
      limit: 10 * 1024 * 1024,
      requested: 11 * MB,
      project: full.id,
    })
  },
)

t.test('the good backup itself restores (the cases above broke only what they name)', async (t) => {
  const done = await p.restored(target.call, target.apiKey, target.tenantId, good)
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report.project, { into: 'new', created: true })
})
