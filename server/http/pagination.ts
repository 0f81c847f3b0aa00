// Opaque cursors over time-ordered (UUIDv7) ids: a page is "ids below the cursor", newest first.
import { invalid } from './errors.js'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export function encodeCursor(id: string): string {
  return Buffer.from(`v1:${id}`).toString('base64url')
}

export function decodeCursor(cursor: string | undefined): string | null {
  if (cursor === undefined) return null
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const id = text.startsWith('v1:') ? text.slice(3) : ''
  if (!UUID_RE.test(id)) throw invalid('cursor', 'is not a cursor this API returned')
  return id
}

/** Fetch limit + 1 rows; the extra one only says whether there is a next page. */
export function toPage<T extends { id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit)
  return { items, nextCursor: rows.length > limit ? encodeCursor(items[items.length - 1]!.id) : null }
}
