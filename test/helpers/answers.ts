// Checks of the API's answers that many tests make: an error envelope, and a list walked page by page.
import type { Test } from 'tap'
import type { Called, Caller } from './app.js'

/** `r` is the error envelope with this status and code; `name` says which case it is. */
export function isError(t: Test, r: Pick<Called, 'status' | 'body'>, status: number, code: string, name: string) {
  t.equal(r.status, status, name)
  t.equal(r.body?.error?.code, code, name)
}

/** Every page of the list at `path`, `limit` items at a time, following meta.nextCursor to the end. */
export async function allPages(call: Caller, path: string, limit: number): Promise<Called[]> {
  const pages: Called[] = []
  let cursor: string | null = null
  do {
    const r = await call('GET', `${path}?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`)
    pages.push(r)
    cursor = r.body?.meta?.nextCursor ?? null
  } while (cursor)
  return pages
}

/** The ids of the items on `pages`, in the order listed. */
export const listedIds = (pages: Called[]): string[] =>
  pages.flatMap((p) => (p.body?.data ?? []).map((item: { id: string }) => item.id))
