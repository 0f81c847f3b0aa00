// The time the license is judged by. A process clock can be set back (by hand, or on purpose to
// revive an expired license); the database's clock and the latest time this installation has ever
// seen cannot be moved by changing this machine's clock. So the license reads the latest of three:
// the process clock, the database's now() and the high-water mark in clock_marks (written at start
// and every hour). Between readings the process keeps the later time with the monotonic clock,
// which no one can set back, so a clock moved back while the server runs is caught as well.
import type { Logger } from 'pino'
import type { Clock } from '../clock.js'
import type { Db, TxSql } from './db.js'

/** A process clock behind the trusted time by less than this is drift, not a clock set back. */
export const CLOCK_TOLERANCE_MS = 5 * 60_000

export type TimeSource = 'process' | 'database' | 'mark'

export interface ClockReading {
  /** The database server's now(), in ms. */
  database: number
  /** The high-water mark, in ms; null before the first one is written. */
  mark: number | null
}

export interface TrustedTime {
  /** The later of the process clock and the latest trusted reading carried forward: ms, like Date.now. */
  now(): number
  /** How far the process clock is behind the trusted time, in ms (0 when it is not). */
  behindMs(): number
  /** Which clock the latest reading came from. */
  source(): TimeSource
  /** Takes a reading into account; returns how far behind the process clock is now. */
  observe(reading: ClockReading): number
}

export function trustedTime(clock: Clock = Date.now, monotonic: () => number = () => performance.now()): TrustedTime {
  // The latest trusted time seen, and the monotonic time it was seen at.
  let anchor = clock()
  let anchoredAt = monotonic()
  let from: TimeSource = 'process'
  const carried = () => anchor + (monotonic() - anchoredAt)
  const now = () => Math.max(clock(), carried())
  const behindMs = () => Math.max(0, carried() - clock())
  return {
    now,
    behindMs,
    source: () => (behindMs() > CLOCK_TOLERANCE_MS ? from : 'process'),
    observe(r) {
      const [time, source] =
        r.mark !== null && r.mark > r.database ? [r.mark, 'mark' as const] : [r.database, 'database' as const]
      if (time > now()) {
        anchor = time
        anchoredAt = monotonic()
        from = source
      }
      return behindMs()
    },
  }
}

/**
 * The database's clock and the high-water mark. A server started before the migrations ran
 * (MIGRATE_ON_START=false, the chart's Job not done yet) has no clock_marks: the database's clock
 * serves alone until then.
 */
export async function readClock(sql: TxSql): Promise<ClockReading & { marked: boolean }> {
  const [row] = await sql<
    { database: Date; marked: boolean }[]
  >`select now() as database, to_regclass('clock_marks') is not null as marked`
  const database = row!.database.getTime()
  if (!row!.marked) return { database, mark: null, marked: false }
  const [mark] = await sql<{ latest: Date }[]>`select latest from clock_marks`
  return { database, mark: mark?.latest.getTime() ?? null, marked: true }
}

/** Raises the high-water mark to `at`; never lowers it. */
export async function writeMark(sql: TxSql, at: number): Promise<void> {
  await sql`
    insert into clock_marks (only_row, latest) values (true, ${new Date(at)})
    on conflict (only_row) do update set latest = greatest(clock_marks.latest, excluded.latest)`
}

/**
 * Reads the clocks, then raises the mark to the trusted time: at start, and every hour after. Returns how far behind
 * the process clock is.
 */
export async function checkClock(db: Db, time: TrustedTime): Promise<number> {
  // Before the migrations ran there are no clock_marks, nor the role db.system acts as: the
  // database's clock is read outside a transaction and serves alone.
  const [schema] = await db.sql<{ marked: boolean }[]>`select to_regclass('clock_marks') is not null as marked`
  if (!schema!.marked) return time.observe(await readClock(db.sql))
  return db.system(async (sql) => {
    const reading = await readClock(sql)
    const behind = time.observe(reading)
    if (reading.marked) await writeMark(sql, time.now())
    return behind
  })
}

/** How often the clocks are read again and the high-water mark raised (queue 'license.clock', server/jobs.ts). */
export const CLOCK_CHECK_INTERVAL_MS = 3_600_000

/**
 * The hourly check, once per deployment (the runner leases it to one instance); every instance read
 * the clocks at start, and carries the later time forward on its monotonic clock. A clock that falls
 * behind is said once, when it does.
 */
export const clockCheck = (db: Db, time: TrustedTime, log: Logger) => async (): Promise<void> => {
  const wasBehind = time.behindMs() > CLOCK_TOLERANCE_MS
  await checkClock(db, time)
  if (!wasBehind) clockLag(log, time)
}

const DAY = 86_400_000
/** "3 days" or "12 minutes": how far behind, for a log line. */
export function describeLag(ms: number): string {
  if (ms >= DAY) return `${Math.floor(ms / DAY)} day(s)`
  if (ms >= 3_600_000) return `${Math.floor(ms / 3_600_000)} hour(s)`
  return `${Math.round(ms / 60_000)} minute(s)`
}

/** The one line that says this machine's clock is behind and what the license is judged by; null when it is not. */
export function lagMessage(time: TrustedTime): string | null {
  const behindMs = time.behindMs()
  if (behindMs <= CLOCK_TOLERANCE_MS) return null
  const by = time.source() === 'mark' ? 'the latest time this installation recorded' : "the database's clock"
  return `This machine's clock is ${describeLag(behindMs)} behind ${by}: the license is judged by the later time (${new Date(time.now()).toISOString()}); set the clock right (NTP)`
}

/** Logs lagMessage, when there is one. */
export function clockLag(log: Logger, time: TrustedTime): void {
  const message = lagMessage(time)
  if (message)
    log.warn({ clock: { behindSeconds: Math.round(time.behindMs() / 1000), source: time.source() } }, message)
}
