// API key format: svc_<type>_<32 base62 characters><8 base62 tag> (about 190 random bits, and the
// tag of platform/credential-tags.ts, which refuses made-up keys without a database lookup). Only a
// SHA-256 of the key is stored: the key is high-entropy, so a slow password hash would add
// latency, not safety. Keys made before tags existed (no tag: 32 characters after the type) keep
// working; see legacy.ts.
import { hash } from 'node:crypto'
import { randomBase62 } from '../../../common/ids.js'
import { credentialTags, TAG_LENGTH, type CredentialTags } from '../../platform/credential-tags.js'
import type { Secrets } from '../../platform/secrets.js'

export const KEY_TYPES = ['sdk', 'ci', 'admin'] as const
export type KeyType = (typeof KEY_TYPES)[number]

const SECRET_LENGTH = 32
const KEY_RE = new RegExp(`^svc_(sdk|ci|admin)_[A-Za-z0-9]{${SECRET_LENGTH}}(?:[A-Za-z0-9]{${TAG_LENGTH}})?$`)

/** The tag of API keys: one per deployment, derived from ENCRYPTION_MASTER_KEY. */
export const apiKeyTags = (secrets: Pick<Secrets, 'deriveKey'>): CredentialTags => credentialTags(secrets, 'api-key')

export function generateKey(
  type: KeyType,
  tags: CredentialTags,
): { key: string; prefix: string; lastFour: string; hash: Buffer } {
  const key = tags.sign(`svc_${type}_${randomBase62(SECRET_LENGTH)}`)
  return { key, prefix: key.slice(0, `svc_${type}_`.length + 4), lastFour: key.slice(-4), hash: hashKey(key) }
}

export const looksLikeKey = (token: string) => KEY_RE.test(token)

/** A key of the format before tags (assumes looksLikeKey). */
export const isLegacyKey = (token: string) => token.length - token.lastIndexOf('_') - 1 === SECRET_LENGTH

// crypto.hash: the one-shot form, without a Hash object per call (checked on every request).
export const hashKey = (key: string): Buffer => hash('sha256', key, 'buffer') as unknown as Buffer

/** The key's SHA-256 as the credential cache names it, computed straight to text. */
export const keyCacheId = (key: string) => `key:${hash('sha256', key, 'base64')}`
