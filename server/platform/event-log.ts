// A writer for a durable, numbered event log (an agent run's, a chat session's): events written in
// the transaction of a state change, or on their own; streamed text coalesced into one row per
// burst rather than one per token. After each write commits, a message on the cache's pub/sub
// wakes the streams following the log on every replica (http/sse.ts reads the rows).
import type { Cache } from './cache.js'
import type { Db, TxSql } from './db.js'

export interface LoggedEvent {
  type: string
  data: Record<string, unknown>
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
}

export function eventLogWriter<K extends string | number>(o: EventLogTarget & { deltaEvent: (key: K, text: string) => LoggedEvent }) {
  let queued: LoggedEvent[] = []
  let delta: { key: K; text: string } | null = null
  let timer: NodeJS.Timeout | null = null
  let writing: Promise<void> = Promise.resolve()
  const closeDelta = () => {
    if (delta) queued.push(o.deltaEvent(delta.key, delta.text))
    delta = null
  }
  const take = () => {
    closeDelta()
    const out = queued
    queued = []
    return out
  }
  const stopTimer = () => {
    if (timer) clearTimeout(timer)
    timer = null
  }
  const notify = (seq: number) => void o.cache.publish(o.channel, String(seq))
  const flush = () => {
    stopTimer()
    const batch = take()
    if (batch.length) writing = writing.then(async () => notify(await o.db.tenant(o.tenantId, (sql) => o.append(sql, batch))))
    return writing
  }
  return {
    push(type: string, data: Record<string, unknown>) {
      closeDelta()
      queued.push({ type, data })
    },
    /** Text streamed under `key` (a step, a message): joined with what came before it until the next flush. */
    delta(key: K, text: string) {
      if (delta && delta.key === key) delta.text += text
      else {
        closeDelta()
        delta = { key, text }
      }
      // A failed write surfaces at the next flush or `within`, which the writer's owner awaits.
      timer ??= setTimeout(() => void flush().catch(() => {}), o.flushMs)
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
      stopTimer()
      await writing
      let seq: number | null = null
      const out = await o.db.tenant(o.tenantId, async (sql) => {
        const r = await fn(sql)
        const batch = take()
        if (batch.length) seq = await o.append(sql, batch)
        return r
      })
      if (seq !== null) notify(seq)
      return out
    },
    stop: stopTimer,
  }
}

export type EventLogWriter = ReturnType<typeof eventLogWriter>

/** Where a log lives: the row that numbers it (its event_seq) and the table of its events. */
export interface LogTables {
  owner: 'agent_runs' | 'chat_sessions'
  events: 'agent_run_events' | 'chat_events'
  /** The events' column naming the owner row. */
  key: 'run_id' | 'session_id'
}

/** Appends events to a log (numbered from its owner's event_seq), in `sql`'s transaction; the number of the last. */
export async function appendLogEvents(sql: TxSql, t: LogTables, tenantId: string, id: string, events: LoggedEvent[]): Promise<number> {
  const [row] = await sql<{ event_seq: number }[]>`
    update ${sql(t.owner)} set event_seq = event_seq + ${events.length} where tenant_id = ${tenantId} and id = ${id} returning event_seq`
  const last = row!.event_seq
  const first = last - events.length + 1
  await sql`
    insert into ${sql(t.events)} (tenant_id, ${sql(t.key)}, seq, type, data)
    select ${tenantId}, ${id}, e.seq, e.type, e.data
      from unnest(${sql.array(events.map((_, i) => first + i))}::int[], ${sql.array(events.map((e) => e.type))}::text[], ${sql.array(events.map((e) => JSON.stringify(e.data)))}::jsonb[])
        as e (seq, type, data)`
  return last
}

/** A log's events after `after`, in order. */
export function logEventsAfter(sql: TxSql, t: LogTables, tenantId: string, id: string, after: number, limit: number) {
  return sql<{ seq: number; type: string; data: Record<string, unknown>; created_at: Date }[]>`
    select seq, type, data, created_at from ${sql(t.events)}
     where tenant_id = ${tenantId} and ${sql(t.key)} = ${id} and seq > ${after}
     order by seq limit ${limit}`
}
