// PostgreSQL through postgres.js. With no DATABASE_URL, an embedded PGlite database in DATA_DIR is
// served on a unix socket so that the server and the admin CLI (a second process) share it.
import { createHash } from 'node:crypto'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Attributes } from '@opentelemetry/api'
import {
  ATTR_DB_NAMESPACE,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_RESPONSE_STATUS_CODE,
  ATTR_DB_SYSTEM_NAME,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  DB_SYSTEM_NAME_VALUE_POSTGRESQL,
} from '@opentelemetry/semantic-conventions'
import postgres from 'postgres'
import type { Logger } from 'pino'
import { notFound } from '../domain/errors.js'
import { decodeIdCursor, toPage } from '../domain/pagination.js'
import { privateDir, tightenTree } from './data-dir.js'
import { errorCode, failSpan, type Tracing } from './tracing.js'

export type Sql = postgres.Sql
/** The connection a transaction runs on; store functions take it so callers choose the transaction. */
export type TxSql = postgres.Sql
/** A value a statement is handed: a parameter, or JSON through sql.json. */
export type SqlValue = postgres.ParameterOrJSON<never>
/** A piece of a statement (sql`...` inside another), such as a where clause a store helper is handed. */
export type SqlFragment = postgres.PendingQuery<postgres.Row[]>

/** The two roles the server acts as; neither owns a table, so row-level security always applies. */
export const APP_ROLE = 'atrium_app'
export const SYSTEM_ROLE = 'atrium_system'

export interface Db {
  readonly mode: 'postgres' | 'embedded'
  /** Connection as the configured user (the table owner): migrations and operations only. */
  readonly sql: Sql
  /** A transaction that row-level security confines to one tenant. All tenant data goes through here. */
  tenant<T>(tenantId: string, fn: (sql: TxSql) => Promise<T>): Promise<T>
  /**
   * A read-only transaction confined to a tenant that sees one snapshot of the database
   * (REPEATABLE READ) however long it reads: what an export reads is consistent across tables.
   */
  tenantSnapshot<T>(tenantId: string, fn: (sql: TxSql) => Promise<T>): Promise<T>
  /**
   * One read confined to a tenant, in a single round trip (the tenant and the query go out in one
   * write). For the hot single-statement reads (get and list).
   */
  tenantRead<T extends readonly object[]>(tenantId: string, query: (sql: TxSql) => postgres.PendingQuery<T>): Promise<T>
  /** A transaction across tenants (authentication lookups, platform operators, background work). */
  system<T>(fn: (sql: TxSql) => Promise<T>): Promise<T>
  ping(): Promise<void>
  close(): Promise<void>
}

export interface DbOptions {
  databaseUrl: string
  dataDir: string
  poolMax: number
  log: Logger
  /** Each query under a request's or job's span becomes a span of its own; nothing is wrapped when tracing is off. */
  tracing?: Tracing
}

// postgres.js waits up to 20 s between reconnection attempts once a few have failed (its retry
// count is shared by the pool and grows with every failed connection during an outage), so a
// database back after a short cut would stay unused for that long. A second at most, with
// jitter, lets the pool notice within a moment; a connection attempt that gets no answer gives up
// after 10 s instead of 30, so requests caught in an outage are answered 503 sooner.
const RECONNECT = {
  backoff: (retries: number) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1),
  connect_timeout: 10,
}

