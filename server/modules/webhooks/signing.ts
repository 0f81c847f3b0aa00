// Standard Webhooks (https://www.standardwebhooks.com) signatures: HMAC-SHA256 over
// `${webhook-id}.${webhook-timestamp}.${body}`, base64, written "v1,<signature>"; during a secret
// rotation one per secret, separated by spaces, so a receiver holding either secret verifies.
//
// The key is the secret's bytes, except for a secret in the standard's own form ("whsec_" and
// base64), whose key is the decoded base64: receivers pass either form to their verifier as is
// (the reference library: new Webhook(secret) for whsec_..., { format: 'raw' } otherwise).
import { createHmac, randomBytes } from 'node:crypto'

export const SECRET_PREFIX = 'whsec_'
export const MIN_SECRET_LENGTH = 24
export const MAX_SECRET_LENGTH = 256
/** Printable ASCII without spaces: the same bytes in every verifier, nothing to trim or escape. */
export const SECRET_PATTERN = '^[\\x21-\\x7e]+$'
/** A whsec_ secret must carry at least this much key. */
const MIN_KEY_BYTES = 16
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Why a secret cannot be used, or null when it can (length and characters are the schema's). */
export function secretProblem(secret: string): string | null {
  if (!secret.startsWith(SECRET_PREFIX)) return null
  const encoded = secret.slice(SECRET_PREFIX.length)
  if (!BASE64_RE.test(encoded))
    return `a secret starting with ${SECRET_PREFIX} must continue in base64 (the Standard Webhooks form)`
  if (Buffer.from(encoded, 'base64').length < MIN_KEY_BYTES)
    return `a ${SECRET_PREFIX} secret must encode at least ${MIN_KEY_BYTES} bytes`
  return null
}

export function signingKey(secret: string): Buffer {
  return secret.startsWith(SECRET_PREFIX)
    ? Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
    : Buffer.from(secret, 'utf8')
}

/** A new secret in the Standard Webhooks form: 32 random bytes. */
export const generateSecret = (): string => SECRET_PREFIX + randomBytes(32).toString('base64')

/** The webhook-signature header value: one v1 signature per key, newest first. */
export function sign(keys: readonly Buffer[], id: string, timestampSeconds: number, body: string): string {
  return keys
    .map((k) => `v1,${createHmac('sha256', k).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`)
    .join(' ')
}
