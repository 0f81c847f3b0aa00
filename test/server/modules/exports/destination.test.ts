// A destination's probe and the reasons its failures are given: the probe's key is one the blob
// key check takes with a prefix and without (a key may not begin with '.'), a key refused here is
// refused before any request reaches the store and is this server's fault (BlobKeyRefused), and a
// failure is given in the store's terms, never as "Unreachable" when nothing said so.
import { createServer, type AddressInfo, type Socket } from 'node:net'
import t from 'tap'
import { probeKey } from '../../../../server/modules/exports/service.js'
import { BlobKeyRefused, openLocalBlobs, siteS3Blobs, storeReason } from '../../../../server/platform/blobs.js'
import { OutboundRefused } from '../../../../server/platform/outbound.js'
import { tempDir } from '../../../helpers/platform.js'

t.test("the probe's key is a valid key with a prefix and without", async (t) => {
  const blobs = openLocalBlobs({ dir: tempDir(t), publicUrl: 'http://site.example', signingKey: Buffer.alloc(32, 1) })
  for (const prefix of ['', 'atrium/', 'atrium/weekly/', 'a.b-c_d/']) {
    const key = probeKey(prefix)
    t.ok(key.startsWith(`${prefix}atrium-destination-check-`), key)
    await blobs.put(key, Buffer.from('probe'), 'text/plain')
    t.equal(await blobs.size(key), 5, `${JSON.stringify(prefix)}: written`)
    await blobs.remove(key)
  }
  await t.rejects(
    blobs.put('.atrium-destination-check-x', Buffer.from('x'), 'text/plain'),
    BlobKeyRefused,
    'the key the probe had without a prefix is refused here',
  )
})

t.test('a key refused here is refused before any request reaches the store', async (t) => {
  const sockets: Socket[] = []
  const server = createServer((s) => {
    sockets.push(s)
    s.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const { port } = server.address() as AddressInfo
  const bucket = await siteS3Blobs({
    endpoint: `http://127.0.0.1:${port}`,
    bucket: 'some-bucket',
    accessKey: 'k',
    secretKey: 's',
    region: 'us-east-1',
  })
  for (const key of ['.atrium-destination-check-x', 'a//b', '../up'])
    await t.rejects(bucket.put(key, Buffer.from('x'), 'text/plain'), BlobKeyRefused, key)
  t.equal(sockets.length, 0, 'no connection was opened')
})

t.test('a failure is given in the store’s terms', async (t) => {
  const cases: [string, unknown, string][] = [
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      'ECONNREFUSED',
    ],
    [
      'the store’s error code',
      Object.assign(new Error('The bucket does not exist'), { code: 'NoSuchBucket' }),
      'NoSuchBucket',
    ],
    [
      'the outbound policy',
      new Error('wrapped', { cause: new OutboundRefused('10.0.0.1', '10.0.0.1', 'private address') }),
      'OutboundRefused',
    ],
    [
      'an answer the S3 client could not read',
      Object.assign(new Error('bad xml'), { name: 'InvalidXMLError' }),
      'InvalidXMLError',
    ],
    ['an error that says nothing more', new Error('something'), 'UnexpectedError'],
  ]
  for (const [what, err, reason] of cases) t.equal(storeReason(err), reason, what)
})
