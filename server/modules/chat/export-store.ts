// Chat export SQL: one page of a tenant's messages in a time range, in (session, message) order,
// with what the export shows of each message's session. Every query names its tenant even though
// row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'
import type { MessageRow, SessionRow } from './store.js'

/**
 * A message of the export; the session's fields only on the first row of the page for its session (null on the others).
 */
export type ExportRow = MessageRow & {
  title: SessionRow['title'] | null
  agent_id: SessionRow['agent_id']
  project_id: SessionRow['project_id']
  message_count: SessionRow['message_count'] | null
  session_created_at: SessionRow['created_at'] | null
  session_updated_at: SessionRow['updated_at'] | null
  /** How many rows the page read before the byte budget cut it. */
  fetched: number
}

export interface ExportPageQuery {
  /** created_at at or after this... */
  from: Date
  /** ...and before this. */
  until: Date
  /** The (session, message) key of the last row already exported; null for the first page. */
  after: { sessionId: string; id: string } | null
  /** Rows at most. */
  rows: number
  /** Content bytes at most (the row that crosses the budget still comes, so a page is never empty). */
  bytes: number
}

/**
 * The next page of the export: the messages created in [from, until) after the key, in
 * (session_id, id) order (the session index: tenant_id, session_id, id). A page holds `rows`
 * messages, or fewer when their contents pass `bytes`: `fetched` then says how many the page read,
 * and the page was cut (there is more) whenever fewer rows came. The session's fields are looked
 * up (by its key) only for the rows that open a session in the page.
 *
 * The rows are handed to `each` as they arrive, never gathered into an array: gathered, they live
 * long enough to be moved into V8's old generation, which then grows by about the size of the
 * whole export before a full collection.
 */
export function exportPage(sql: TxSql, tenantId: string, q: ExportPageQuery, each: (row: ExportRow) => void) {
  const args = [tenantId, q.from, q.until, q.rows, q.bytes, ...(q.after ? [q.after.sessionId, q.after.id] : [])]
  // Not a prepared statement: planned for its own values each time. The generic plan PostgreSQL
  // switches a prepared one to after five runs reads the whole range by created_at and sorts it,
  // for every page.
  const query = sql.unsafe<ExportRow[]>(
    `with page as (
       select id, session_id, role, content, status, error, usage, created_at, completed_at
         from chat_messages
        where tenant_id = $1 and created_at >= $2 and created_at < $3
          ${q.after ? 'and (session_id, id) > ($6::uuid, $7::uuid)' : ''}
        order by session_id, id
        limit $4
     ), sized as (
       select *, sum(octet_length(content)) over w - octet_length(content) as bytes_before, count(*) over ()::int as fetched,
              session_id is distinct from lag(session_id) over w as opens
         from page
       window w as (order by session_id, id)
     )
     select m.id, m.session_id, m.role, m.content, m.status, m.error, m.usage, m.created_at, m.completed_at, m.fetched,
            s.title, s.agent_id, s.project_id, s.message_count, s.created_at as session_created_at, s.updated_at as session_updated_at
       from sized m
       -- limit 1 keeps this a lookup by key for each row that opens a session: without it, the
       -- planner may hash-join every session of the tenant on each page.
       left join lateral (
         select title, agent_id, project_id, message_count, created_at, updated_at
           from chat_sessions
          where m.opens and tenant_id = $1 and id = m.session_id
          limit 1) s on true
      where m.bytes_before < $5
      order by m.session_id, m.id`,
    args,
  )
  // The same query, now started, handing its rows over one at a time (it resolves with none).
  void query.forEach(each)
  return query
}
