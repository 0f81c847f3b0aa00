// Envelope encryption of secrets at rest (BYOS keys, LLM keys, webhook secrets).
// Each value gets a fresh data key (AES-256-GCM); the data key is wrapped by the master key
// (AES-256-GCM). Both layers authenticate the same associated data, which binds the value to its
// tenant, table, row and field: a ciphertext copied to another row or tenant does not decrypt.
// Stored form: atrium:v1:<keyId>:<wrapped data key>:<ciphertext>, base64url parts.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { privateDir, tightenTree } from './data-dir.js'

const ALG = 'aes-256-gcm'
const IV_BYTES = 12
const TAG_BYTES = 16

export interface SecretContext {
  tenantId: string
  table: string
  rowId: string
  field: string
}

export class SecretDecryptError extends Error {
  override name = 'SecretDecryptError'
}

export interface Secrets {
  /** Identifies the master key; stored with each value so keys can rotate. */
  readonly keyId: string
  encrypt(plaintext: string, ctx: SecretContext): string
  decrypt(stored: string, ctx: SecretContext): string
  /** A key for one purpose (signing download links, tokens), derived with HKDF-SHA256. */
  deriveKey(purpose: string): Buffer
}

function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES)
  const c = createCipheriv(ALG, key, iv).setAAD(aad)
  const body = Buffer.concat([c.update(plaintext), c.final()])
  return Buffer.concat([iv, body, c.getAuthTag()])
}

function open(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new SecretDecryptError('secret is truncated')
  const d = createDecipheriv(ALG, key, sealed.subarray(0, IV_BYTES)).setAAD(aad)
  d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
  try {
    return Buffer.concat([d.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), d.final()])
  } catch {
    throw new SecretDecryptError('secret does not decrypt for this tenant and row')
  }
}

const aadOf = (ctx: SecretContext) =>
  Buffer.from(JSON.stringify(['atrium-secret-v1', ctx.tenantId, ctx.table, ctx.rowId, ctx.field]))

export function createSecrets(masterKey: Buffer): Secrets {
  if (masterKey.length !== 32) throw new Error('the master key must be 32 bytes')
  const keyId = createHash('sha256').update('atrium-key-id').update(masterKey).digest('hex').slice(0, 16)
  return {
    keyId,
    encrypt(plaintext, ctx) {
      const aad = aadOf(ctx)
      const dataKey = randomBytes(32)
      const wrapped = seal(masterKey, dataKey, aad)
      const body = seal(dataKey, Buffer.from(plaintext, 'utf8'), aad)
      return ['atrium', 'v1', keyId, wrapped.toString('base64url'), body.toString('base64url')].join(':')
    },
    decrypt(stored, ctx) {
      const parts = stored.split(':')
      if (parts.length !== 5 || parts[0] !== 'atrium' || parts[1] !== 'v1')
        throw new SecretDecryptError('not an Atrium secret')
      if (parts[2] !== keyId)
        throw new SecretDecryptError(`secret was sealed under master key ${parts[2]}, not the configured ${keyId}`)
      const aad = aadOf(ctx)
      const dataKey = open(masterKey, Buffer.from(parts[3]!, 'base64url'), aad)
      return open(dataKey, Buffer.from(parts[4]!, 'base64url'), aad).toString('utf8')
    },
    deriveKey(purpose) {
      return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), `atrium:${purpose}`, 32))
    },
  }
}

/**
 * The configured key; in embedded (non-production) mode with none configured, one generated once
 * into DATA_DIR/master.key. Production without a key never gets here: config validation refuses it.
 */
export function loadMasterKey(opts: { configured: string; dataDir: string; log: Logger }): Buffer {
  if (opts.configured) return Buffer.from(opts.configured, 'base64')
  const dir = privateDir(opts.dataDir, opts.log)
  const path = join(dir, 'master.key')
  if (existsSync(path)) {
    tightenTree(path, opts.log) // an older version may have left it readable by others
    return Buffer.from(readFileSync(path, 'utf8').trim(), 'base64')
  }
  const key = randomBytes(32)
  try {
    writeFileSync(path, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  } catch {
    return Buffer.from(readFileSync(path, 'utf8').trim(), 'base64') // another process wrote it first
  }
  opts.log.warn(
    { path },
    'ENCRYPTION_MASTER_KEY is not set: generated one for embedded use. Back it up; production requires the setting',
  )
  return key
}
