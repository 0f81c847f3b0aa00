// UUIDv7 ids: time-ordered, so "newest first" and cursor pagination are an index scan on the id.
import { randomBytes } from 'node:crypto'
import { v7 } from 'uuid'

export const newId = (): string => v7()

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
