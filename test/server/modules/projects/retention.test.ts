// Backup retention by plan (domain/plans.ts, docs/api.md): the sweep against the real database and blob store.
// Each test has its own app and database, since a sweep works across all tenants.
import t, { type Test } from 'tap'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { sweepExpiredBackups } from '../../../../server/modules/projects/service.js'

const DAY = 86400_000

async function setup(t: Test) {
  let clock = Date.now()
  const h = await testApp(t, {}, { now: () => clock })
  const keys = new Map<string, string>()
  const keyOf = async (backupId: string) => {
    const [row] = await h.platform.db.system(
      (sql) => sql<{ blob_key: string }[]>`select blob_key from project_backups where id = ${backupId}`,
    )
    return row?.blob_key
  }
  const sweep = (opts: { now?: Date; batchSize?: number } = {}) =>
    sweepExpiredBackups({ db: h.platform.db, storage: h.platform.storage, log: h.platform.log }, opts)
  /** A tenant of the plan with one project, and a way to back it up as of some days ago. */
  const tenant = async (plan: Parameters<TestApp['tenant']>[0]) => {
    const tn = await h.tenant(plan)
    const project = (await tn.call('POST', '/api/v1/projects', { name: `${plan} project` })).body.data as { id: string }
    const backupDaysAgo = async (days: number) => {
      clock = Date.now() - days * DAY
      try {
        const r = await tn.call('POST', `/api/v1/projects/${project.id}/backup`)
        if (r.status !== 201) throw new Error(`backup failed: ${r.status} ${JSON.stringify(r.body)}`)
        const id = r.body.data.backupId as string
        keys.set(id, (await keyOf(id))!)
        return id
      } finally {
        clock = Date.now()
      }
    }
    return { ...tn, backupDaysAgo }
  }
  /** Whether the backup's row exists, and its object in the blob store. */
  const state = async (backupId: string) => ({
    row: (await keyOf(backupId)) !== undefined,
    object: await h.platform.blobs.get(keys.get(backupId)!).then(
      (s) => {
        s.destroy()
        return true
      },
      () => false,
    ),
  })
  return { h, sweep, tenant, state, keyOf }
}

t.test(
  'each plan keeps its backups as long as its retention, and the sweep removes object and row after',
  async (t) => {
    const { sweep, tenant, state } = await setup(t)
    // [plan, days old, expired now, expired two days later]
    const cases = [
      ['pro', 8, true, true],
      ['pro', 6, false, true],
      ['growth', 31, true, true],
      ['growth', 29, false, true],
      ['enterprise', 91, true, true],
      ['enterprise', 30, false, false],
      // Free keeps no backups, but a download link once given is honoured for its 7 days.
      ['free', 8, true, true],
      ['free', 6, false, true],
    ] as const
    const backups = []
    for (const [plan, days, now, later] of cases) {
      backups.push({ what: `${plan}, ${days} days`, id: await (await tenant(plan)).backupDaysAgo(days), now, later })
    }
    for (const b of backups)
      t.same(await state(b.id), { row: true, object: true }, `${b.what}: stored before the sweep`)

    t.same(await sweep(), { removed: 4, failed: 0, tenantsDeferred: 0 })
    for (const b of backups) {
      t.same(
        await state(b.id),
        { row: !b.now, object: !b.now },
        `${b.what}: ${b.now ? 'object and row removed' : 'kept'}`,
      )
    }
    t.same(await sweep(), { removed: 0, failed: 0, tenantsDeferred: 0 }, 'a second sweep finds nothing to do')

    t.same(await sweep({ now: new Date(Date.now() + 2 * DAY) }), { removed: 3, failed: 0, tenantsDeferred: 0 })
    for (const b of backups)
      t.equal((await state(b.id)).row, !b.later, `two days on, ${b.what}: ${b.later ? 'removed' : 'kept'}`)
  },
)

t.test('the object is deleted before its row, so no object is ever left without a row to find it by', async (t) => {
  const { h, sweep, tenant, keyOf } = await setup(t)
  const pro = await tenant('pro')
  const id = await pro.backupDaysAgo(8)
  const key = (await keyOf(id))!
  const rowWhenRemoved: (string | undefined)[] = []
  const remove = h.platform.blobs.remove
  h.platform.blobs.remove = async (k) => {
    rowWhenRemoved.push(await keyOf(id))
    return remove(k)
  }
  t.teardown(() => {
    h.platform.blobs.remove = remove
  })
  await sweep()
  t.same(rowWhenRemoved, [key], 'the row still existed when its object was deleted')
  t.equal(await keyOf(id), undefined)
})

t.test('when the store fails a delete, the row stays and the next sweep removes it', async (t) => {
  const { h, sweep, tenant, state } = await setup(t)
  const pro = await tenant('pro')
  const id = await pro.backupDaysAgo(9)
  const remove = h.platform.blobs.remove
  h.platform.blobs.remove = async () => {
    throw new Error('storage down')
  }
  t.teardown(() => {
    h.platform.blobs.remove = remove
  })
  t.same(await sweep(), { removed: 0, failed: 1, tenantsDeferred: 0 })
  t.same(await state(id), { row: true, object: true }, 'kept for the next sweep')

  h.platform.blobs.remove = remove
  t.same(await sweep(), { removed: 1, failed: 0, tenantsDeferred: 0 })
  t.same(await state(id), { row: false, object: false })
  t.same(await sweep(), { removed: 0, failed: 0, tenantsDeferred: 0 }, 'and the one after has nothing to do')
})

t.test('a row whose object is already gone is removed all the same', async (t) => {
  const { h, sweep, tenant, state, keyOf } = await setup(t)
  const pro = await tenant('pro')
  const id = await pro.backupDaysAgo(8)
  await h.platform.blobs.remove((await keyOf(id))!) // as a sweep that stopped between the object and the row leaves it
  t.same(await sweep(), { removed: 1, failed: 0, tenantsDeferred: 0 })
  t.same(await state(id), { row: false, object: false })
})

t.test('many expired backups go in batches, oldest first, all of them', async (t) => {
  const { sweep, tenant, state } = await setup(t)
  const pro = await tenant('pro')
  const old: string[] = []
  for (let i = 0; i < 7; i++) old.push(await pro.backupDaysAgo(8 + i))
  const young = await pro.backupDaysAgo(1)
  t.same(await sweep({ batchSize: 3 }), { removed: 7, failed: 0, tenantsDeferred: 0 })
  for (const id of old) t.equal((await state(id)).row, false)
  t.equal((await state(young)).row, true)
})
