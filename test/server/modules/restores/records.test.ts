// A restore checks every record as the API would accept it, in its first pass: sizes and digests
// of every blob against every record that names it (history too), the plan's bounds on files for
// every version, ids and keys each once, and nothing the database would refuse (NUL, unpaired
// surrogates, integers out of range, times it reads otherwise), and LLM settings as PATCH
// /tenant/settings/llm takes them. Each refusal writes nothing, and validate=true refuses the same.
import { createHash } from 'node:crypto'
import t, { type Test } from 'tap'
import { testApp, type Caller } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { goneFrom, portability, storedKeys, tenantState } from '../../../helpers/portability.js'
import { fillTenant } from '../../../helpers/tenant-data.js'
import { rawZip, unzipRaw } from '../../../helpers/zip.js'
import { repeatFinder, type Row } from '../../../../server/modules/restores/records.js'
import type { ArchiveEntry } from '../../../../server/modules/restores/archive.js'

const MiB = 1024 * 1024
const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const p = portability(h)

const source = await h.tenant('enterprise')
const data = await fillTenant(source.call, llm)
const good = await unzipRaw((await p.exported(source.call, source.tenantId)).archive!)
const [atlas, beacon] = data.projectIds as [string, string]

/* eslint-disable @typescript-eslint/no-explicit-any -- records of an archive, edited as JSON */
type Edit = (value: any) => unknown
/** An archive with some of its JSON entries edited (and entries added or left out). */
function edited(
  archive: Record<string, Buffer>,
  changes: Record<string, Edit>,
  o: { add?: Record<string, Buffer>; drop?: string[] } = {},
): Buffer {
  for (const name of Object.keys(changes)) if (!archive[name]) throw new Error(`no entry ${name}`)
  const kept = Object.entries(archive).filter(([name]) => !o.drop?.includes(name))
  return rawZip([
    ...kept.map(([name, bytes]) => ({
      name,
      data: changes[name] ? Buffer.from(JSON.stringify(changes[name](JSON.parse(bytes.toString('utf8'))))) : bytes,
    })),
    ...Object.entries(o.add ?? {}).map(([name, bytes]) => ({ name, data: bytes })),
  ])
}
/** Each record of a list changed by `f` (its index given). */
const each = (f: (r: any, i: number) => any) => (list: any[]) => list.map((r, i) => f({ ...r }, i))
/** The good archive with the agent changed by `f`, alike in the list of agents and in its own entry. */
const agentEdited = (f: (agent: any) => unknown) =>
  edited(good, { 'agents.json': each(f), [`agents/${data.agentId}.json`]: f })
/* eslint-enable @typescript-eslint/no-explicit-any */

const target = await h.tenant('enterprise')
await target.call('POST', '/api/v1/projects', { name: 'Mine' })

const state = (tenantId: string) => tenantState(h, tenantId)

/** Restores an archive into a tenant, validating first: both refused alike, in the first pass, and nothing written. */
async function refused(
  t: Test,
  into: { tenantId: string; apiKey: string; call: Caller },
  archive: Buffer,
  code: string,
  details: Record<string, unknown> = {},
) {
  const before = await state(into.tenantId)
  for (const options of [{ validate: true }, { merge: false }]) {
    const done = await p.restored(into.call, into.apiKey, into.tenantId, archive, options)
    t.equal(done.status, 'failed', `${JSON.stringify(options)}: refused`)
    t.equal(done.error?.code, code, done.error?.message)
    t.match(done.error?.details, details)
  }
  t.same(await state(into.tenantId), before, 'nothing was written')
  t.same(await goneFrom(h, `tenants/${into.tenantId}/restores/`), [], 'and the uploads are gone')
  const retried = await h.platform.db.system(
    (sql) =>
      sql`select count(*)::int as n from jobs where tenant_id = ${into.tenantId} and queue = 'restores.run' and attempts > 1`,
  )
  t.equal(retried[0]!.n, 0, 'never tried again: it cannot succeed')
}