export async function openDb(opts: DbOptions): Promise<Db> {
  if (opts.databaseUrl) {
    const options = { max: opts.poolMax, onnotice: () => {}, ...RECONNECT }
    const where = new URL(opts.databaseUrl)
    const traced = tracedBy(opts.tracing, {
      [ATTR_DB_NAMESPACE]: decodeURIComponent(where.pathname.slice(1)) || 'postgres',
      [ATTR_SERVER_ADDRESS]: where.hostname,
      [ATTR_SERVER_PORT]: Number(where.port) || 5432,
    })
    const sql = traced(postgres(opts.databaseUrl, { ...options, connection: { application_name: 'atrium' } }))
    // Tenant work logs in as atrium_app itself (the role startup parameter): no role switch per
    // transaction. Connections open lazily, after migrations have created the role.
    const app = traced(
      postgres(opts.databaseUrl, { ...options, connection: { application_name: 'atrium', role: APP_ROLE } }),
    )
    return wrap('postgres', sql, { pool: app, max: opts.poolMax }, async () => {
      await app.end({ timeout: 5 })
      await sql.end({ timeout: 5 })
    })
  }
  // A guest connects at once: from then on the owner waits for it before closing. If the owner
  // closed between our look at its lock and our connection, the database is free: try again.
  for (let attempt = 1; ; attempt++) {
    const embedded = await openEmbedded(opts.dataDir, opts.log)
    const sql = tracedBy(opts.tracing, { [ATTR_DB_NAMESPACE]: 'postgres' })(
      postgres({
        path: embedded.socketPath,
        max: 1,
        onnotice: () => {},
        username: 'postgres',
        database: 'postgres',
      }),
    )
    try {
      await sql`select 1`
    } catch (err) {
      await sql.end({ timeout: 1 }).catch(() => {})
      await embedded.close()
      if (embedded.owner || attempt >= 5) throw err
      continue
    }
    // PGlite has one session shared by every socket connection: roles can only be per transaction.
    return wrap('embedded', sql, null, async () => {
      await sql.end({ timeout: 5 })
      await embedded.close()
    })
  }
}

// ---- spans of queries --------------------------------------------------------------------------

/** What postgres.js's Query has that a span needs (its class is not exported). */
interface RunningQuery {
  tagged: boolean
  /** A tagged template's pieces, or unsafe()'s text. */
  strings: readonly string[] | string
  /** The statement as sent, with $1, $2... where the values go (set once it is built). */
  string?: string
  executed: boolean
  cursorRows?: number
  handle(): Promise<void>
  resolve(value: unknown): void
  reject(err: unknown): void
}

/** Statement text kept on a span: enough to know the statement, bounded whatever a store builds. */
const QUERY_TEXT_CHARS = 2000
const firstKeyword = (text: string) => /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase()

/**
 * A pool, and every transaction and reserved connection made from it, whose queries are client
 * spans under the active span (none outside a request or job). The span starts when the query is
 * sent (awaited or executed: postgres.js sends nothing before) and ends when it is answered. The
 * text is the statement with its placeholders (db.query.text), only for tagged templates: their
 * values travel apart from it, and the fragments spliced in with sql.unsafe are the code's own
 * column lists. A failed query says its SQLSTATE, never its message (which can quote values).
 */
function tracedBy(tracing: Tracing | undefined, base: Attributes): (sql: Sql) => Sql {
  if (!tracing?.enabled) return (sql) => sql
  const attributes = { [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_POSTGRESQL, ...base }
  const start = (q: RunningQuery) => {
    const span = tracing.child('postgresql', attributes)
    if (!span) return // most queries, when a request is not sampled: nothing more is done for them
    // Named by the template's first piece, or, for a statement that begins with a fragment
    // (sql`${...} ...`), once it is built.
    const keyword = firstKeyword(typeof q.strings === 'string' ? q.strings : (q.strings[0] ?? ''))
    if (keyword) span.updateName(keyword).setAttribute(ATTR_DB_OPERATION_NAME, keyword)
    const { resolve, reject } = q
    let open = true
    const end = (err: unknown) => {
      if (!open) return
      open = false
      const operation = !keyword && q.string ? firstKeyword(q.string) : undefined
      if (operation) span.updateName(operation).setAttribute(ATTR_DB_OPERATION_NAME, operation)
      if (q.tagged && q.string) span.setAttribute(ATTR_DB_QUERY_TEXT, q.string.slice(0, QUERY_TEXT_CHARS))
      if (err !== null) {
        const code = errorCode(err)
        if (/^[0-9A-Z]{5}$/.test(code)) span.setAttribute(ATTR_DB_RESPONSE_STATUS_CODE, code)
        failSpan(span, code)
      }
      span.end()
    }
    q.resolve = (value) => (end(null), resolve(value))
    q.reject = (err) => (end(err), reject(err))
  }
  const watch = (q: unknown) => {
    const query = q as RunningQuery
    if (!(q instanceof Promise) || typeof query.handle !== 'function') return q // a helper's value (sql(...))
    const handle = query.handle
    // A cursor settles per batch of rows, not once: left without a span.
    query.handle = () => (!query.executed && !query.cursorRows && start(query), handle.call(query))
    return q
  }
  const withCallback =
    (fn: (...a: unknown[]) => unknown) =>
    (...a: unknown[]) => {
      const body = a.pop() as (tx: Sql) => unknown
      return fn(...a, (tx: Sql) => body(traced(tx)))
    }
  const traced = (sql: Sql): Sql =>
    new Proxy(sql, {
      apply: (target, self, args) => watch(Reflect.apply(target, self, args)),
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop)
        if (typeof value !== 'function') return value
        const fn = value as (...a: unknown[]) => unknown
        switch (prop) {
          case 'unsafe':
          case 'file':
            return (...a: unknown[]) => watch(fn(...a))
          case 'begin':
          case 'savepoint':
            return withCallback(fn)
          case 'reserve':
            return async () => traced((await fn()) as Sql)
          default:
            return value
        }
      },
    })
  return traced
}

