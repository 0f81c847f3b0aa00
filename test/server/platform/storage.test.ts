import t from 'tap'
import { randomUUID } from 'node:crypto'
import { openLocalBlobs } from '../../../server/platform/blobs.js'
import { platformStorage } from '../../../server/platform/storage.js'
import { tempDir, testPlatform } from '../../helpers/platform.js'

t.test('the platform store serves every tenant until another kind of store plugs in', async (t) => {
  const blobs = openLocalBlobs({ dir: tempDir(t), publicUrl: 'http://localhost:8080', signingKey: Buffer.alloc(32, 1) })
  const storage = platformStorage(blobs)
  t.equal(await storage.forTenant(randomUUID()), blobs)
  t.equal(await storage.forTenant(randomUUID()), blobs)
})

t.test("an opened platform decides tenants' stores through its storage, on its own store", async (t) => {
  const platform = await testPlatform(t)
  const store = await platform.storage.forTenant(randomUUID())
  t.equal(store, platform.blobs, 'the same store the readiness probe checks')
  await store.put('tests/seam.txt', Buffer.from('x'), 'text/plain')
  await platform.blobs.get('tests/seam.txt')
  await store.remove('tests/seam.txt')
})
