// Ids: UUIDv7, time-ordered, so "newest first" and cursor pagination are an index scan on the id;
// the one check of what a UUID looks like; random base62 text for tokens.
import { randomBytes } from 'node:crypto'
import { v7 } from 'uuid'

export const newId = (): string => v7()

/**
 * A UUID as PostgreSQL's uuid type and the API accept it: 32 hex digits in groups of 8-4-4-4-12,
 * either case (RFC 9562). Other spellings PostgreSQL takes (braces, no hyphens, urn:uuid:) are not.
 */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (text: string): boolean => UUID_RE.test(text)

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** Random text from [A-Za-z0-9]: about 5.95 bits per character, every character equally likely. */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      // 248 = 4 * 62: rejecting larger bytes keeps every character equally likely
      if (b < 248 && out.length < length) out += BASE62[b % 62]
    }
  }
  return out
}