/** A connection for one unit of work, and how to hand it back (broken: its session cannot be trusted). */
interface Lease {
  sql: TxSql
  done(broken: boolean): void
}
type Leaser = () => Promise<Lease>

/** A connection reserved from postgres.js for one unit of work and released after it. */
const reserving =
  (pool: Sql): Leaser =>
  async () => {
    const c = await pool.reserve()
    return { sql: c, done: () => c.release() }
  }

type HeldSql = postgres.ReservedSql & { usable(): boolean }
interface Held {
  sql: HeldSql
  /** The tenant the session has once everything sent to it has run (null: not known). */
  tenant: string | null
  /** When it goes back to postgres.js, which recycles connections after their max_lifetime. */
  until: number
  /** Reads sent to it and not yet answered: they share it, one behind the other. */
  reads: number
  /** A transaction holds it alone. */
  exclusive: boolean
  /** It takes no new reads: a transaction waits for it. */
  draining: boolean
  /** Its connection failed: it takes nothing more and is dropped once its reads are answered. */
  broken: boolean
}

/** Reads one session carries at once, sent one behind the other (postgres.js pipelines them). */
const READS_PER_SESSION = 16

/**
 * The tenant pool's connections, kept reserved between requests with the tenant each session is
 * set to (set_config(..., false)), so that a read for a tenant the session already has sends its
 * query alone. Setting the tenant in its own statement cost PostgreSQL as much as the read itself:
 * 20,000 reads a second as the tenant role with the tenant set, 8,900 when each one also set it
 * (pgbench, docs/performance.md).
 *
 * Reads share sessions, pipelined as postgres.js does for its own pool (fewer writes, fewer
 * wake-ups): a read goes to the session where the least waits before it, counting a tenant switch
 * as one statement more; the switch is sent in the same tick as the read, so nothing can come
 * between them. A transaction takes an idle session alone; when none is idle and the pool is full,
 * the least busy session stops taking reads and is handed over once they are answered.
 *
 * The tenant a session remembers cannot go stale: a held handle refuses every query once its
 * connection has closed (our postgres.js patch; `usable()` says so first), so a session is never
 * silently swapped for a new one, and one whose work failed with the connection is dropped. Were a
 * tenant switch to fail while reads behind it still ran, they would run as the previous tenant, and
 * every store query also filters tenant_id by parameter: they could find nothing (a 404), never
 * another tenant's rows.
 */
