// Opaque cursors: a page is "items past the cursor's key", newest first. Projects are keyed by
// their time-ordered (UUIDv7) id, versions by their version number.
import { isUuid } from '../../common/ids.js'
import { invalid } from './errors.js'

const isInt = (key: string) => /^(0|[1-9]\d{0,9})$/.test(key)
// The API writes ids in lowercase, so a cursor it returned holds a lowercase one.
const isIdKey = (key: string) => isUuid(key) && key === key.toLowerCase()

export function encodeCursor(key: string | number): string {
  return Buffer.from(`v1:${key}`).toString('base64url')
}

function decode(cursor: string, valid: (key: string) => boolean): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const key = text.startsWith('v1:') ? text.slice(3) : ''
  if (!valid(key)) throw invalid('cursor', 'is not a cursor this API returned')
  return key
}

export const decodeIdCursor = (cursor: string | undefined): string | null =>
  cursor === undefined ? null : decode(cursor, isIdKey)

export const decodeNumberCursor = (cursor: string | undefined): number | null =>
  cursor === undefined ? null : Number(decode(cursor, isInt))

/** Fetch limit + 1 rows; the extra one only says whether there is a next page. */
export function toPage<T>(
  rows: T[],
  limit: number,
  keyOf: (row: T) => string | number,
): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit)
  return { items, nextCursor: rows.length > limit ? encodeCursor(keyOf(items[items.length - 1]!)) : null }
}

/**
 * A page fetched within a byte budget (platform/db.ts pageWithinBytes): as toPage, and when the
 * budget cut it short (`more`), the next page starts after its last item.
 */
export function toBoundedPage<T>(
  page: { rows: T[]; more: boolean },
  limit: number,
  keyOf: (row: T) => string | number,
): { items: T[]; nextCursor: string | null } {
  const paged = toPage(page.rows, limit, keyOf)
  return page.more && !paged.nextCursor && paged.items.length
    ? { items: paged.items, nextCursor: encodeCursor(keyOf(paged.items.at(-1)!)) }
    : paged
}

/** A cursor whose key is text (a file path); `valid` says whether a key is one this API could have returned. */
export const decodeTextCursor = (cursor: string | undefined, valid: (key: string) => boolean): string | null =>
  cursor === undefined ? null : decode(cursor, valid)
