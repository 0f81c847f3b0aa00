// PostgreSQL through postgres.js. With no DATABASE_URL, an embedded PGlite database in DATA_DIR is
// served on a unix socket so that the server and the admin CLI (a second process) share it.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import postgres from 'postgres'
import type { Logger } from 'pino'

export type Sql = postgres.Sql
/** The connection a transaction runs on; store functions take it so callers choose the transaction. */
export type TxSql = postgres.Sql

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
   * One read in a tenant transaction, in a single round trip: BEGIN, the tenant, the query and
   * COMMIT go out in one write. For the hot single-statement reads (get and list).
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
}

export async function openDb(opts: DbOptions): Promise<Db> {
  if (opts.databaseUrl) {
    const sql = postgres(opts.databaseUrl, {
      max: opts.poolMax,
      onnotice: () => {},
      connection: { application_name: 'atrium' },
    })
    return wrap('postgres', sql, async () => { await sql.end({ timeout: 5 }) })
  }
  const embedded = await openEmbedded(opts.dataDir, opts.log)
  const sql = postgres({ path: embedded.socketPath, max: 1, onnotice: () => {}, username: 'postgres', database: 'postgres' })
  return wrap('embedded', sql, async () => {
    await sql.end({ timeout: 5 })
    await embedded.close()
  })
}

function wrap(mode: Db['mode'], sql: Sql, close: () => Promise<void>): Db {
  // BEGIN and the transaction's role and tenant travel in the same write as the caller's first
  // query (postgres.js sends everything issued in one tick together), so a one-query transaction
  // costs two round trips, not four. It stays safe: if BEGIN or the context failed, the caller's
  // queries fail too (an aborted transaction refuses them, 25P02) and everything rolls back.
  // set_config(..., true) lasts until the transaction ends, so a pooled connection never carries
  // one request's tenant into the next. BEGIN and COMMIT go as simple-protocol messages (no
  // parameters), lighter than extended ones.
  const inTransaction = async <T>(role: string, tenantId: string, body: (tx: TxSql, opened: Promise<unknown>) => Promise<T>): Promise<T> => {
    const tx = await sql.reserve()
    try {
      const opened = Promise.all([
        tx`begin`.simple().execute(),
        tx`select set_config('role', ${role}, true), set_config('app.tenant_id', ${tenantId}, true)`.execute(),
      ])
      opened.catch(() => {}) // awaited by the body; this only keeps an early failure from going unhandled
      return await body(tx, opened)
    } catch (err) {
      await tx`rollback`.simple().catch(() => {})
      throw err
    } finally {
      tx.release()
    }
  }
  const run = <T>(role: string, tenantId: string, fn: (tx: TxSql) => Promise<T>) =>
    inTransaction(role, tenantId, async (tx, opened) => {
      const result = await fn(tx)
      await opened
      await tx`commit`.simple()
      return result
    })
  const tenantRead = <T extends readonly object[]>(tenantId: string, query: (tx: TxSql) => postgres.PendingQuery<T>) =>
    inTransaction(APP_ROLE, tenantId, async (tx, opened) => {
      // If the query failed, COMMIT of the aborted transaction rolls it back: nothing to undo.
      // Promise.all observes all three, so no failure goes unhandled; the first one is reported.
      const [, rows] = await Promise.all([opened, query(tx).execute(), tx`commit`.simple().execute()])
      return rows
    })
  return {
    mode,
    sql,
    tenant: (tenantId, fn) => run(APP_ROLE, tenantId, fn),
    tenantRead,
    system: (fn) => run(SYSTEM_ROLE, '', fn),
    ping: async () => { await sql`select 1` },
    close,
  }
}

/** A unique constraint refused the write (the race-free way to say "already exists"). */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23505' && e.constraint_name === constraint
}

// ---- embedded PGlite ------------------------------------------------------------------------

interface LockInfo { pid: number; socket: string }

/**
 * One process owns the PGlite files (it is single-process); it serves them on a unix socket named in
 * DATA_DIR/db.lock. Any other process (the admin CLI while `npm start` runs) connects to that socket.
 */
async function openEmbedded(dataDir: string, log: Logger): Promise<{ socketPath: string; close(): Promise<void> }> {
  const dir = resolve(dataDir)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const lockPath = join(dir, 'db.lock')

  const deadline = Date.now() + 15_000
  for (;;) {
    const owner = readLock(lockPath)
    if (owner && isAlive(owner.pid)) {
      if (await canConnect(owner.socket)) return { socketPath: owner.socket, close: async () => {} }
      // The owner is starting up (or shutting down): wait for its socket rather than touch its files.
      // A lock with our own pid and no socket was left by an earlier process that had our pid
      // (pid 1 in every container): it is stale.
      if (owner.pid !== process.pid) {
        if (Date.now() > deadline) {
          throw new Error(`the embedded database in ${dir} is held by process ${owner.pid}, which does not answer on ${owner.socket}`)
        }
        await new Promise((r) => setTimeout(r, 200))
        continue
      }
    }
    try {
      writeFileSync(lockPath, JSON.stringify({ pid: process.pid, socket: '' }), { flag: owner ? 'w' : 'wx', mode: 0o600 })
    } catch {
      continue // another process took the lock between our read and write
    }
    if (readLock(lockPath)?.pid === process.pid) break
  }

  try {
    const { PGlite } = await import('@electric-sql/pglite')
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
    const db = await PGlite.create(join(dir, 'pgdata'))
    const socketPath = socketPathFor(dir)
    rmSync(socketPath, { force: true })
    const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: 16 })
    await server.start()
    writeFileSync(lockPath, JSON.stringify({ pid: process.pid, socket: socketPath } satisfies LockInfo), { mode: 0o600 })
    log.info({ dataDir: dir }, 'embedded database (PGlite) open')
    return {
      socketPath,
      close: async () => {
        // Let another process (an admin CLI command) finish before the database goes away.
        const until = Date.now() + 30_000
        while (server.getStats().activeConnections > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100))
        await server.stop()
        await db.close()
        rmSync(socketPath, { force: true })
        if (readLock(lockPath)?.pid === process.pid) rmSync(lockPath, { force: true })
      },
    }
  } catch (err) {
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
    s.once('connect', () => { s.destroy(); done(true) })
    s.once('error', () => done(false))
  })
}
