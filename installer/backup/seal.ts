// The passphrase that protects a backup's configuration part (it holds ENCRYPTION_MASTER_KEY and
// every other secret of the site). scrypt turns the passphrase into two keys: one for AES-256-GCM,
// which encrypts the configuration and proves the passphrase right (its tag fails otherwise), and
// one for HMAC-SHA256 over the manifest, so that a manifest edited without the passphrase (new
// checksums for a swapped database dump, say) is refused. The parameters are in the manifest.
import { createCipheriv, createDecipheriv, createHmac, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'

export interface SealParams {
  cipher: 'aes-256-gcm'
  kdf: 'scrypt'
  /** scrypt's cost (N), block size (r) and parallelism (p). */
  N: number
  r: number
  p: number
  /** base64 */
  salt: string
  /** base64, 12 bytes */
  iv: string
  mac: 'hmac-sha256'
}

export interface Keys {
  enc: Buffer
  mac: Buffer
}

/** About 0.1 s and 32 MB: cheap for the admin, dear for a guesser. */
const COST = { N: 2 ** 15, r: 8, p: 1 }
export const MIN_PASSPHRASE = 12

/** The passphrase file's content (one trailing newline dropped); null with the reason when it cannot serve. */
export function readPassphrase(path: string): { passphrase: string } | { problem: string } {
  let text: string
  try {
    text = readFileSync(path, 'utf8').replace(/\r?\n$/, '')
  } catch (err) {
    return {
      problem: `cannot read the passphrase file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    }
  }
  if ([...text].length < MIN_PASSPHRASE)
    return { problem: `the passphrase in ${path} is shorter than ${MIN_PASSPHRASE} characters` }
  return { passphrase: text }
}

export function deriveKeys(passphrase: string, p: Pick<SealParams, 'N' | 'r' | 'p' | 'salt'>): Keys {
  const out = scryptSync(passphrase.normalize('NFC'), Buffer.from(p.salt, 'base64'), 64, {
    N: p.N,
    r: p.r,
    p: p.p,
    maxmem: 128 * p.N * p.r * 2,
  })
  return { enc: out.subarray(0, 32), mac: out.subarray(32) }
}

/** Encrypts `plain` under a new salt and IV; the data is ciphertext followed by the 16-byte tag. */
export function seal(plain: Buffer, passphrase: string): { params: SealParams; data: Buffer; keys: Keys } {
  const params: SealParams = {
    cipher: 'aes-256-gcm',
    kdf: 'scrypt',
    ...COST,
    salt: randomBytes(16).toString('base64'),
    iv: randomBytes(12).toString('base64'),
    mac: 'hmac-sha256',
  }
  const keys = deriveKeys(passphrase, params)
  const c = createCipheriv('aes-256-gcm', keys.enc, Buffer.from(params.iv, 'base64'))
  const data = Buffer.concat([c.update(plain), c.final(), c.getAuthTag()])
  return { params, data, keys }
}

/** The plain text, or null when the passphrase is wrong (or the data was changed: the tag tells neither apart). */
export function unseal(data: Buffer, keys: Keys, params: SealParams): Buffer | null {
  if (params.cipher !== 'aes-256-gcm' || data.length < 16) return null
  try {
    const d = createDecipheriv('aes-256-gcm', keys.enc, Buffer.from(params.iv, 'base64'))
    d.setAuthTag(data.subarray(-16))
    return Buffer.concat([d.update(data.subarray(0, -16)), d.final()])
  } catch {
    return null
  }
}

export const macOf = (keys: Keys, text: string): string => createHmac('sha256', keys.mac).update(text).digest('hex')

/** Compared as the bytes the hex names, in constant time; anything that is not 32 bytes of hex is no match. */
export function sameMac(a: string, b: string): boolean {
  const hex = /^[0-9a-f]{64}$/
  return hex.test(a) && hex.test(b) && timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'))
}

/**
 * Why the manifest's KDF parameters cannot be used (they are read before its MAC can be checked): bounded, so a damaged
 * or hostile archive cannot make scrypt take the machine.
 */
export function paramsProblem(p: Partial<SealParams>): string | null {
  const ok =
    p.cipher === 'aes-256-gcm' &&
    p.kdf === 'scrypt' &&
    Number.isInteger(p.N) &&
    p.N! >= 2 ** 14 &&
    p.N! <= 2 ** 20 &&
    (p.N! & (p.N! - 1)) === 0 &&
    Number.isInteger(p.r) &&
    p.r! >= 1 &&
    p.r! <= 16 &&
    Number.isInteger(p.p) &&
    p.p! >= 1 &&
    p.p! <= 4 &&
    typeof p.salt === 'string' &&
    typeof p.iv === 'string' &&
    Buffer.from(p.iv, 'base64').length === 12
  return ok ? null : 'its encryption parameters are not ones this installer uses'
}