function sessionKeeper(pool: Sql, max: number) {
  const sessions: Held[] = []
  /** Reads waiting for room on a session: started on one, or refused if none can be had. */
  const readers: { start(s: Held): void; reject(err: unknown): void }[] = []
  const writers: { resolve(s: Held): void; reject(err: unknown): void }[] = []
  let opening = 0
  let closed = false
  const closedError = () => Object.assign(new Error('the database pool is closed'), { code: 'CONNECTION_ENDED' })

  const open = (then: (s: Held) => void, failed: (err: unknown) => void) => {
    opening++
    pool.reserve().then(
      (sql) => {
        opening--
        const s: Held = {
          sql: sql as HeldSql,
          tenant: null,
          until: Date.now() + (30 + Math.random() * 30) * 60_000,
          reads: 0,
          exclusive: false,
          draining: false,
          broken: false,
        }
        sessions.push(s)
        then(s)
        settle(s) // room for reads that waited meanwhile
      },
      (err: unknown) => {
        opening--
        failed(err)
      },
    )
  }
  const drop = (s: Held) => {
    sessions.splice(sessions.indexOf(s), 1)
    s.sql.release()
  }
  /** Drops idle sessions whose connection closed while they waited (the pool may reconnect it for others). */
  const prune = () => {
    for (let i = sessions.length - 1; i >= 0; i--) {
      const s = sessions[i]!
      if (s.reads === 0 && !s.exclusive && !s.sql.usable()) drop(s)
    }
  }
  const available = (s: Held) =>
    !s.exclusive && !s.draining && !s.broken && s.reads < READS_PER_SESSION && s.sql.usable()
  const full = () => sessions.length + opening >= max

  /** A session that is free again (no reads, no transaction) or has room: who waits gets it. */
  const settle = (s: Held) => {
    if (s.reads === 0 && !s.exclusive) {
      if (s.broken || closed || !s.sql.usable() || (Date.now() > s.until && !s.draining)) {
        drop(s)
        // Its place in the pool serves whoever waits, on a new connection.
        const w = writers.shift()
        if (w) open((n) => ((n.exclusive = true), w.resolve(n)), w.reject)
        else if (readers.length) open(settle, (err) => readers.splice(0).forEach((r) => r.reject(err)))
        return
      }
      s.draining = false // drained for a transaction, or no longer needed by one
      const w = writers.shift()
      if (w) {
        s.exclusive = true
        w.resolve(s)
        return
      }
    }
    while (readers.length && available(s)) readers.shift()!.start(s)
  }

  return {
    /** Runs the read on a shared session, after setting its tenant if the session has another. */
    read<T>(tenantId: string, query: (sql: TxSql) => postgres.PendingQuery<T & readonly object[]>): Promise<T> {
      if (closed) return Promise.reject(closedError())
      prune()
      return new Promise<T>((resolve, reject) => {
        const start = (s: Held) => {
          s.reads++
          let sent: Promise<unknown>
          try {
            let switched: Promise<unknown> | null = null
            if (s.tenant !== tenantId) {
              s.tenant = tenantId
              switched = s.sql`select set_config('app.tenant_id', ${tenantId}, false)`.execute()
              switched.catch(() => (s.tenant = null))
            }
            const done = query(s.sql).execute()
            sent = switched ? Promise.all([switched, done]).then(([, rows]) => rows) : done
          } catch (err) {
            sent = Promise.reject(err) // a query that could not be built: nothing was sent for it
          }
          sent.then(
            (rows) => {
              s.reads--
              settle(s)
              resolve(rows as T)
            },
            (err: unknown) => {
              if (isDatabaseUnavailable(err)) s.broken = true
              s.reads--
              settle(s)
              reject(err)
            },
          )
        }
        let best: Held | null = null
        let cost = Infinity
        for (const s of sessions) {
          if (!available(s)) continue
          const c = s.reads + (s.tenant === tenantId ? 0 : 1)
          if (c < cost) [best, cost] = [s, c]
          if (c === 0) break
        }
        if (best && (cost === 0 || full())) return start(best)
        if (!full()) return open(start, reject)
        readers.push({ start, reject })
      })
    },
    /** A session alone, for a transaction; give it back with done(). */
    async lease(): Promise<Lease> {
      if (closed) throw closedError()
      prune()
      let s = sessions.find((x) => available(x) && x.reads === 0)
      if (s) s.exclusive = true
      else if (!full())
        s = await new Promise<Held>((resolve, reject) => open((n) => ((n.exclusive = true), resolve(n)), reject))
      else {
        // The least busy session takes no more reads and comes to this transaction once they are answered.
        if (!sessions.some((x) => x.draining)) {
          let pick: Held | null = null
          for (const x of sessions) if (!x.exclusive && !x.broken && (!pick || x.reads < pick.reads)) pick = x
          if (pick) pick.draining = true
        }
        s = await new Promise<Held>((resolve, reject) => writers.push({ resolve, reject }))
      }
      const held = s
      return {
        sql: held.sql,
        done(broken) {
          held.exclusive = false
          if (broken) held.broken = true
          settle(held)
          // Readers that waited while every session was taken may have room elsewhere now.
          for (const x of sessions) if (readers.length && x !== held) settle(x)
        },
      }
    },
    close() {
      closed = true
      for (const s of [...sessions]) if (s.reads === 0 && !s.exclusive) drop(s)
      for (const w of writers.splice(0)) w.reject(closedError())
      for (const r of readers.splice(0)) r.reject(closedError())
    },
  }
}

