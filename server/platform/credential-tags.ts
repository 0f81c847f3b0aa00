// Credentials this server issues (API keys, session tokens, device-login ids, trusted-device
// cookies) end in a tag: HMAC-SHA256 of the rest of the credential under a key derived for that
// kind of credential from ENCRYPTION_MASTER_KEY (HKDF-SHA256, purpose `credential-tag:<kind>`),
// its first 48 bits written as 8 base62 characters. A credential whose tag does not verify was not
// issued here, which memory alone tells: it is refused with no database lookup. So made-up
// credentials cost the server next to nothing, and no limit per address has to stand between a
// real credential and its lookup (where someone else's bad guesses could lock it out).
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Secrets } from './secrets.js'

export const TAG_LENGTH = 8
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

export interface CredentialTags {
  /** The credential: body followed by its tag. */
  sign(body: string): string
  /** Whether the credential ends in the tag of the rest (constant time). */
  verify(credential: string): boolean
}

export function credentialTags(secrets: Pick<Secrets, 'deriveKey'>, kind: string): CredentialTags {
  const key = secrets.deriveKey(`credential-tag:${kind}`)
  const tagOf = (body: string) => {
    let n = createHmac('sha256', key).update(body).digest().readUIntBE(0, 6) // 48 bits: exact in a double
    let tag = ''
    for (let i = 0; i < TAG_LENGTH; i++) {
      tag += BASE62[n % 62]
      n = Math.floor(n / 62)
    }
    return tag
  }
  return {
    sign: (body) => body + tagOf(body),
    verify(credential) {
      if (credential.length <= TAG_LENGTH) return false
      const body = credential.slice(0, -TAG_LENGTH)
      const given = Buffer.from(credential.slice(-TAG_LENGTH))
      const want = Buffer.from(tagOf(body))
      return given.length === want.length && timingSafeEqual(given, want)
    },
  }
}
