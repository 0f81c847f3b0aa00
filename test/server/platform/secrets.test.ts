import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import t from 'tap'
import { createSecrets, loadMasterKey } from '../../../server/platform/secrets.js'
import { tempDir } from '../../helpers/platform.js'

const secrets = createSecrets(randomBytes(32))
const ctx = { tenantId: 't-1', table: 'webhooks', rowId: 'row-1', field: 'secret' }

t.test('a secret decrypts with its own tenant, table, row and field', async (t) => {
  const stored = secrets.encrypt('s3cr3t value ✓', ctx)
  t.match(stored, new RegExp(`^atrium:v1:${secrets.keyId}:[\\w-]+:[\\w-]+$`))
  t.notMatch(stored, /s3cr3t/)
  t.equal(secrets.decrypt(stored, ctx), 's3cr3t value ✓')
})

t.test('the same value encrypts differently every time (fresh data key and nonce)', async (t) => {
  t.not(secrets.encrypt('same', ctx), secrets.encrypt('same', ctx))
})

t.test('a secret moved to another tenant, table, row or field does not decrypt', async (t) => {
  const stored = secrets.encrypt('value', ctx)
  for (const other of [{ tenantId: 't-2' }, { table: 'llm_settings' }, { rowId: 'row-2' }, { field: 'apiKey' }]) {
    t.throws(() => secrets.decrypt(stored, { ...ctx, ...other }), { name: 'SecretDecryptError' }, JSON.stringify(other))
  }
})

t.test('a tampered or truncated secret does not decrypt', async (t) => {
  const parts = secrets.encrypt('value', ctx).split(':')
  const body = Buffer.from(parts[4]!, 'base64url')
  body[body.length - 20]! ^= 1
  t.throws(() => secrets.decrypt([...parts.slice(0, 4), body.toString('base64url')].join(':'), ctx), {
    name: 'SecretDecryptError',
  })
  t.throws(() => secrets.decrypt([...parts.slice(0, 4), 'AAAA'].join(':'), ctx), { name: 'SecretDecryptError' })
  t.throws(() => secrets.decrypt('plain text', ctx), { name: 'SecretDecryptError' })
})

t.test('another master key cannot decrypt, and says which key sealed it', async (t) => {
  const stored = secrets.encrypt('value', ctx)
  t.throws(() => createSecrets(randomBytes(32)).decrypt(stored, ctx), {
    message: new RegExp(`sealed under master key ${secrets.keyId}`),
  })
})

t.test('a master key must be 32 bytes', async (t) => {
  t.throws(() => createSecrets(randomBytes(16)))
})

t.test('derived keys differ by purpose and are stable', async (t) => {
  t.same(secrets.deriveKey('blob-links'), secrets.deriveKey('blob-links'))
  t.notSame(secrets.deriveKey('blob-links'), secrets.deriveKey('jwt'))
})

t.test('embedded mode generates a master key once, private to its owner', async (t) => {
  const dir = tempDir(t)
  const lines: string[] = []
  const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) })
  const first = loadMasterKey({ configured: '', dataDir: dir, log })
  t.equal(first.length, 32)
  t.equal(statSync(join(dir, 'master.key')).mode & 0o777, 0o600)
  t.match(lines.join(''), /ENCRYPTION_MASTER_KEY is not set/)
  t.same(loadMasterKey({ configured: '', dataDir: dir, log }), first, 'the same key on the next start')
  t.equal(readFileSync(join(dir, 'master.key'), 'utf8').trim(), first.toString('base64'))
  const configured = randomBytes(32)
  t.same(
    loadMasterKey({ configured: configured.toString('base64'), dataDir: dir, log }),
    configured,
    'a configured key wins',
  )
})

t.test('a DATA_DIR and a master key left open to others by an older version are made private', async (t) => {
  const dir = join(tempDir(t), 'data')
  mkdirSync(dir)
  chmodSync(dir, 0o755)
  const key = randomBytes(32)
  writeFileSync(join(dir, 'master.key'), key.toString('base64') + '\n')
  chmodSync(join(dir, 'master.key'), 0o644)
  const lines: string[] = []
  const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) })
  t.same(loadMasterKey({ configured: '', dataDir: dir, log }), key, 'the same key')
  t.equal(statSync(dir).mode & 0o777, 0o700)
  t.equal(statSync(join(dir, 'master.key')).mode & 0o777, 0o600)
  t.match(lines.join(''), /open to other local users: made private/)
})
