// A writer for a durable, numbered event log (an agent run's, a chat session's): events written in
// the transaction of a state change, or on their own; streamed text coalesced into one row per
// burst rather than one per token. After each write commits, a message on the cache's pub/sub
// wakes the streams following the log on every replica (http/sse.ts reads the rows). A live log
// (one writer at a time, a chat reply) also sends its text on pub/sub the moment it comes, with
// its number, and writes the rows behind it: the streams forward it without a database read,
// and the rows are the replay buffer for reconnects, a flush behind at most.
import type { Cache } from './cache.js'
import type { Db, TxSql } from './db.js'

export interface LoggedEvent {
  type: string
  data: Record<string, unknown>
  /** Its number, when the writer numbers the log itself (a live log); else the append numbers it. */
  seq?: number
}

/** A live log's events as they travel on pub/sub, before or after they are written. */
export interface LiveEvent {
  id: number
  event: string
  data: Record<string, unknown>
}

/**
 * At most this many live events are sent before they are written; a writer that takes over a log
 * from a writer that died starts this far beyond the last written number, so that no number the
 * dead one sent (and a client may hold as its Last-Event-ID) is used again.
 */
export const LIVE_WINDOW = 1000

/**
 * A log message on pub/sub: a number (rows up to it are written; `ended` when they hold the event
 * that ends the log) or live events.
 */
export type LogMessage = { written: number; ended?: true } | { live: LiveEvent[] }

/** How a written message says that the log has ended (a server of an older release reads the rows on it). */
const ENDED = ' ended'

/** The message that a log's rows up to `last` are written (a stream behind it reads them), and whether they end it. */
export const writtenMessage = (last: number, ended = false) => String(last) + (ended ? ENDED : '')

export function parseLogMessage(message: string): LogMessage | null {
  if (message.startsWith('[')) {
    try {
      return { live: JSON.parse(message) as LiveEvent[] }
    } catch {
      return null
    }
  }
  const ended = message.endsWith(ENDED)
  const n = Number(ended ? message.slice(0, -ENDED.length) : message)
  if (!Number.isInteger(n)) return null
  return ended ? { written: n, ended } : { written: n }
}

export interface EventLogTarget {
  db: Db
  cache: Pick<Cache, 'publish'>
  tenantId: string
  /** The pub/sub channel the log's streams listen on. */
  channel: string
  /** Appends events in `sql`'s transaction; the number of the last one. */
  append: (sql: TxSql, events: LoggedEvent[]) => Promise<number>
  /** How often coalesced text is written at most. */
  flushMs: number
  /**
   * A live log: this writer is its only writer while it runs and numbers the events itself,
   * starting after `after`. Text is then sent to the streams at once (coalesced per turn of the
   * event loop only), and written behind it every `flushMs`; other events are sent once written.
   * Without it, events are numbered as they are written and streams read them from the rows.
   */
  live?: { after: number }
  /** A write on its own (a flush the timer started) failed: the owner may stop producing events nobody can keep. */
  onWriteError?: (err: unknown) => void
  /**
   * The event types that end the log (a run's end): the message announcing their rows says so, and a waiter for the
   * end (`logEnd`) needs to read nothing before it. A log numbered as it is written only.
   */
  ends?: ReadonlySet<string>
}

