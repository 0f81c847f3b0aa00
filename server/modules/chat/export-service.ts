// The chat-history export: a tenant's sessions and messages in a range of days, as one JSON
// document streamed while it is read, in bounded memory, as the `data` of the response envelope
// ({data, meta}: the specification's for every JSON response).
//
// The cursor is a key, not a database cursor: pages of at most `pageRows` messages (fewer when
// their contents pass `pageBytes`) in (session_id, id) order, each page read in its own short
// db.tenantRead after the last key sent. No connection or transaction is held between pages (the
// embedded database has one connection, and a slow client must not hold a pooled one), and the
// next page is read only when the client has taken the previous one (backpressure): the server
// holds about one page however large the export. The export is therefore not a snapshot: a
// message written while it runs is in it if its key comes after the pages already sent.
//
// The first page is read before anything is sent, so a fault then is an error in the envelope. A
// fault after the first bytes cuts the response short (the connection is closed without the end
// of the document, so the JSON is incomplete and the client sees an aborted transfer); it is logged
// at warn. When the client goes away, reading stops at the next page.
import { Readable } from 'node:stream'
import type { BaseLogger } from 'pino'
import type { Clock } from '../../clock.js'
import type { Actor } from '../../domain/actor.js'
import { calendarDay, checkPeriod, DAY_MS } from '../../domain/days.js'
import type { Db } from '../../platform/db.js'
import { auditBy } from '../audit/service.js'
import { exportPage, type ExportPageQuery, type ExportRow } from './export-store.js'

/** Messages per page. */
export const EXPORT_PAGE_ROWS = 1000
/** Content bytes per page, beyond which a page is cut short (one long message still comes whole). */
export const EXPORT_PAGE_BYTES = 4 * 1024 * 1024
/** The version of the document's format (its `format` field). */
export const EXPORT_FORMAT_VERSION = 1

export interface ChatExportRequest {
  dateRange: { start: string; end: string }
  format?: 'json'
  includeMetadata?: boolean
}

export type ExportOutcome = 'completed' | 'cancelled' | 'failed'

export interface ChatExportDeps {
  db: Db
  now?: Clock
  pageRows?: number
  pageBytes?: number
}

/**
 * The export's range, checked: inclusive UTC days on the messages' created_at. Over HTTP the body
 * schema's `format: date` refuses impossible dates first; this check is for callers of the service.
 */
function rangeOf(r: ChatExportRequest['dateRange']) {
  const start = { field: 'body.dateRange.start', ms: calendarDay('body.dateRange.start', r.start) }
  const end = { field: 'body.dateRange.end', ms: calendarDay('body.dateRange.end', r.end) }
  checkPeriod(start, end)
  return { from: new Date(start.ms), until: new Date(end.ms + DAY_MS) }
}

/** A session as the export shows it, up to its messages (an object's JSON without its closing brace). */
function sessionHead(r: ExportRow, metadata: boolean): string {
  const s = { id: r.session_id, title: r.title, createdAt: r.session_created_at?.toISOString() ?? null }
  const m = metadata
    ? {
        agentId: r.agent_id,
        projectId: r.project_id,
        updatedAt: r.session_updated_at?.toISOString() ?? null,
        messageCount: r.message_count,
      }
    : {}
  return JSON.stringify({ ...s, ...m }).slice(0, -1) + ',"messages":[\n'
}

const json = JSON.stringify
/**
 * A message as the export shows it, written field by field: with an object per message, however
 * short-lived, V8 moved most of an export into its old generation (measured: the process grew by
 * about the export's size before a full collection).
 */
function messageJson(r: ExportRow, metadata: boolean): string {
  const own = `{"id":${json(r.id)},"role":${json(r.role)},"content":${json(r.content)},"createdAt":${json(r.created_at.toISOString())}`
  if (!metadata) return own + '}'
  return (
    own +
    `,"status":${json(r.status)},"error":${json(r.error)},"usage":${json(r.usage)},"completedAt":${json(r.completed_at?.toISOString() ?? null)}}`
  )
}

/**
 * The document's text, from `head` on, written a row at a time as the rows arrive and taken a
 * page at a time: what it has taken is counted in `sent`. `tail` follows the document's end.
 */
function documentWriter(head: string, tail: string, metadata: boolean) {
  let text = head
  let session: string | null = null
  const sent = { sessions: 0, messages: 0 }
  const pending = { sessions: 0, messages: 0 }
  /** The key after which the next page starts, and whether there is one. */
  let last: { sessionId: string; id: string; fetched: number } | null = null
  let rows = 0
  return {
    sent,
    row(r: ExportRow) {
      if (r.session_id !== session) {
        text += (session === null ? '' : '\n]},\n') + sessionHead(r, metadata)
        session = r.session_id
        pending.sessions++
      } else {
        text += ',\n'
      }
      text += messageJson(r, metadata)
      pending.messages++
      rows++
      last = { sessionId: r.session_id, id: r.id, fetched: r.fetched }
    },
    /** After a page of `pageRows` at most: the key of the next page, or null when this was the last. */
    next(pageRows: number): { sessionId: string; id: string } | null {
      const more = last !== null && (rows < last.fetched || last.fetched === pageRows)
      const key = more ? { sessionId: last!.sessionId, id: last!.id } : null
      rows = 0
      last = null
      return key
    },
    /** The text written since the last take, as bytes; `end` closes the document. */
    take(end = false): Buffer {
      if (end)
        text +=
          (session === null ? '' : '\n]}') +
          `\n],"counts":${JSON.stringify({ sessions: sent.sessions + pending.sessions, messages: sent.messages + pending.messages })}}` +
          tail
      const bytes = Buffer.from(text)
      text = ''
      sent.sessions += pending.sessions
      sent.messages += pending.messages
      pending.sessions = pending.messages = 0
      return bytes
    },
  }
}

