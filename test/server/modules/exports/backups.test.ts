// Automatic backups on the job runner, with the clock moved through days: enterprise hourly, pro
// daily, free none; each a whole-tenant zip in the tenant's store; removed (object and row) once
// older than the plan keeps them, and a download's archive once its link has expired.
import t from 'tap'
import { testApp, type Caller } from '../../../helpers/app.js'
import { portability, storedKeys } from '../../../helpers/portability.js'
import { unzip } from '../../../helpers/zip.js'

const HOUR = 3600_000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
let now = Date.parse('2026-12-01T00:30:00Z')
const h = await testApp(t, {}, { now: () => now, jobs: { pollMs: 50, scheduleTickMs: 100 } })
const p = portability(h)

// The first round runs once the app has started (a new installation's): it is over before these tenants are made.
for (let i = 0; ; i++) {
  const [r] = await h.platform.db.system(
    (sql) => sql`select count(*)::int as n from jobs where queue = 'exports.backups' and status = 'completed'`,
  )
  if (r!.n > 0) break
  if (i > 400) throw new Error('the first backup round did not run')
  await sleep(25)
}
const tenants = { free: await h.tenant('free'), pro: await h.tenant('pro'), enterprise: await h.tenant('enterprise') }
for (const [plan, tn] of Object.entries(tenants)) await tn.call('POST', '/api/v1/projects', { name: `${plan} work` })

const backupsOf = async (call: Caller, tenantId: string) =>
  (
    (await call('GET', `/api/v1/platform/tenants/${tenantId}/export?limit=200`)).body.data as {
      kind: string
      status: string
      downloadUrl: string | null
      createdAt: string
    }[]
  ).filter((e) => e.kind === 'backup')

/**
 * Moves the clock, lets the hourly round run and every backup it queued end. The app's own schedule
 * tick may hold the schedule when this one looks (skip locked): done means the schedule has moved
 * past `now` (its round is queued, in that same commit) and nothing due is left.
 */
async function at(ms: number) {
  now = ms
  await h.app.jobs.tickSchedules()
  h.app.jobs.kick()
  for (let i = 0; i < 400; i++) {
    await sleep(50)
    const [r] = await h.platform.db.system(
      (sql) => sql`select
        (select count(*)::int from jobs where queue in ('exports.backups', 'exports.run') and status in ('queued', 'running') and run_at <= ${new Date(now)}) as pending,
        (select count(*)::int from job_schedules where queue = 'exports.backups' and next_at <= ${new Date(now)}) as unscheduled`,
    )
    if (r!.pending === 0 && r!.unscheduled === 0) return
    if (r!.unscheduled) await h.app.jobs.tickSchedules()
  }
  throw new Error('the backups did not finish')
}

t.test('a whole-tenant backup per plan interval, into the tenant’s store', async (t) => {
  await at(Date.parse('2026-12-01T01:30:00Z'))
  t.equal((await backupsOf(tenants.enterprise.call, tenants.enterprise.tenantId)).length, 1)
  t.equal((await backupsOf(tenants.pro.call, tenants.pro.tenantId)).length, 1)
  t.equal((await backupsOf(tenants.free.call, tenants.free.tenantId)).length, 0, 'free: none')
  const [backup] = await backupsOf(tenants.pro.call, tenants.pro.tenantId)
  t.equal(backup!.status, 'completed')
  const zip = await unzip(await p.download(backup!.downloadUrl!))
  t.match(JSON.parse(zip['metadata.json']!), { include: ['projects', 'agents', 'chat_history', 'settings'] })
  t.match(JSON.parse(zip['projects/index.json']!), [{ name: 'pro work' }])

  for (let hour = 2; hour <= 4; hour++) await at(Date.parse('2026-12-01T00:30:00Z') + hour * HOUR)
  t.equal((await backupsOf(tenants.enterprise.call, tenants.enterprise.tenantId)).length, 4, 'enterprise: hourly')
  t.equal((await backupsOf(tenants.pro.call, tenants.pro.tenantId)).length, 1, 'pro: not before a day has passed')
  await at(Date.parse('2026-12-02T01:45:00Z'))
  t.equal((await backupsOf(tenants.pro.call, tenants.pro.tenantId)).length, 2, 'pro: daily')
  const audit = await h.platform.db.system(
    (sql) =>
      sql`select actor_type, details from audit_events where tenant_id = ${tenants.pro.tenantId} and action = 'export.completed'`,
  )
  t.match(audit, [
    { actor_type: 'system', details: { kind: 'backup' } },
    { actor_type: 'system', details: { kind: 'backup' } },
  ])
})

t.test(
  'backups older than the plan keeps them go, object and row; a manual export’s archive goes when its link expires',
  async (t) => {
    const manual = await p.exported(tenants.pro.call, tenants.pro.tenantId, { include: ['settings'] })
    t.equal(manual.job.status, 'completed')
    const proKeys = () => storedKeys(h, `tenants/${tenants.pro.tenantId}/exports/`)
    t.equal((await proKeys()).length, 3, 'two backups and the export')
    // Eight days on: pro keeps backups 7 days, enterprise 90; the export's link lasted 7 days.
    const later = Date.parse('2026-12-09T12:30:00Z')
    await at(later)
    const pro = await backupsOf(tenants.pro.call, tenants.pro.tenantId)
    t.same(
      pro.map((b) => b.createdAt),
      [new Date(later).toISOString()],
      'only the backup just taken is left',
    )
    t.equal((await proKeys()).length, 1, 'the expired backups’ and the export’s objects are gone')
    const exported = (
      await tenants.pro.call('GET', `/api/v1/platform/tenants/${tenants.pro.tenantId}/export/${manual.job.exportId}`)
    ).body.data
    t.match(exported, { status: 'completed', downloadUrl: null }, 'the export stays listed, without its link')
    t.equal(
      (await backupsOf(tenants.enterprise.call, tenants.enterprise.tenantId)).length,
      6,
      'enterprise keeps its older backups',
    )
  },
)
