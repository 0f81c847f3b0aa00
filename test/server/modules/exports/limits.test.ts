// Export and restore share one set of limits (server/modules/exports/limits.ts): what Atrium exports
// it can restore, and what it cannot write within them fails EXPORT_TOO_LARGE instead of leaving an
// archive nobody can restore.
import t from 'tap'
import { newId } from '../../../../common/ids.js'
import { agent, project } from '../../../helpers/agents.js'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { portability, storedKeys } from '../../../helpers/portability.js'
import { unzip, zipDirectory } from '../../../helpers/zip.js'
import {
  MAX_JSON_DEPTH,
  MAX_JSON_ENTRY_BYTES,
  PAGE_BYTES,
  withinRatio,
} from '../../../../server/modules/exports/limits.js'

const MiB = 1024 * 1024

const h = await testApp(t, {}, { jobs: { pollMs: 50 } })
const p = portability(h)

/**
 * A tenant with an agent whose runs are given by `runs` (their output and steps, as SQL builds them: text that repeats
 * compresses a thousand times).
 */
async function tenantWithRuns(app: TestApp, runs: { outputChars?: number; stepsDepth?: number }[]) {
  const tn = await app.tenant('enterprise')
  const projectId = await project(tn.call, 'Work')
  const agentId = await agent(tn.call, { autonomyLevel: 'low' }, 'Write.')
  for (const r of runs) {
    await app.platform.db.system(
      (sql) => sql`
        insert into agent_runs (id, tenant_id, agent_id, project_id, goal, status, output, steps, agent_snapshot, started_by, started_at, finished_at)
        values (${newId()}, ${tn.tenantId}, ${agentId}, ${projectId}, 'Write a lot', 'completed',
                repeat('all work and no play makes a dull run ', ${Math.ceil((r.outputChars ?? 10) / 38)}),
                (repeat('[', ${r.stepsDepth ?? 1}) || repeat(']', ${r.stepsDepth ?? 1}))::jsonb,
                ${sql.json({ name: 'Helper', systemPrompt: 'Write.', config: { autonomyLevel: 'low' } })}, ${sql.json({ kind: 'api_key', id: tn.userId, userId: tn.userId })}, now(), now())`,
    )
  }
  return { ...tn, agentId }
}

t.test('run records that expand a thousand times export into pages a restore takes, and restore', async (t) => {
  // Nine runs of about 1 MiB (pages of a few runs, deflated) and one of 20 MiB (a page of its own, stored).
  const source = await tenantWithRuns(h, [
    ...Array.from({ length: 9 }, () => ({ outputChars: MiB })),
    { outputChars: 20 * MiB },
  ])
  const { job, archive } = await p.exported(source.call, source.tenantId, { include: ['projects', 'agents'] })
  t.equal(job.status, 'completed', JSON.stringify(job.error))
  const dir = await zipDirectory(archive!)
  const entries = await unzip(archive!)
  const runPages = dir.filter((e) => e.name.startsWith(`agents/${source.agentId}/runs/`))
  t.ok(runPages.length >= 4, 'the runs are split into pages by their bytes')
  for (const e of runPages) {
    const records = JSON.parse(entries[e.name]!).length
    t.ok(
      e.size <= PAGE_BYTES || records === 1,
      `${e.name}: a page holds at most ${PAGE_BYTES} bytes, or one record larger than that`,
    )
    t.ok(e.size <= MAX_JSON_ENTRY_BYTES, `${e.name}: within the JSON entry limit`)
  }
  for (const e of dir)
    t.ok(withinRatio(e.size, e.compressed), `${e.name} keeps to the ratio rule (${e.size} from ${e.compressed})`)
  const unpacked = dir.reduce((n, e) => n + e.size, 0)
  t.ok(
    withinRatio(unpacked, archive!.length),
    `the archive keeps to it as a whole (${unpacked} from ${archive!.length})`,
  )
  t.ok(
    runPages.some((e) => e.size > 200 * e.compressed),
    'yet its records are deflated where they may be, beyond the ratio within the allowance',
  )

  const target = await h.tenant('enterprise')
  const done = await p.restored(target.call, target.apiKey, target.tenantId, archive!, { merge: false })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report.counts.agent_runs, { inArchive: 10, restored: 10 })
})