function wrap(mode: Db['mode'], sql: Sql, app: { pool: Sql; max: number } | null, close: () => Promise<void>): Db {
  const sessions = app ? sessionKeeper(app.pool, app.max) : null
  const system = reserving(sql)
  // A transaction's opening statements (BEGIN, and its role and tenant) travel in the same write as
  // the caller's first query (postgres.js sends everything issued in one tick together), so a
  // one-query transaction costs two round trips, not four. It stays safe: if BEGIN or the context
  // failed, the caller's queries fail too (an aborted transaction refuses them, 25P02) and
  // everything rolls back. set_config(..., true) ends with the transaction, leaving the session's
  // own tenant as it was. BEGIN and COMMIT go as simple-protocol messages (no parameters), lighter
  // than extended ones.
  const inTransaction = async <T>(
    leased: Lease,
    role: string | null,
    tenantId: string,
    body: (tx: TxSql, opened: Promise<unknown>) => Promise<T>,
    snapshot = false,
  ): Promise<T> => {
    const tx = leased.sql
    let broken = false
    let openingFailed: unknown = null
    try {
      const opened = Promise.all([
        (snapshot ? tx`begin isolation level repeatable read read only` : tx`begin`).simple().execute(),
        role
          ? tx`select set_config('role', ${role}, true), set_config('app.tenant_id', ${tenantId}, true)`.execute()
          : tx`select set_config('app.tenant_id', ${tenantId}, true)`.execute(),
      ])
      // Awaited by the body; kept here too, so that an early failure is never unhandled and, when BEGIN
      // or the role failed, is what the transaction reports: the body's queries then failed only as
      // a consequence (25P02, an aborted transaction).
      opened.catch((e: unknown) => (openingFailed = e))
      return await body(tx, opened)
    } catch (err) {
      await tx`rollback`
        .simple()
        .execute()
        .catch(() => (broken = true))
      // set_config('role') refuses a role that does not exist with 22023: the migrations, which make
      // the roles, have not run. Said as PostgreSQL's own 'undefined object', which answers 503.
      if (role && (openingFailed as { code?: string } | null)?.code === '22023')
        throw Object.assign(new Error(`role ${role} does not exist: the database is not migrated`), {
          code: '42704',
          cause: openingFailed,
        })
      throw openingFailed ?? err
    } finally {
      leased.done(broken)
    }
  }
  const run = async <T>(
    leaser: Leaser,
    role: string | null,
    tenantId: string,
    fn: (tx: TxSql) => Promise<T>,
    snapshot = false,
  ) =>
    inTransaction(
      await leaser(),
      role,
      tenantId,
      async (tx, opened) => {
        const result = await fn(tx)
        await opened
        await tx`commit`.simple()
        return result
      },
      snapshot,
    )
  const tenantLeaser: Leaser = sessions ? () => sessions.lease() : system

  const tenantRead = async <T extends readonly object[]>(
    tenantId: string,
    query: (tx: TxSql) => postgres.PendingQuery<T>,
  ): Promise<T> => {
    if (sessions) return sessions.read(tenantId, query)
    return inTransaction(await system(), APP_ROLE, tenantId, async (tx, opened) => {
      // If the query failed, COMMIT of the aborted transaction rolls it back: nothing to undo.
      // Promise.all observes all three, so no failure goes unhandled; the first one is reported.
      const [, rows] = await Promise.all([opened, query(tx).execute(), tx`commit`.simple().execute()])
      return rows
    })
  }

  return {
    mode,
    sql,
    tenant: (tenantId, fn) => run(tenantLeaser, sessions ? null : APP_ROLE, tenantId, fn),
    tenantSnapshot: (tenantId, fn) => run(tenantLeaser, sessions ? null : APP_ROLE, tenantId, fn, true),
    tenantRead,
    system: (fn) => run(system, SYSTEM_ROLE, '', fn),
    // Through real transactions in both roles: a database that answers but where the server
    // cannot act as its roles is not ready either.
    ping: async () => {
      await run(system, SYSTEM_ROLE, '', (tx) => tx`select 1`)
      if (sessions)
        await run(
          () => sessions.lease(),
          null,
          '',
          (tx) => tx`select 1`,
        )
    },
    close: async () => {
      sessions?.close()
      await close()
    },
  }
}

