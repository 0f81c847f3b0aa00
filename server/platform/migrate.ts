// Applies server/platform/migrations/NNNN_name.sql in order. Each file runs in its own transaction
// under one advisory lock, so any number of processes starting at once apply each migration once.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Sql } from './db.js'

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url))
// Any fixed 64-bit number; the same for every Atrium process.
const LOCK_KEY = 7_242_019_117

export interface Migration {
  version: number
  name: string
  sql: string
  checksum: string
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const sql = readFileSync(dir + file, 'utf8')
      return {
        version: Number(file.slice(0, 4)),
        name: file.slice(5, -4),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      }
    })
}

export class MigrationError extends Error {
  override name = 'MigrationError'
}

/**
 * The migrations the database has and this release does not: a newer release migrated it. Rollback
 * is a restore (docs/operations.md, "Rollback"): migrations only go forward, and a release never
 * runs on a schema it does not know, whose columns and rules it could break without noticing.
 */
export async function newerMigrations(sql: Sql, migrations = loadMigrations()): Promise<number[]> {
  const [table] = await sql<{ exists: boolean }[]>`select to_regclass('atrium_migrations') is not null as exists`
  if (!table?.exists) return []
  const known = new Set(migrations.map((m) => m.version))
  return (await sql<{ version: number }[]>`select version from atrium_migrations order by version`)
    .map((r) => r.version)
    .filter((v) => !known.has(v))
}

/** Refuses a database a newer release migrated, saying what to do instead. */
export async function refuseNewerSchema(sql: Sql, migrations = loadMigrations()): Promise<void> {
  const newer = await newerMigrations(sql, migrations)
  if (!newer.length) return
  throw new MigrationError(
    `the database schema has migration ${newer.at(-1)}, newer than this release's ${migrations.at(-1)?.version ?? 0}: a newer Atrium upgraded it, and this release cannot run on it. Run that release, or go back by restoring the backup taken before the upgrade (installer restore; docs/operations.md, "Rollback")`,
  )
}

/**
 * Returns the versions this call applied (empty when the database was current); refuses a database a newer release
 * migrated.
 */
export async function migrate(sql: Sql, migrations = loadMigrations()): Promise<number[]> {
  await refuseNewerSchema(sql, migrations)
  const applied: number[] = []
  for (const m of migrations) {
    const did = await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${LOCK_KEY})`
      await tx`create table if not exists atrium_migrations (
        version integer primary key,
        name text not null,
        checksum text not null,
        applied_at timestamptz not null default now()
      )`
      const [row] = await tx<
        { checksum: string }[]
      >`select checksum from atrium_migrations where version = ${m.version}`
      if (row) {
        if (row.checksum !== m.checksum) {
          throw new MigrationError(`migration ${m.version}_${m.name} was changed after it was applied`)
        }
        return false
      }
      await tx.unsafe(m.sql)
      await tx`insert into atrium_migrations (version, name, checksum) values (${m.version}, ${m.name}, ${m.checksum})`
      return true
    })
    if (did) applied.push(m.version)
  }
  return applied
}

/** The versions this release knows that the database has not applied yet (all of them on an empty database). */
export async function pendingMigrations(sql: Sql, migrations = loadMigrations()): Promise<number[]> {
  const [table] = await sql<{ exists: boolean }[]>`select to_regclass('atrium_migrations') is not null as exists`
  const done = new Set(
    table?.exists
      ? (await sql<{ version: number }[]>`select version from atrium_migrations`).map((r) => r.version)
      : [],
  )
  return migrations.filter((m) => !done.has(m.version)).map((m) => m.version)
}

/**
 * Waits until every migration of this release is applied by someone else (the chart's migration
 * Job): server pods start on a current schema without racing to migrate. A database a newer
 * release migrated is refused at once (refuseNewerSchema): waiting would not make it older.
 */
export async function waitForMigrations(
  sql: Sql,
  o: { timeoutMs: number; intervalMs?: number; migrations?: Migration[] },
): Promise<{ ok: boolean; pending: number[] }> {
  const until = Date.now() + o.timeoutMs
  const migrations = o.migrations ?? loadMigrations()
  for (;;) {
    let pending: number[]
    try {
      await refuseNewerSchema(sql, migrations)
      pending = await pendingMigrations(sql, migrations)
    } catch (err) {
      if (err instanceof MigrationError) throw err
      pending = migrations.map((m) => m.version) // database not reachable yet: keep waiting
    }
    if (!pending.length) return { ok: true, pending }
    if (Date.now() >= until) return { ok: false, pending }
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 2000))
  }
}
