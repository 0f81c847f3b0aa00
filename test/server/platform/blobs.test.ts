import { chmodSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import t from 'tap'
import { openLocalBlobs, openS3Blobs, type LocalBlobs } from '../../../server/platform/blobs.js'
import { freshBucket, services, tempDir, testPlatform } from '../../helpers/platform.js'

const { blobs } = await testPlatform(t)

const read = async (stream: NodeJS.ReadableStream) => {
  const chunks: Buffer[] = []
  for await (const c of stream) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

t.test(`the configured store (${blobs.kind}) keeps, serves, links and removes an object`, async (t) => {
  const body = Buffer.from('hello blob ' + Date.now())
  await blobs.put('tests/a/b.json', body, 'application/json')
  t.same(await read(await blobs.get('tests/a/b.json')), body)
  const url = await blobs.presignGet('tests/a/b.json', { expiresSeconds: 60, filename: 'b.json' })
  t.match(url, /^https?:\/\//)
  if (blobs.kind === 's3') {
    const r = await fetch(url)
    t.equal(r.status, 200)
    t.match(r.headers.get('content-disposition'), /attachment; filename="b.json"/)
    t.same(Buffer.from(await r.arrayBuffer()), body)
  } else {
    // The server serves a local link itself (downloads module) once the store verifies it.
    const link = new URL(url)
    t.match(link.pathname, /^\/blobs\/tests\/a\/b\.json$/, 'the link names the object')
    const verified = (blobs as LocalBlobs).verifyLink('tests/a/b.json', Object.fromEntries(link.searchParams))
    t.match(verified, { filename: 'b.json', path: /tests\/a\/b\.json$/ }, 'the store accepts its own link')
    t.same(readFileSync((verified as { path: string }).path), body, 'and it leads to the object')
  }
  await blobs.remove('tests/a/b.json')
  await t.rejects(blobs.get('tests/a/b.json'))
  await blobs.ping()
})

t.test('keys that could escape the store are refused', async (t) => {
  for (const key of ['../etc/passwd', 'a/../../b', '/abs', 'a//b', '', 'a/./b']) {
    await t.rejects(blobs.put(key, Buffer.from('x'), 'text/plain'), { message: /invalid blob key/ }, key)
  }
})

t.test('local links: valid, tampered, expired', async (t) => {
  const local = openLocalBlobs({ dir: tempDir(t), publicUrl: 'http://localhost:8080', signingKey: Buffer.alloc(32, 1) }) as LocalBlobs
  await local.put('x/y.zip', Buffer.from('zip'), 'application/zip')
  const url = new URL(await local.presignGet('x/y.zip', { expiresSeconds: 60, filename: 'y.zip' }))
  const q = Object.fromEntries(url.searchParams)
  t.match(local.verifyLink('x/y.zip', q), { filename: 'y.zip', path: /x\/y\.zip$/ })
  t.same(local.verifyLink('x/z.zip', q), { refused: 'signature' }, 'another key')
  t.same(local.verifyLink('x/y.zip', { ...q, filename: 'evil.exe' }), { refused: 'signature' }, 'another filename')
  t.same(local.verifyLink('x/y.zip', { ...q, expires: String(Number(q.expires) + 3600) }), { refused: 'signature' }, 'a later expiry')
  t.same(local.verifyLink('x/y.zip', { ...q, signature: '' }), { refused: 'signature' })
  const past = new URL(await local.presignGet('x/y.zip', { expiresSeconds: -1, filename: 'y.zip' }))
  t.same(local.verifyLink('x/y.zip', Object.fromEntries(past.searchParams)), { refused: 'expired' })
  const other = openLocalBlobs({ dir: tempDir(t), publicUrl: 'http://localhost:8080', signingKey: Buffer.alloc(32, 2) }) as LocalBlobs
  t.same(other.verifyLink('x/y.zip', q), { refused: 'signature' }, 'another signing key')
})

t.test('the local store keeps its folder and everything it writes private, even in a folder that existed open to others', async (t) => {
  const dir = join(tempDir(t), 'blobs')
  mkdirSync(dir)
  chmodSync(dir, 0o755)
  const local = openLocalBlobs({ dir, publicUrl: 'http://localhost:8080', signingKey: Buffer.alloc(32, 1) })
  t.equal(statSync(dir).mode & 0o777, 0o700, 'tightened when opened')
  await local.put('exports/t1/a.zip', Buffer.from('zip'), 'application/zip')
  await local.put('exports/t1/b.zip', Readable.from([Buffer.from('streamed')]), 'application/zip')
  for (const d of ['exports', 'exports/t1']) t.equal(statSync(join(dir, d)).mode & 0o777, 0o700, d)
  for (const f of ['exports/t1/a.zip', 'exports/t1/b.zip']) t.equal(statSync(join(dir, f)).mode & 0o777, 0o600, f)
})

t.test('S3 links can be signed for the address users reach the store at', { skip: !services.s3Endpoint && 'needs TEST_S3_ENDPOINT' }, async (t) => {
  const internal = new URL(services.s3Endpoint)
  const publicEndpoint = `${internal.protocol}//localhost:${internal.port}`
  const store = await openS3Blobs({
    endpoint: services.s3Endpoint,
    publicEndpoint,
    bucket: await freshBucket(t),
    accessKey: services.s3AccessKey,
    secretKey: services.s3SecretKey,
    region: 'us-east-1',
  })
  await store.put('p/x.txt', Buffer.from('public'), 'text/plain')
  const url = await store.presignGet('p/x.txt', { expiresSeconds: 60, filename: 'x.txt' })
  t.equal(new URL(url).host, `localhost:${internal.port}`)
  const r = await fetch(url)
  t.equal(r.status, 200, 'the store accepts the signature for that host')
  t.equal(await r.text(), 'public')
})
