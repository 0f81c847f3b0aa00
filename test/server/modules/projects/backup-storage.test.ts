// Backups reach blob storage only through the per-tenant seam (platform.storage.forTenant): with a
// platform whose seam gives each tenant a store of its own, each tenant's backups land, are linked
// and are swept in that store and nowhere else.
import t from 'tap'
import { appOn } from '../../../helpers/app.js'
import { sweepExpiredBackups } from '../../../../server/modules/projects/service.js'
import { openLocalBlobs, type Blobs } from '../../../../server/platform/blobs.js'
import type { Platform } from '../../../../server/platform/index.js'
import { tempDir, testPlatform } from '../../../helpers/platform.js'

const DAY = 86400_000
const base = await testPlatform(t)
const stores = new Map<string, Blobs>()
const storeOf = (tenantId: string) => stores.get(tenantId) ?? base.blobs
const platform: Platform = {
  ...base,
  storage: {
    ...base.storage,
    forTenant: async (tenantId) => storeOf(tenantId),
    placement: async () => ({ mode: 'platform' as const, region: 'test' }),
  },
}
let clock = Date.now()
const h = await appOn(t, platform, { now: () => clock })

async function tenantWithStore(name: string) {
  const tenant = await h.tenant('pro')
  stores.set(
    tenant.tenantId,
    openLocalBlobs({ dir: tempDir(t), publicUrl: `http://${name}.example`, signingKey: Buffer.alloc(32, 7) }),
  )
  const project = (await tenant.call('POST', '/api/v1/projects', { name })).body.data as { id: string }
  return { ...tenant, project }
}

const blobKeyOf = async (backupId: string) => {
  const [row] = await base.db.system(
    (sql) => sql<{ blob_key: string }[]>`select blob_key from project_backups where id = ${backupId}`,
  )
  return row?.blob_key
}

t.test("a backup is stored and linked in its tenant's own store", async (t) => {
  const a = await tenantWithStore('store-a')
  const b = await tenantWithStore('store-b')
  const r = await a.call('POST', `/api/v1/projects/${a.project.id}/backup`)
  t.equal(r.status, 201)
  t.match(r.body.data.downloadUrl, /^http:\/\/store-a\.example\/blobs\//, "the link is signed by A's store")
  const key = (await blobKeyOf(r.body.data.backupId))!
  await stores.get(a.tenantId)!.get(key)
  await t.rejects(stores.get(b.tenantId)!.get(key), "not in B's store")
  await t.rejects(base.blobs.get(key), "nor in the platform's")
})

t.test("the sweep deletes an expired backup from its tenant's own store", async (t) => {
  const a = await tenantWithStore('store-c')
  clock = Date.now() - 8 * DAY
  const old = (await a.call('POST', `/api/v1/projects/${a.project.id}/backup`)).body.data.backupId as string
  clock = Date.now()
  const key = (await blobKeyOf(old))!
  await stores.get(a.tenantId)!.get(key)
  const swept = await sweepExpiredBackups({ db: base.db, storage: platform.storage, log: base.log })
  t.match(swept, { removed: 1, failed: 0 })
  await t.rejects(stores.get(a.tenantId)!.get(key), 'the object is gone from the tenant store')
  t.equal(await blobKeyOf(old), undefined, 'and so is its row')
})

t.test('a store that keeps failing waits for the next sweep; other tenants are swept meanwhile', async (t) => {
  const down = await tenantWithStore('store-down')
  const up = await tenantWithStore('store-up')
  clock = Date.now() - 10 * DAY
  const stuck: string[] = []
  for (let i = 0; i < 5; i++)
    stuck.push((await down.call('POST', `/api/v1/projects/${down.project.id}/backup`)).body.data.backupId)
  const fine = (await up.call('POST', `/api/v1/projects/${up.project.id}/backup`)).body.data.backupId as string
  clock = Date.now()
  const broken = stores.get(down.tenantId)!
  let tries = 0
  const remove = broken.remove
  broken.remove = async () => {
    tries++
    throw new Error('store unreachable')
  }
  t.teardown(() => {
    broken.remove = remove
  })

  const swept = await sweepExpiredBackups({ db: base.db, storage: platform.storage, log: base.log }, { batchSize: 2 })
  t.same(swept, { removed: 1, failed: 3, tenantsDeferred: 1 })
  t.equal(tries, 3, 'after three failures in a row the store is not asked again in this sweep')
  for (const id of stuck) t.ok(await blobKeyOf(id), 'every row of the failing store stays')
  t.equal(await blobKeyOf(fine), undefined, 'the other tenant was swept')

  broken.remove = remove
  t.match(
    await sweepExpiredBackups({ db: base.db, storage: platform.storage, log: base.log }, { batchSize: 2 }),
    { removed: 5, failed: 0 },
    'the next sweep, the store back, finishes',
  )
})
