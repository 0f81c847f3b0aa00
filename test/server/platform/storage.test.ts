import t from 'tap'
import { randomUUID } from 'node:crypto'
import { testPlatform } from '../../helpers/platform.js'

t.test("an opened platform decides tenants' stores through its storage, on its own store", async (t) => {
  const platform = await testPlatform(t)
  const store = await platform.storage.forTenant(randomUUID())
  t.equal(store, platform.blobs, 'the same store the readiness probe checks')
  await store.put('tests/seam.txt', Buffer.from('x'), 'text/plain')
  await platform.blobs.get('tests/seam.txt')
  await store.remove('tests/seam.txt')
})