/**
 * A byte stream of what `source` yields, asking it for more only when the reader wants more (the
 * response is not backed up), and stopping it when destroyed (the client went away). A fault of
 * the source is reported, then the stream is destroyed without an error: the response is cut
 * short, and the report is the one log line of it.
 */
function pulled(source: AsyncGenerator<Buffer, void>, onFault: (err: unknown) => void): Readable {
  let reading = false
  const stream = new Readable({
    // One page waits here at most: the next is read only once the response has taken it.
    highWaterMark: 64 * 1024,
    read() {
      if (reading) return
      reading = true
      void (async () => {
        try {
          for (;;) {
            const next = await source.next()
            if (stream.destroyed) return
            if (next.done) return void stream.push(null)
            if (!stream.push(next.value)) return
          }
        } catch (err) {
          onFault(err)
          stream.destroy()
        } finally {
          reading = false
        }
      })()
    },
    destroy(err, done) {
      // Runs the source's cleanup (its audit entry) once its current page is done.
      source.return().catch(() => {})
      done(err)
    },
  })
  return stream
}

export function chatExportService(deps: ChatExportDeps) {
  const { db } = deps
  const now = deps.now ?? Date.now
  const pageRows = deps.pageRows ?? EXPORT_PAGE_ROWS
  const pageBytes = deps.pageBytes ?? EXPORT_PAGE_BYTES

  return {
    /**
     * Checks the request and reads the first page; the envelope, the document as its `data`, then
     * streams from the returned Readable, `meta` closing it (a response cut short has none). `log`
     * is the request's: a fault after the first bytes, and an audit entry that could not be
     * written, are logged there.
     */
    async open(
      a: Actor,
      input: ChatExportRequest,
      log: Pick<BaseLogger, 'warn' | 'error'>,
      meta: Record<string, unknown>,
    ): Promise<{ filename: string; stream: Readable }> {
      const { from, until } = rangeOf(input.dateRange)
      const { start, end } = input.dateRange
      const metadata = input.includeMetadata ?? false
      const { tenantId } = a
      const head = {
        format: EXPORT_FORMAT_VERSION,
        tenantId,
        exportedAt: new Date(now()).toISOString(),
        dateRange: { start, end },
      }
      const doc = documentWriter(
        '{"data":' + JSON.stringify(head).slice(0, -1) + ',"sessions":[\n',
        `,"meta":${JSON.stringify(meta)}}\n`,
        metadata,
      )
      // A page, written into the document as its rows arrive; the key of the next page, or null.
      const page = async (after: ExportPageQuery['after']) => {
        await db.tenantRead(tenantId, (sql) =>
          exportPage(sql, tenantId, { from, until, after, rows: pageRows, bytes: pageBytes }, doc.row),
        )
        return doc.next(pageRows)
      }
      const first = await page(null)

      // A page at a time, taken as bytes at once: nothing of a page but its bytes is kept while
      // waiting for the client to take them.
      async function* document(): AsyncGenerator<Buffer, void> {
        let outcome: ExportOutcome = 'cancelled'
        try {
          for (let after = first; after;) {
            yield doc.take()
            after = await page(after)
          }
          yield doc.take(true)
          outcome = 'completed'
        } catch (err) {
          outcome = 'failed'
          throw err
        } finally {
          // Written when the export ends, whichever way: how much it wrote out is then known (when cut
          // short, what it had handed to the response, which may be a page more than the client got).
          // An export cut short by the client or a fault had already sent part of the history, so
          // it is recorded too.
          const details = { dateRange: { start, end }, format: 'json', includeMetadata: metadata, outcome, ...doc.sent }
          await db
            .tenant(tenantId, (sql) => auditBy(sql, a, { action: 'chat.exported', details }))
            .catch((err) => log.error({ err, ...details }, 'the audit entry of a chat export could not be written'))
        }
      }

      const stream = pulled(document(), (err) =>
        log.warn(
          { err, ...doc.sent },
          'chat export failed after its first bytes were sent: the response was cut short (its JSON is incomplete)',
        ),
      )
      return { filename: `chat_export_${tenantId}_${start}_${end}.json`, stream }
    },
  }
}

export type ChatExportService = ReturnType<typeof chatExportService>