const oldSha = createHash('sha256').update(data.oldContent).digest('hex')
const cases: { name: string; archive: () => Buffer; code: string; details?: Record<string, unknown> }[] = [
  {
    name: 'a version record stating another size than its history blob holds',
    archive: () =>
      edited(good, {
        [`projects/${atlas}/version-files/00001.json`]: each((f) => (f.sha256 === oldSha ? { ...f, size: 5 } : f)),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: `projects/${atlas}/version-files/00001.json` },
  },
  {
    name: 'history bytes no version names',
    archive: () =>
      edited(good, {}, { add: { [`projects/${atlas}/history/${'a'.repeat(64)}`]: Buffer.from('stowaway') } }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: `projects/${atlas}/history/${'a'.repeat(64)}` },
  },
  {
    name: 'a version’s file naming a version the project does not have',
    archive: () =>
      edited(good, {
        [`projects/${atlas}/version-files/00001.json`]: each((f, i) => (i === 0 ? { ...f, version: 999 } : f)),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { field: 'version' },
  },
  {
    name: 'a version’s file at a path the API refuses',
    archive: () =>
      edited(good, {
        [`projects/${atlas}/version-files/00001.json`]: each((f, i) => (i === 0 ? { ...f, path: '../../escape' } : f)),
      }),
    code: 'ARCHIVE_UNSAFE_PATH',
  },
  {
    name: 'a content type a header cannot carry',
    archive: () =>
      edited(good, {
        [`projects/${atlas}/version-files/00001.json`]: each((f, i) =>
          i === 0 ? { ...f, content_type: 'text/plain\r\nX-Evil: 1' } : f,
        ),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { field: 'content_type' },
  },
  {
    name: 'two messages with one id',
    archive: () => edited(good, { 'chat/messages/00001.json': (list) => [list[0], ...list] }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'chat/messages/00001.json', field: 'id' },
  },
  {
    name: 'a version id that a version of another project has',
    archive: () => {
      const theirs = JSON.parse(good[`projects/${atlas}/versions/00001.json`]!.toString())[0].id
      return edited(good, {
        [`projects/${beacon}/versions/00001.json`]: each((v, i) => (i === 0 ? { ...v, id: theirs } : v)),
      })
    },
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'project_versions', field: 'id' },
  },
  {
    name: 'two versions of one project with one number',
    archive: () =>
      edited(good, { [`projects/${atlas}/versions/00001.json`]: each((v, i) => (i === 1 ? { ...v, version: 1 } : v)) }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'project_versions', field: 'version' },
  },
  {
    name: 'two runs with one id',
    archive: () => edited(good, { [`agents/${data.agentId}/runs/00001.json`]: (list) => [...list, list[0]] }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'agent_runs', id: data.runId },
  },
  {
    name: 'two projects with one id',
    archive: () => edited(good, { 'projects/index.json': (list) => [...list, list[0]] }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'projects', field: 'id' },
  },
  {
    name: 'a NUL in a message',
    archive: () =>
      edited(good, {
        'chat/messages/00001.json': each((m, i) => (i === 0 ? { ...m, content: 'hello\u0000world' } : m)),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'chat_messages', field: 'content' },
  },
  {
    name: 'an unpaired surrogate in a run’s JSON',
    archive: () =>
      edited(good, {
        [`agents/${data.agentId}/runs/00001.json`]: each((r) => ({ ...r, steps: [{ note: 'half a pair: \ud800' }] })),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'agent_runs', field: 'steps' },
  },
  {
    name: 'a NUL in a key of an agent’s JSON',
    archive: () => agentEdited((a) => ({ ...a, config: { ...a.config, ['bad\u0000key']: 1 } })),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'agents', field: 'config' },
  },
  {
    name: 'a number the integer column cannot hold',
    archive: () =>
      edited(good, {
        [`projects/${atlas}/versions/00001.json`]: each((v, i) => (i === 0 ? { ...v, version: 2 ** 40 } : v)),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'project_versions', field: 'version' },
  },
  {
    name: 'a time PostgreSQL does not read as written',
    archive: () => edited(good, { 'chat/sessions.json': each((s) => ({ ...s, created_at: '0000-01-01T00:00:00Z' })) }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'chat_sessions', field: 'created_at' },
  },
  {
    name: 'an agent name longer than the column takes',
    archive: () => agentEdited((a) => ({ ...a, name: 'n'.repeat(201) })),
    code: 'ARCHIVE_INVALID_DATA',
    details: { kind: 'agents', field: 'name' },
  },
  {
    name: 'LLM settings whose base URL is the cloud metadata address',
    archive: () =>
      edited(good, {
        'settings/preferences.json': (v) => ({
          llm: { ...v.llm, base_url: 'http://169.254.169.254/latest/meta-data/' },
        }),
      }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'settings/preferences.json', field: 'base_url', reason: 'outbound_refused' },
  },
  {
    name: 'LLM settings naming a provider the API does not take',
    archive: () => edited(good, { 'settings/preferences.json': (v) => ({ llm: { ...v.llm, provider: 'evil' } }) }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'settings/preferences.json', field: 'provider' },
  },
  {
    name: 'LLM settings with a temperature the API does not take',
    archive: () => edited(good, { 'settings/preferences.json': (v) => ({ llm: { ...v.llm, temperature: 7 } }) }),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'settings/preferences.json', field: 'temperature' },
  },
]

for (const c of cases)
  t.test(`${c.name}: ${c.code} in the first pass, nothing written`, (t) =>
    refused(t, target, c.archive(), c.code, c.details ?? {}),
  )

t.test('history is held to the plan’s bounds as the API holds it, and to the sizes its bytes have', async (t) => {
  const big = await h.tenant('enterprise')
  const project = async (name: string, puts: [string, Buffer][], deletes: string[] = []) => {
    const id = (await big.call('POST', '/api/v1/projects', { name })).body.data.id as string
    for (const [path, bytes] of puts)
      t.ok(
        (
          await big.call('PUT', `/api/v1/projects/${id}/files/${path}`, bytes, {
            'content-type': 'application/octet-stream',
          })
        ).status < 300,
        `PUT ${path}`,
      )
    for (const path of deletes) t.equal((await big.call('DELETE', `/api/v1/projects/${id}/files/${path}`)).status, 204)
    return id
  }
  // An older version held a 5 MiB file (a free file may hold 1 MiB) ...
  const large = await project('Large history', [
    ['large.bin', Buffer.alloc(5 * MiB, 1)],
    ['large.bin', Buffer.from('small')],
  ])
  // ... and another, 11 files of 1 MiB (a free project may hold 10 MiB); neither is current.
  const parts = Array.from({ length: 11 }, (_, i) => `part-${String(i).padStart(2, '0')}.bin`)
  const wide = await project(
    'Wide history',
    parts.map((path, i) => [path, Buffer.alloc(MiB, i + 2)]),
    parts,
  )
  const archiveOf = async (keep: string) => {
    const all = await unzipRaw((await p.exported(big.call, big.tenantId, { include: ['projects'] })).archive!)
    const other = keep === large ? wide : large
    return edited(
      all,
      { 'projects/index.json': (list) => list.filter((x: { id: string }) => x.id !== other) },
      { drop: Object.keys(all).filter((n) => n.startsWith(`projects/${other}/`)) },
    )
  }
  const free = await h.tenant('free')
  const sha = createHash('sha256')
    .update(Buffer.alloc(5 * MiB, 1))
    .digest('hex')
  const largeArchive = await archiveOf(large)
  const largeEntries = await unzipRaw(largeArchive)
  await t.test('a 5 MiB history file stated as 5 bytes', (t) =>
    refused(
      t,
      free,
      edited(largeEntries, {
        [`projects/${large}/version-files/00001.json`]: each((f) => (f.sha256 === sha ? { ...f, size: 5 } : f)),
      }),
      'ARCHIVE_INVALID_DATA',
      {
        entry: `projects/${large}/version-files/00001.json`,
      },
    ),
  )
  await t.test('a 5 MiB history file as it is: over the free plan’s file size', (t) =>
    refused(t, free, largeArchive, 'QUOTA_EXCEEDED', { limit: MiB, requested: 5 * MiB }),
  )
  await t.test('a version of 11 MiB of files: over the free plan’s project bytes', async (t) =>
    refused(t, free, await archiveOf(wide), 'QUOTA_EXCEEDED', { limit: 10 * MiB }),
  )
})

t.test('bytes already stored under a digest are never written over by an entry of another size', async (t) => {
  // Into the tenant it came from: the history blob's key is the one its own version uses.
  const key = (await storedKeys(h, `tenants/${source.tenantId}/projects/${atlas}/files/`)).find((k) =>
    k.endsWith(oldSha),
  )!
  t.ok(key, 'the tenant stores the old bytes')
  const forged = edited(
    good,
    { [`projects/${atlas}/version-files/00001.json`]: each((f) => (f.sha256 === oldSha ? { ...f, size: 11 } : f)) },
    {
      add: { [`projects/${atlas}/history/${oldSha}`]: Buffer.from('forged byte') },
      drop: [`projects/${atlas}/history/${oldSha}`],
    },
  )
  const done = await p.restored(source.call, source.apiKey, source.tenantId, forged, { merge: false })
  t.equal(done.status, 'failed')
  t.equal(done.error.code, 'ARCHIVE_CORRUPT')
  t.ok(
    (await storedKeys(h, `tenants/${source.tenantId}/projects/${atlas}/files/`)).includes(key),
    'the tenant’s own bytes are still there',
  )
  // The first change of files wrote the old content.
  const versions = (await source.call('GET', `/api/v1/projects/${atlas}/versions`)).body.data as {
    id: string
    version: number
    change: string
  }[]
  const first = versions.filter((v) => v.change === 'files').sort((a, b) => a.version - b.version)[0]!
  t.equal((await source.call('POST', `/api/v1/projects/${atlas}/versions/${first.id}/restore`)).status, 200)
  t.equal(
    (await source.call('GET', `/api/v1/projects/${atlas}/files/docs/readme.md`)).raw.toString('utf8'),
    data.oldContent,
    'and an old version still comes back with them',
  )
})

t.test(
  'a repeated id is found across entries when the ids do not fit in memory: the entries are read again in passes',
  async (t) => {
    const entry = (name: string) => ({ name }) as ArchiveEntry
    const pages: Record<string, Row[]> = {}
    for (let e = 0; e < 10; e++) pages[`runs/${e}`] = Array.from({ length: 10 }, (_, i) => ({ id: `run-${e}-${i}` }))
    const read = async (e: ArchiveEntry) => pages[e.name]!
    const feed = async (budget: number) => {
      const finder = repeatFinder(read, budget)
      for (const name of Object.keys(pages)) finder.add(entry(name), 'agent_runs', pages[name]!)
      await finder.finish()
    }
    await t.resolves(feed(8), 'no id repeats: every pass finds none')
    pages['runs/7']![3] = { id: 'run-2-5' }
    await t.rejects(
      feed(8),
      { code: 'ARCHIVE_INVALID_DATA', details: { kind: 'agent_runs', id: 'run-2-5' } },
      'found in its pass, with 100 ids and a budget of 8',
    )
    await t.rejects(
      feed(1000),
      { code: 'ARCHIVE_INVALID_DATA', details: { id: 'run-2-5' } },
      'and in memory when they fit',
    )
  },
)