export function eventLogWriter<K extends string | number>(
  o: EventLogTarget & { deltaEvent: (key: K, text: string) => LoggedEvent },
) {
  let queued: LoggedEvent[] = []
  let delta: { key: K; text: string } | null = null
  let timer: NodeJS.Timeout | null = null
  let sealing: NodeJS.Immediate | null = null
  let writing: Promise<void> = Promise.resolve()
  let next = o.live?.after ?? 0
  /**
   * Live events sent but not written yet, by number: whether they stayed in this process (no other replica listened).
   */
  const sentEarly = new Map<number, boolean>()
  /**
   * Whether a stream on another replica follows the log, as the last message that went through
   * Redis said. Live events that are announced again once written (all but those sent late) stay
   * in this process while none does: a stream that starts following elsewhere reads them from the
   * rows, told of each flush, until the next flush's answer has this writer send them to it too.
   */
  let othersListen = true
  /** Publishes `message`; `localOnly` while no other replica listens. Whether it stayed here. */
  const publish = (message: string, localOnly = false) => {
    const here = localOnly && !othersListen
    void o.cache
      .publish(o.channel, message, { localOnly: here })
      .then((heard) => heard !== null && (othersListen = heard))
      .catch(() => {})
    return here
  }
  const live = (events: LoggedEvent[], early: boolean) =>
    publish(JSON.stringify(events.map((e): LiveEvent => ({ id: e.seq!, event: e.type, data: e.data }))), early)
  const numbered = (e: LoggedEvent): LoggedEvent => (o.live ? { ...e, seq: ++next } : e)
  const closeDelta = () => {
    if (!delta) return
    const e = numbered(o.deltaEvent(delta.key, delta.text))
    delta = null
    queued.push(e)
    // Sent now, unless too much is already unwritten: then it is sent with the rest once written.
    if (o.live && sentEarly.size < LIVE_WINDOW) sentEarly.set(e.seq!, live([e], true))
  }
  const take = () => {
    closeDelta()
    const out = queued
    queued = []
    return out
  }
  const stopTimers = () => {
    if (timer) clearTimeout(timer)
    if (sealing) clearImmediate(sealing)
    timer = null
    sealing = null
  }
  /** Tells the streams that `batch` is written (numbered `last` at most): live ones get what was not sent yet. */
  const written = (batch: LoggedEvent[], last: number) => {
    const ends = batch.some((e) => o.ends?.has(e.type))
    if (!o.live) return void publish(writtenMessage(last, ends))
    const late: LoggedEvent[] = []
    let kept = false
    for (const e of batch) {
      const early = sentEarly.get(e.seq!)
      if (early === undefined) late.push(e)
      else kept ||= early
      sentEarly.delete(e.seq!)
    }
    if (late.length) live(late, false)
    // A stream elsewhere lacks the events kept here: the number has it read them (rather than hold the late ones for
    // want of them).
    if (!late.length || kept) publish(writtenMessage(last))
  }
  const flush = () => {
    stopTimers()
    const batch = take()
    if (batch.length)
      writing = writing.then(async () => written(batch, await o.db.tenant(o.tenantId, (sql) => o.append(sql, batch))))
    return writing
  }
  return {
    push(type: string, data: Record<string, unknown>) {
      closeDelta()
      queued.push(numbered({ type, data }))
    },
    /**
     * Text streamed under `key` (a step, a message): joined with what came before it until the next flush (a live log:
     * until the next turn).
     */
    delta(key: K, text: string) {
      if (delta && delta.key === key) delta.text += text
      else {
        closeDelta()
        delta = { key, text }
      }
      if (o.live) sealing ??= setImmediate(() => ((sealing = null), closeDelta()))
      // A failed write surfaces at the next flush or `commit`, which the writer's owner awaits.
      timer ??= setTimeout(() => void flush().catch((err) => o.onWriteError?.(err)), o.flushMs)
    },
    /** Writes what is queued on its own. */
    flush,
    /**
     * Runs `fn` in a tenant transaction and appends what is queued (what `fn` pushed included) in
     * it, so a state change and its events commit together; the streams are told once it has.
     * Writes already on their way are awaited first, outside it: awaited inside, a write waiting
     * for a connection could wait for the very one the transaction holds (the embedded database
     * has one).
     */
    async commit<T>(fn: (sql: TxSql) => Promise<T>): Promise<T> {
      stopTimers()
      await writing
      const { out, batch, last } = await o.db.tenant(o.tenantId, async (sql) => {
        const out = await fn(sql)
        const batch = take()
        return { out, batch, last: batch.length ? await o.append(sql, batch) : 0 }
      })
      if (batch.length) written(batch, last)
      return out
    },
    stop: stopTimers,
  }
}

export type EventLogWriter = ReturnType<typeof eventLogWriter>

/**
 * Listens on a log's channel for the message that it has ended (see `ends`). Subscribe before the
 * log can end (before its first event is committed), or read its state once after: a message
 * sent before the subscription is not heard. `until` is the wait.
 */