t.test(
  'records read in batches (by count and by bytes) are each exported once, in key order, and restore',
  async (t) => {
    const tn = await h.tenant('enterprise')
    const project = (await tn.call('POST', '/api/v1/projects', { name: 'Many' })).body.data
    t.equal(
      (
        await tn.call('PUT', `/api/v1/projects/${project.id}/files/a.txt`, 'same bytes', {
          'content-type': 'text/plain',
        })
      ).status,
      201,
    )
    const session = (await tn.call('POST', '/api/v1/chat/sessions', { title: 'Long' })).body.data
    // More records than one batch reads (READ_BATCH_ROWS): messages by id, a version's files by (version, path).
    await h.platform.db.system(async (sql) => {
      for (let i = 0; i < 1200; i++) {
        await sql`insert into chat_messages (id, tenant_id, session_id, role, content) values (${newId()}, ${tn.tenantId}, ${session.id}, 'user', ${`message ${i}`})`
      }
      const [file] = await sql<
        { blob_key: string; sha256: string; size: number }[]
      >`select blob_key, sha256, size::int as size from project_files where tenant_id = ${tn.tenantId}`
      await sql`insert into project_versions (id, tenant_id, project_id, version, name, description, language, change) values (${newId()}, ${tn.tenantId}, ${project.id}, 99, 'Many', '', '', 'files')`
      for (let i = 0; i < 700; i++) {
        await sql`insert into project_version_files (tenant_id, project_id, version, path, blob_key, size, sha256, content_type)
                values (${tn.tenantId}, ${project.id}, 99, ${`dir/ü-${String(i).padStart(4, '0')}.txt`}, ${file!.blob_key}, ${file!.size}, ${file!.sha256}, 'text/plain')`
      }
    })
    const { job, archive } = await p.exported(tn.call, tn.tenantId, { include: ['projects', 'chat_history'] })
    t.equal(job.status, 'completed', JSON.stringify(job.error))
    const entries = await unzip(archive!)
    const messages = JSON.parse(entries['chat/messages/00001.json']!) as { id: string }[]
    t.equal(messages.length, 1200, 'every message, once')
    t.same(
      messages.map((m) => m.id),
      messages.map((m) => m.id).sort(),
      'in id order',
    )
    const files = (
      JSON.parse(entries[`projects/${project.id}/version-files/00001.json`]!) as { version: number; path: string }[]
    ).filter((f) => f.version === 99)
    t.equal(files.length, 700, 'every version file, once')
    t.same(
      files.map((f) => f.path),
      Array.from({ length: 700 }, (_, i) => `dir/ü-${String(i).padStart(4, '0')}.txt`),
      'in path order',
    )
    const target = await h.tenant('enterprise')
    const done = await p.restored(target.call, target.apiKey, target.tenantId, archive!, { merge: false })
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    t.match(done.report.counts, { chat_messages: { restored: 1200 }, project_version_files: { restored: 701 } })
  },
)

t.test(
  'a record larger than a JSON entry may be fails the export EXPORT_TOO_LARGE, and leaves no archive',
  async (t) => {
    const source = await tenantWithRuns(h, [{ outputChars: 10 }, { outputChars: MAX_JSON_ENTRY_BYTES + MiB }])
    const { job, archive } = await p.exported(source.call, source.tenantId, { include: ['projects', 'agents'] })
    t.equal(job.status, 'failed')
    t.equal(job.error.code, 'EXPORT_TOO_LARGE', job.error.message)
    t.equal(archive, null)
    t.same(
      await storedKeys(h, `tenants/${source.tenantId}/exports/${job.exportId}/`),
      [],
      'nothing is left in the store',
    )
    const failed = await h.platform.db.system(
      (sql) =>
        sql`select count(*)::int as n from jobs where tenant_id = ${source.tenantId} and queue = 'exports.run' and attempts > 1`,
    )
    t.equal(failed[0]!.n, 0, 'it is not tried again: it cannot succeed')
  },
)

t.test('JSON nested deeper than a restore reads fails the export EXPORT_TOO_LARGE', async (t) => {
  const source = await tenantWithRuns(h, [{ stepsDepth: MAX_JSON_DEPTH + 10 }])
  const { job } = await p.exported(source.call, source.tenantId, { include: ['projects', 'agents'] })
  t.equal(job.status, 'failed')
  t.equal(job.error.code, 'EXPORT_TOO_LARGE', job.error.message)
})

t.test(
  'an archive past what this installation restores fails EXPORT_TOO_LARGE before its files are copied',
  async (t) => {
    const small = await testApp(t, { RESTORE_MAX_UNPACKED_BYTES: String(MiB) }, { jobs: { pollMs: 50 } })
    const tn = await small.tenant('enterprise')
    const project = (await tn.call('POST', '/api/v1/projects', { name: 'Big' })).body.data
    t.equal(
      (
        await tn.call('PUT', `/api/v1/projects/${project.id}/files/big.bin`, Buffer.alloc(2 * MiB, 7), {
          'content-type': 'application/octet-stream',
        })
      ).status,
      201,
    )
    const { job } = await portability(small).exported(tn.call, tn.tenantId, { include: ['projects'] })
    t.equal(job.status, 'failed')
    t.equal(job.error.code, 'EXPORT_TOO_LARGE')
    t.same(
      await storedKeys(small, `tenants/${tn.tenantId}/exports/${job.exportId}/`),
      [],
      'nothing is left in the store',
    )
    // The json format is not restored: it is not held to what a restore takes.
    const json = await portability(small).exported(tn.call, tn.tenantId, { format: 'json', include: ['projects'] })
    t.equal(json.job.status, 'completed', JSON.stringify(json.job.error))
  },
)
