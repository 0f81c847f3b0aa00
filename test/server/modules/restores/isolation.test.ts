// A restore gives nothing away about other tenants: what it does with an archive's id is the same
// whether or not another tenant has a record of that id (a record keeps its id only when it is the
// tenant's own already), and restored runs point at none of another tenant's users or keys.
import t from 'tap'
import { v7 } from 'uuid'
import { testApp } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { portability } from '../../../helpers/portability.js'
import { fillTenant } from '../../../helpers/tenant-data.js'
import { rawZip, unzipRaw } from '../../../helpers/zip.js'
import { derivedId, restoreIdKey, RESTORED_BY } from '../../../../server/modules/exports/format.js'

const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
const p = portability(h)
const KEY = restoreIdKey(h.platform.secrets)

const victim = await h.tenant('enterprise')
const theirs = (await victim.call('POST', '/api/v1/projects', { name: 'Secret plans' })).body.data.id as string

// The attacker's own archive, naming the attacker as the tenant it came from, with one project's id
// changed to a chosen one: the victim's, or one nobody has.
const attacker = await h.tenant('enterprise')
const decoy = (await attacker.call('POST', '/api/v1/projects', { name: 'Decoy' })).body.data.id as string
await attacker.call('POST', '/api/v1/projects', { name: 'Kept' })
const entries = await unzipRaw((await p.exported(attacker.call, attacker.tenantId, { include: ['projects'] })).archive!)
const naming = (id: string) =>
  rawZip(
    Object.entries(entries).map(([name, data]) => ({
      name: name.replaceAll(decoy, id),
      data: Buffer.from(data.toString('utf8').replaceAll(decoy, id)),
    })),
  )

const projectIds = async (tenantId: string) =>
  (
    await h.platform.db.system(
      (sql) => sql<{ id: string }[]>`select id from projects where tenant_id = ${tenantId} order by id`,
    )
  ).map((r) => r.id)

t.test('merge: an id another tenant has and an id nobody has come out alike', async (t) => {
  const nobodys = v7()
  const reports = []
  for (const id of [theirs, nobodys]) {
    const done = await p.restored(attacker.call, attacker.apiKey, attacker.tenantId, naming(id), { merge: true })
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    t.ok(
      (await projectIds(attacker.tenantId)).includes(derivedId(KEY, attacker.tenantId, id)),
      'restored under an id derived for the tenant',
    )
    reports.push(done.report)
  }
  t.same(reports[0], reports[1], 'the same report, whoever has the id')
  t.match(
    reports[0].counts.projects,
    { inArchive: 2, restored: 1, conflicts: 1 },
    'the one conflict is the tenant’s own project',
  )
  t.notOk((await projectIds(attacker.tenantId)).includes(theirs))
  t.same(await projectIds(victim.tenantId), [theirs], 'the other tenant’s records are as they were')
  t.equal((await victim.call('GET', `/api/v1/projects/${theirs}`)).body.data.name, 'Secret plans')
})

t.test('replace: an id another tenant has is restored like any other, not refused', async (t) => {
  const done = await p.restored(attacker.call, attacker.apiKey, attacker.tenantId, naming(theirs), { merge: false })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.ok((await projectIds(attacker.tenantId)).includes(derivedId(KEY, attacker.tenantId, theirs)))
  t.same(await projectIds(victim.tenantId), [theirs])
})

t.test('restored runs point at the users and keys of the tenant restored into, or at none', async (t) => {
  const llm = await fakeLlm(t)
  const source = await h.tenant('enterprise')
  await fillTenant(source.call, llm)
  const { archive } = await p.exported(source.call, source.tenantId)
  const startedBy = async (tenantId: string) =>
    (
      await h.platform.db.system(
        (sql) => sql<{ started_by: unknown }[]>`select started_by from agent_runs where tenant_id = ${tenantId}`,
      )
    ).map((r) => r.started_by)
  const [original] = await startedBy(source.tenantId)
  t.match(original, { kind: 'api_key', userId: source.userId }, 'started by the source tenant’s key')

  const other = await h.tenant('enterprise')
  const done = await p.restored(other.call, other.apiKey, other.tenantId, archive!, { merge: false })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.same(await startedBy(other.tenantId), [RESTORED_BY], 'into another tenant: none of the source tenant’s principals')

  const back = await p.restored(source.call, source.apiKey, source.tenantId, archive!, { merge: false })
  t.equal(back.status, 'completed', JSON.stringify(back.error))
  t.same(await startedBy(source.tenantId), [original], 'into the tenant whose key it is: kept')
})
