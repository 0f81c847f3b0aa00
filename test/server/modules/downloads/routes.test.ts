import t from 'tap'
import { testApp } from '../../../helpers/app.js'

const h = await testApp(t, { R2_ENDPOINT: '' })
const blobs = h.platform.blobs

t.test('a signed local link downloads the file with its name', async (t) => {
  await blobs.put('t/file.zip', Buffer.from('PK-bytes'), 'application/zip')
  const url = new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: 60, filename: 'my backup.zip' }))
  const r = await h.anonymous('GET', url.pathname + url.search)
  t.equal(r.status, 200)
  t.equal(r.raw.toString(), 'PK-bytes')
  t.equal(r.headers['content-type'], 'application/zip')
  t.match(r.headers['content-disposition'], /attachment; filename="my_backup.zip"; filename\*=UTF-8''my%20backup.zip/)
  t.equal(r.headers['cache-control'], 'private, no-store')
})

t.test('a tampered link is FORBIDDEN', async (t) => {
  const url = new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: 60, filename: 'f.zip' }))
  url.searchParams.set('filename', 'other.zip')
  const r = await h.anonymous('GET', url.pathname + url.search)
  t.equal(r.status, 403)
  t.match(r.body.error, { code: 'FORBIDDEN', details: { reason: 'signature' } })
  const other = await h.anonymous('GET', `/blobs/t/other.zip${new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: 60, filename: 'f.zip' })).search}`)
  t.equal(other.status, 403, 'a signature for another key')
})

t.test('an expired link is FORBIDDEN', async (t) => {
  const url = new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: -5, filename: 'f.zip' }))
  const r = await h.anonymous('GET', url.pathname + url.search)
  t.equal(r.status, 403)
  t.match(r.body.error.details, { reason: 'expired' })
})

t.test('a missing query or a removed file is refused cleanly', async (t) => {
  t.equal((await h.anonymous('GET', '/blobs/t/file.zip')).status, 400)
  await blobs.put('t/gone.zip', Buffer.from('x'), 'application/zip')
  const url = new URL(await blobs.presignGet('t/gone.zip', { expiresSeconds: 60, filename: 'g.zip' }))
  await blobs.remove('t/gone.zip')
  t.equal((await h.anonymous('GET', url.pathname + url.search)).status, 404)
  const escape = await h.anonymous('GET', '/blobs/../../etc/passwd?expires=1&filename=x&signature=x')
  t.ok([403, 404].includes(escape.status), 'no way out of the store')
})