// What says a dependency is away, not that the request was wrong. The database's: postgres.js's own
// connection errors, and PostgreSQL's connection exceptions (class 08), shutdown and recovery
// (57P01-57P03), a standby after a failover refusing writes (25006), insufficient resources (class
// 53: too many connections, disk or memory full), and serialization failures and deadlocks, which
// the same request survives when retried. A socket's errors may come from any dependency the code
// reached without handling them itself (most are the database's: others map their own).
const DATABASE_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
  '25006',
  '40001',
  '40P01',
])
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
])
// A schema this release's SQL does not find (a table, column, function or role missing; a login
// as a role the migrations make, 28000): the
// database is not migrated yet (MIGRATE_ON_START=false while the migration job has not run), which
// the migrations, not the client, put right.
const SCHEMA_CODES = new Set(['42P01', '42703', '42883', '42704', '28000'])

/** Which dependency an error says is unavailable (answer 503, the client retries), or null. */
export function unavailableDependency(err: unknown): 'database' | 'schema' | 'network' | null {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return null
  if (DATABASE_CODES.has(code) || /^(08|53)[0-9A-Z]{3}$/.test(code)) return 'database'
  if (SCHEMA_CODES.has(code)) return 'schema'
  return NETWORK_CODES.has(code) ? 'network' : null
}

export const isDatabaseUnavailable = (err: unknown) => unavailableDependency(err) !== null

/**
 * A page of a list held within `budget` bytes: up to `limit` rows of `table` matching `where`, in
 * id order, and only as many as fit the budget by `size` (an SQL expression, measured in the
 * database: nothing beyond the budget is sent to us), the first row always. `more` is true when
 * the budget cut the page short of the rows it could have held.
 */
export async function pageWithinBytes<T>(
  sql: TxSql,
  o: {
    table: string
    columns: string
    where: SqlFragment
    size: string
    desc: boolean
    limit: number
    budget: number
  },
): Promise<{ rows: T[]; more: boolean }> {
  const order = sql.unsafe(o.desc ? 'desc' : 'asc')
  const rows = await sql<(T & { fetched: number })[]>`
    with sized as (
      select id, size, sum(size) over (order by id ${order}) as upto
        from (select id, ${sql.unsafe(o.size)} as size from ${sql(o.table)} where ${o.where} order by id ${order} limit ${o.limit}) r)
    select ${sql.unsafe(
      o.columns
        .split(',')
        .map((c) => `t.${c.trim()}`)
        .join(', '),
    )}, (select count(*) from sized)::int as fetched
      from sized s join ${sql(o.table)} t on t.id = s.id
     where s.upto - s.size = 0 or s.upto <= ${o.budget}
     order by t.id ${order}`
  const more = rows.length > 0 && rows[0]!.fetched > rows.length
  return { rows: rows.map(({ fetched: _, ...r }) => r as unknown as T), more }
}

/**
 * A tenant's table of rows keyed by their time-ordered id, with the statements every such
 * collection shares: a row added, a row changed, a page newest first below the cursor `before` (an
 * id), one row by id (`lock`ed for a change in the same transaction). Rows come back as `columns`,
 * the store's column list; it, `table` and the column names of `values` are code, never input.
 */
