import { createHmac } from 'node:crypto'
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
  const other = await h.anonymous(
    'GET',
    `/blobs/t/other.zip${new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: 60, filename: 'f.zip' })).search}`,
  )
  t.equal(other.status, 403, 'a signature for another key')
})

t.test('a link whose signature is spelled any other way than issued is FORBIDDEN', async (t) => {
  // A signature holding '-' or '_' (most do), so that the standard-alphabet spelling differs too.
  let url!: URL
  for (let s = 60; !/[-_]/.test(url?.searchParams.get('signature') ?? ''); s++) {
    url = new URL(await blobs.presignGet('t/file.zip', { expiresSeconds: s, filename: 'f.zip' }))
  }
  const sig = url.searchParams.get('signature')!
  t.match(sig, /^[A-Za-z0-9_-]{43}$/, 'issued as unpadded base64url of HMAC-SHA256')
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
  const i = sig.search(/[A-Za-z]/)
  const altered: Record<string, string> = {
    'a trailing !': `${sig}!`,
    'a trailing =': `${sig}=`,
    'padding ==': `${sig}==`,
    'inserted characters': `${sig.slice(0, 10)}!*.${sig.slice(10)}`,
    'an inserted space': `${sig.slice(0, 20)} ${sig.slice(20)}`,
    'the standard base64 alphabet': sig.replace(/-/g, '+').replace(/_/g, '/'),
    // 43 characters carry 258 bits for 256: the last one's two spare bits change no byte.
    'other spare bits in the last character': sig.slice(0, -1) + ALPHABET[ALPHABET.indexOf(sig.at(-1)!) ^ 1],
    'a case change':
      sig.slice(0, i) +
      (sig[i] === sig[i]!.toUpperCase() ? sig[i]!.toLowerCase() : sig[i]!.toUpperCase()) +
      sig.slice(i + 1),
    'truncated by one character': sig.slice(0, -1),
    empty: '',
  }
  for (const [what, signature] of Object.entries(altered)) {
    const tampered = new URL(url)
    tampered.searchParams.set('signature', signature)
    const r = await h.anonymous('GET', tampered.pathname + tampered.search)
    t.equal(r.status, 403, what)
    t.match(r.body?.error, { code: 'FORBIDDEN', details: { reason: 'signature' } }, what)
  }
  const untouched = await h.anonymous('GET', url.pathname + url.search)
  t.equal(untouched.status, 200, 'the link as issued downloads')
  t.equal(untouched.raw.toString(), 'PK-bytes')
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
})

t.test('a validly signed link to a key outside the store serves nothing', async (t) => {
  // Forge what a signing bug would produce: a correct signature over an escaping key.
  const signingKey = h.platform.secrets.deriveKey('blob-links')
  const expires = String(Math.floor(Date.now() / 1000) + 60)
  for (const key of ['t/../../../../etc/passwd', '../master.key', 't/%2e%2e/%2e%2e/master.key']) {
    const signature = createHmac('sha256', signingKey).update(`${key}\n${expires}\nx`).digest('base64url')
    const path = key.split('/').map(encodeURIComponent).join('/')
    const r = await h.anonymous('GET', `/blobs/${path}?expires=${expires}&filename=x&signature=${signature}`)
    t.equal(r.status, 404, key)
    t.notMatch(r.raw.toString(), /root:|[A-Za-z0-9+/]{43}=/, `${key}: no file content`)
  }
  await t.rejects(
    blobs.presignGet('../escape.zip', { expiresSeconds: 60, filename: 'e.zip' }),
    { message: /invalid blob key/ },
    'and no such link is ever signed',
  )
})