export async function logEnd(cache: Pick<Cache, 'subscribe'>, channel: string) {
  let heard = false
  let wake = () => {}
  const unsubscribe = await cache.subscribe(channel, (message) => {
    const m = parseLogMessage(message)
    if (m && 'written' in m && m.ended) {
      heard = true
      wake()
    }
  })
  return {
    /** Resolves once the end is heard (true), `ms` have passed or `signal` aborted (false), whichever is first. */
    until(ms: number, signal?: AbortSignal): Promise<boolean> {
      if (heard || signal?.aborted) return Promise.resolve(heard)
      return new Promise<boolean>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          signal?.removeEventListener('abort', done)
          wake = () => {}
          resolve(heard)
        }
        const timer = setTimeout(done, ms)
        signal?.addEventListener('abort', done, { once: true })
        wake = done
      })
    },
    close: unsubscribe,
  }
}

/** Where a log lives: the row that numbers it (its event_seq) and the table of its events. */
export interface LogTables {
  owner: 'agent_runs' | 'chat_sessions'
  events: 'agent_run_events' | 'chat_events'
  /** The events' column naming the owner row. */
  key: 'run_id' | 'session_id'
}

/** Appends events to a log (numbered from its owner's event_seq), in `sql`'s transaction; the number of the last. */
export async function appendLogEvents(
  sql: TxSql,
  t: LogTables,
  tenantId: string,
  id: string,
  events: LoggedEvent[],
): Promise<number> {
  // Numbered by a live writer already: the owner's number only moves forward to the last.
  const given = events[0]?.seq !== undefined
  const [row] = given
    ? await sql<{ event_seq: number }[]>`
        update ${sql(t.owner)} set event_seq = greatest(event_seq, ${events.at(-1)!.seq!}) where tenant_id = ${tenantId} and id = ${id} returning event_seq`
    : await sql<{ event_seq: number }[]>`
        update ${sql(t.owner)} set event_seq = event_seq + ${events.length} where tenant_id = ${tenantId} and id = ${id} returning event_seq`
  const last = given ? events.at(-1)!.seq! : row!.event_seq
  const seqs = given ? events.map((e) => e.seq!) : events.map((_, i) => last - events.length + 1 + i)
  await sql`
    insert into ${sql(t.events)} (tenant_id, ${sql(t.key)}, seq, type, data)
    select ${tenantId}, ${id}, e.seq, e.type, e.data
      from unnest(${sql.array(seqs)}::int[], ${sql.array(events.map((e) => e.type))}::text[], ${sql.array(events.map((e) => JSON.stringify(e.data)))}::jsonb[])
        as e (seq, type, data)`
  return last
}

/** A log's events after `after`, in order. */
/**
 * One event, read, holds at most this much (its data as JSON text). What is written stays far below
 * it (deltas are flushed in bursts, tool calls and results kept as excerpts, a reply is bounded by
 * LLM_MAX_OUTPUT_CHARS); a larger one, written before those bounds, is read as {truncated, bytes}.
 */
export const EVENT_READ_MAX_BYTES = 4 * 1024 * 1024
/** One read of a log holds at most this much, or its first event alone: a replay is read in turns. */
export const EVENTS_READ_MAX_BYTES = 8 * 1024 * 1024

/**
 * Up to `limit` events after `after`, in order, as many as fit EVENTS_READ_MAX_BYTES (at least
 * one): the sizes are measured in the database, so nothing beyond the budget is sent to us.
 */
export function logEventsAfter(sql: TxSql, t: LogTables, tenantId: string, id: string, after: number, limit: number) {
  return sql<{ seq: number; type: string; data: Record<string, unknown>; created_at: Date }[]>`
    select seq, type, case when size > ${EVENT_READ_MAX_BYTES} then jsonb_build_object('truncated', true, 'bytes', size) else data end as data, created_at
      from (select seq, type, data, created_at, octet_length(data::text) as size,
                   sum(least(octet_length(data::text), ${EVENT_READ_MAX_BYTES})) over (order by seq) as upto
              from ${sql(t.events)}
             where tenant_id = ${tenantId} and ${sql(t.key)} = ${id} and seq > ${after}
             order by seq limit ${limit}) e
     where upto <= ${EVENTS_READ_MAX_BYTES} or upto = least(size, ${EVENT_READ_MAX_BYTES})
     order by seq`
}