export function tenantRows<T extends { id: string }>(table: string, columns: string) {
  return {
    /** Adds the tenant's row of `values` (by column name, its id among them), and returns it. */
    insert: async (sql: TxSql, tenantId: string, values: { id: string } & Record<string, SqlValue>): Promise<T> => {
      const [row] = await sql<T[]>`
        insert into ${sql(table)} ${sql({ ...values, tenant_id: tenantId })} returning ${sql.unsafe(columns)}`
      return row!
    },
    /** Sets `values` (by column name) on the tenant's row `id`, stamped updated now; none when there is no such row. */
    update: async (
      sql: TxSql,
      tenantId: string,
      id: string,
      values: Record<string, SqlValue>,
    ): Promise<T | undefined> => {
      const [row] = await sql<T[]>`
        update ${sql(table)} set ${sql(values)}, updated_at = now()
         where tenant_id = ${tenantId} and id = ${id}
        returning ${sql.unsafe(columns)}`
      return row
    },
    page: (sql: TxSql, tenantId: string, limit: number, before: string | null) =>
      sql<T[]>`
        select ${sql.unsafe(columns)} from ${sql(table)}
         where tenant_id = ${tenantId} ${before ? sql`and id < ${before}` : sql``}
         order by id desc limit ${limit}`,
    byId: (sql: TxSql, tenantId: string, id: string, opts: { lock?: boolean } = {}) =>
      sql<T[]>`
        select ${sql.unsafe(columns)} from ${sql(table)}
         where tenant_id = ${tenantId} and id = ${id} ${opts.lock ? sql`for update` : sql``}`,
  }
}
export type TenantRows<T extends { id: string }> = ReturnType<typeof tenantRows<T>>

/**
 * The list and get a service answers for tenantRows, each one read in a single round trip: a page
 * of `limit` from the request's cursor, and a row by id or RESOURCE_NOT_FOUND naming `resource`.
 */
export function tenantReads<T extends { id: string }>(db: Db, resource: string, rows: TenantRows<T>) {
  return {
    async list(tenantId: string, page: { limit: number; cursor?: string }) {
      const before = decodeIdCursor(page.cursor)
      const fetched = await db.tenantRead(tenantId, (sql) => rows.page(sql, tenantId, page.limit + 1, before))
      return toPage(fetched, page.limit, (r) => r.id)
    },
    get: async (tenantId: string, id: string): Promise<T> => {
      const [row] = await db.tenantRead(tenantId, (sql) => rows.byId(sql, tenantId, id))
      if (!row) throw notFound(resource, id)
      return row
    },
  }
}

/** A unique constraint refused the write (the race-free way to say "already exists"). */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23505' && e.constraint_name === constraint
}

/** A foreign key refused the write (a referenced row that is not there, or not the tenant's: the composite keys). */
export function isForeignKeyViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23503' && e.constraint_name === constraint
}

// ---- embedded PGlite ------------------------------------------------------------------------

interface LockInfo {
  pid: number
  socket: string
}

/** Embedded databases this process owns, by folder: a second open in the same process is a guest. */
const ownedHere = new Map<string, Promise<string>>()
const STALE_UNREADABLE_MS = 5000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

type Acquired =
  { owner: true; ready(socket: string): void; failed(err: unknown): void } | { owner: false; socket: string }

/**
 * One process owns the PGlite files (it is single-process) and serves them on a unix socket named
 * in DATA_DIR/db.lock; any other process (the admin CLI while `npm start` runs) connects to that
 * socket. The lock is only ever created exclusively; a stale one (its process is gone, or it stayed
 * unreadable, as a crash mid-write leaves it) is removed only by the holder of db.lock.takeover.
 */
