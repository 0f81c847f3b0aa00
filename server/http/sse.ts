// Server-Sent Events for the streams that follow durable events (agent runs, chat replies).
// The events themselves are rows with increasing numbers: a stream sends the rows after the
// client's Last-Event-ID, then follows new ones as they are written on any replica (a message on
// the cache's pub/sub wakes it; a slow poll covers a lost message). Events of a live log come with
// the message itself and go out at once when they are next in line; ones that arrive ahead of
// rows not yet written are held until those rows are read. Every event has an `id:`, so a
// reconnect resumes with exactly the next one. The reply is a stream through Fastify (its hooks,
// headers and logs as any reply), with the headers that keep proxies from buffering it.
import { PassThrough } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Cache } from '../platform/cache.js'
import { parseLogMessage, type LiveEvent } from '../platform/event-log.js'
import { detached } from '../platform/tracing.js'
import { Type } from '@sinclair/typebox'
import { invalid } from '../domain/errors.js'
import { apiErrors } from './schemas.js'

export const SSE_HEARTBEAT_MS = 15_000
/** What clients are told to wait before reconnecting after a drop. */
export const RECONNECT_MS = 1000
/** Catch-up when no pub/sub message arrived (Redis away, a message lost). */
const POLL_MS = 2000
/** Live events held while the rows before them are not written yet (they are a flush behind). */
const HELD_MAX = 2 * 1000

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  // nginx (and ingress-nginx) buffer responses unless told not to.
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
} as const

/** The request and response schemas every stream route shares (its params, summary and description are its own). */
export const sseRoute = {
  querystring: Type.Object(
    {
      lastEventId: Type.Optional(
        Type.String({ maxLength: 12, description: 'For clients that cannot send Last-Event-ID' }),
      ),
    },
    { additionalProperties: false },
  ),
  headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ maxLength: 12 })) }),
  produces: ['text/event-stream'],
  response: { 200: Type.String({ description: 'text/event-stream' }), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
}

export interface SseEvent {
  id: number
  event: string
  data: unknown
}

/** One event in the wire format: id, event and data lines (data is JSON, on one line). */
export const formatEvent = (e: SseEvent) => `id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`

/** The largest event id a stream can send (event numbers are PostgreSQL integers). */
export const MAX_EVENT_ID = 2 ** 31 - 1

/** The event the client last saw: Last-Event-ID, or ?lastEventId= for clients that cannot set headers; 0 for none. */
export function lastEventId(req: FastifyRequest, query?: string): number {
  const raw = req.headers['last-event-id'] ?? query
  if (raw === undefined || raw === '') return 0
  const text = Array.isArray(raw) ? raw[0]! : raw
  // Event ids are PostgreSQL integers: a larger number was never sent, and would fail the query.
  if (!/^(0|[1-9]\d{0,9})$/.test(text.trim()) || Number(text.trim()) > MAX_EVENT_ID)
    throw invalid('Last-Event-ID', 'must be the id of an event this stream sent (a whole number)')
  return Number(text.trim())
}

export interface FollowOptions {
  cache: Pick<Cache, 'subscribe'>
  channel: string
  /** The event after which to start. */
  after: number
  /** Rows after `after`, in order, and whether nothing more will ever come once they are sent. */
  read(after: number): Promise<{ events: SseEvent[]; ended: boolean }>
  heartbeatMs?: number
  pollMs?: number
  onError?(err: unknown): void
}

/**
 * Answers with a stream of the events after `o.after`, following new ones until the source has
 * ended (then the stream ends) or the client goes away. The first read happens before the reply
 * starts, so a run that does not exist is still an error in the envelope.
 */
export async function followEvents(req: FastifyRequest, reply: FastifyReply, o: FollowOptions): Promise<FastifyReply> {
  let last = o.after
  const first = await o.read(last)
  const out = new PassThrough()
  let closed = false
  let pumping = false
  let again = false
  const timers: NodeJS.Timeout[] = []
  let unsubscribe: (() => Promise<void>) | null = null

  /** Resolves when the client has taken what was written, or the stream has closed. */
  let wake: (() => void) | null = null
  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done)
        wake = null
        resolve()
      }
      wake = done
      out.once('drain', done)
    })
  const close = () => {
    if (closed) return
    closed = true
    wake?.()
    for (const t of timers) clearInterval(t)
    void unsubscribe?.().catch(() => {})
    out.end()
  }
  /** Live events that came before the ones ahead of them: sent once those have been. */
  const held = new Map<number, LiveEvent>()
  const sendHeld = () => {
    for (let e = held.get(last + 1); e && !closed; e = held.get(last + 1)) {
      held.delete(e.id)
      out.write(formatEvent(e))
      last = e.id
    }
    for (const id of held.keys()) if (id <= last) held.delete(id)
  }
  const send = (batch: { events: SseEvent[]; ended: boolean }) => {
    for (const e of batch.events) {
      if (e.id <= last) continue
      out.write(formatEvent(e))
      last = e.id
    }
    sendHeld()
    if (batch.ended) close()
  }
  /**
   * A message on the log's channel: live events go out at once when they are next in line; anything else is read from
   * the rows.
   */
  const onMessage = (message: string) => {
    const m = parseLogMessage(message)
    if (m && 'written' in m) return void (m.written > last && pump())
    if (!m) return void pump()
    for (const e of m.live) if (e.id > last) held.set(e.id, e)
    sendHeld()
    // Held ones wait for the message that their rows are written. Far behind, the rows bring it all.
    if (held.size > HELD_MAX) held.clear()
  }
  const pump = async () => {
    if (closed) return
    if (pumping) return void (again = true)
    pumping = true
    try {
      do {
        again = false
        // Until a read comes back short: a burst larger than one read is sent in order, each read
        // once the client has taken the last (a client that does not read holds one read, not the log).
        for (;;) {
          const batch = await o.read(last)
          send(batch)
          if (closed || !batch.events.length || batch.ended) break
          if (out.writableNeedDrain) await drained()
        }
      } while (again && !closed)
    } catch (err) {
      // The database away: the next poll tries again; the client keeps its place either way.
      o.onError?.(err)
    } finally {
      pumping = false
    }
  }

  req.raw.on('close', close)
  reply.raw.on('close', close)
  // EventSource clients wait this long before reconnecting (their default is 3 s).
  out.write(`retry: ${RECONNECT_MS}\n: stream opened\n\n`)
  send(first)
  if (!closed) {
    // The stream's reads after the first run outside the request's trace: a stream open for an hour
    // would otherwise add a query span to it every poll.
    const poll = detached(() => void pump())
    unsubscribe = await o.cache.subscribe(o.channel, detached(onMessage))
    if (closed) void unsubscribe().catch(() => {})
    // Events written between the first read and the subscription are found here.
    poll()
    timers.push(setInterval(poll, o.pollMs ?? POLL_MS))
    timers.push(setInterval(() => !closed && out.write(': heartbeat\n\n'), o.heartbeatMs ?? SSE_HEARTBEAT_MS))
  }
  return reply.headers(SSE_HEADERS).send(out)
}
