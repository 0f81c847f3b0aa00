// Opaque cursors: a page is "items past the cursor's key", newest first. Projects are keyed by
// their time-ordered (UUIDv7) id, versions by their version number.
import { invalid } from './errors.js'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const INT_RE = /^(0|[1-9]\d{0,9})$/

export function encodeCursor(key: string | number): string {
  return Buffer.from(`v1:${key}`).toString('base64url')
}

function decode(cursor: string, valid: RegExp): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const key = text.startsWith('v1:') ? text.slice(3) : ''
  if (!valid.test(key)) throw invalid('cursor', 'is not a cursor this API returned')
  return key
}

export const decodeIdCursor = (cursor: string | undefined): string | null => (cursor === undefined ? null : decode(cursor, UUID_RE))

export const decodeNumberCursor = (cursor: string | undefined): number | null => (cursor === undefined ? null : Number(decode(cursor, INT_RE)))

/** Fetch limit + 1 rows; the extra one only says whether there is a next page. */
export function toPage<T>(rows: T[], limit: number, keyOf: (row: T) => string | number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit)
  return { items, nextCursor: rows.length > limit ? encodeCursor(keyOf(items[items.length - 1]!)) : null }
}