async function acquireLock(dir: string, lockPath: string): Promise<Acquired> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const here = ownedHere.get(dir)
    if (here) return { owner: false, socket: await here }
    try {
      writeFileSync(lockPath, JSON.stringify({ pid: process.pid, socket: '' }), { flag: 'wx', mode: 0o600 })
      // Registered before any await, so a second open in this process waits for this one.
      let ready!: (socket: string) => void
      let failed!: (err: unknown) => void
      const socket = new Promise<string>((res, rej) => {
        ready = res
        failed = rej
      })
      socket.catch(() => {})
      ownedHere.set(dir, socket)
      return { owner: true, ready, failed }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = readLock(lockPath)
    if (holder && holder.pid !== process.pid && isAlive(holder.pid)) {
      if (await canConnect(holder.socket)) return { owner: false, socket: holder.socket }
      // the owner is starting up or shutting down: wait for it rather than touch its files
    } else if (isStale(lockPath, holder)) {
      removeStale(lockPath)
      continue
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the embedded database in ${dir} is held by ${holder ? `process ${holder.pid}` : 'an unreadable lock'}, which does not answer`,
      )
    }
    await sleep(200)
  }
}

/**
 * A lock whose process is gone (or had our pid in an earlier life: pid 1 in every container), or unreadable for a
 * while.
 */
function isStale(lockPath: string, holder: LockInfo | null): boolean {
  if (holder) return holder.pid === process.pid || !isAlive(holder.pid)
  try {
    return Date.now() - statSync(lockPath).mtimeMs > STALE_UNREADABLE_MS
  } catch {
    return false // gone already: the next exclusive create decides
  }
}

function removeStale(lockPath: string) {
  const guard = `${lockPath}.takeover`
  try {
    if (Date.now() - statSync(guard).mtimeMs > STALE_UNREADABLE_MS) rmSync(guard, { force: true }) // a takeover that crashed
  } catch {
    // no guard: the usual case
  }
  try {
    writeFileSync(guard, String(process.pid), { flag: 'wx', mode: 0o600 })
  } catch {
    return // another process is taking over; let it
  }
  try {
    // judged again under the guard: someone may have replaced the stale lock meanwhile
    if (isStale(lockPath, readLock(lockPath))) rmSync(lockPath, { force: true })
  } finally {
    rmSync(guard, { force: true })
  }
}

async function openEmbedded(
  dataDir: string,
  log: Logger,
): Promise<{ socketPath: string; owner: boolean; close(): Promise<void> }> {
  const dir = privateDir(dataDir, log)
  const lockPath = join(dir, 'db.lock')
  const got = await acquireLock(dir, lockPath)
  if (!got.owner) return { socketPath: got.socket, owner: false, close: async () => {} }

  try {
    const { PGlite } = await import('@electric-sql/pglite')
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
    const db = await PGlite.create(join(dir, 'pgdata'))
    // After PGlite has opened: its initdb leaves files 0666, and an older version may have left
    // loose files. What it creates later lands in folders no one else can enter.
    tightenTree(dir, log)
    const socketPath = socketPathFor(dir)
    rmSync(socketPath, { force: true })
    const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: 16 })
    await server.start()
    chmodSync(socketPath, 0o600) // listen() made it as the umask allows
    writeFileSync(lockPath, JSON.stringify({ pid: process.pid, socket: socketPath } satisfies LockInfo), {
      mode: 0o600,
    })
    got.ready(socketPath)
    log.info({ dataDir: dir }, 'embedded database (PGlite) open')
    return {
      socketPath,
      owner: true,
      close: async () => {
        // Let another process (an admin CLI command) finish before the database goes away.
        const until = Date.now() + 30_000
        while (server.getStats().activeConnections > 0 && Date.now() < until) await sleep(100)
        await server.stop()
        await db.close()
        ownedHere.delete(dir)
        rmSync(socketPath, { force: true })
        if (readLock(lockPath)?.pid === process.pid) rmSync(lockPath, { force: true })
      },
    }
  } catch (err) {
    got.failed(err)
    ownedHere.delete(dir)
    rmSync(lockPath, { force: true })
    throw err
  }
}

/** Unix socket paths are limited to ~107 bytes; a deep DATA_DIR gets a private folder in tmp. */
function socketPathFor(dir: string): string {
  const inDir = join(dir, 'db.sock')
  if (Buffer.byteLength(inDir) < 100) return inDir
  const hash = createHash('sha256').update(dir).digest('hex').slice(0, 12)
  return join(mkdtempSync(join(tmpdir(), `atrium-${hash}-`)), 'db.sock')
}

function readLock(path: string): LockInfo | null {
  if (!existsSync(path)) return null
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockInfo>
    return typeof v.pid === 'number' ? { pid: v.pid, socket: String(v.socket ?? '') } : null
  } catch {
    return null
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function canConnect(path: string): Promise<boolean> {
  if (!path) return Promise.resolve(false)
  return new Promise((done) => {
    const s = connect(path)
    s.once('connect', () => {
      s.destroy()
      done(true)
    })
    s.once('error', () => done(false))
  })
}
