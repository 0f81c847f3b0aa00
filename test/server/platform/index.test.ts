import { randomBytes } from 'node:crypto'
import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { createLogger } from '../../../server/logger.js'
import { openPlatform } from '../../../server/platform/index.js'
import { configFrom, embeddedDataDir, openToOthers, testEnv } from '../../helpers/platform.js'

async function migrationsTable(overrides: Record<string, string>, t: Test) {
  const env = await testEnv(t, overrides, { emptyDatabase: true })
  const platform = await openPlatform(configFrom(env), createLogger('silent'))
  try {
    const [row] = await platform.db.sql<
      { table: string | null }[]
    >`select to_regclass('atrium_migrations')::text as table`
    return row!.table
  } finally {
    await platform.close()
  }
}

t.test('start-up applies the migrations by default', async (t) => {
  t.equal(await migrationsTable({}, t), 'atrium_migrations')
})

t.test('MIGRATE_ON_START=false leaves the database to a separate migration job', async (t) => {
  t.equal(await migrationsTable({ MIGRATE_ON_START: 'false' }, t), null)
})

t.test('embedded: a DATA_DIR open to others, and everything in it, is made private at start', async (t) => {
  // As an older version left it: the folder 0755, PGlite's files 0666, a key and a blob readable by all.
  const dir = await embeddedDataDir(t)
  for (const p of readdirSync(join(dir, 'pgdata'), { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, 'pgdata', p)
    chmodSync(path, lstatSync(path).isDirectory() ? 0o755 : 0o666)
  }
  chmodSync(dir, 0o755)
  writeFileSync(join(dir, 'master.key'), randomBytes(32).toString('base64') + '\n', { mode: 0o644 })
  mkdirSync(join(dir, 'blobs', 'exports'), { recursive: true, mode: 0o755 })
  writeFileSync(join(dir, 'blobs', 'exports', 'old.zip'), 'zip', { mode: 0o644 })
  t.ok(openToOthers(dir).length > 100, 'the loose state is set up')

  const lines: string[] = []
  const env = await testEnv(
    t,
    { DATA_DIR: dir, DATABASE_URL: '', ENCRYPTION_MASTER_KEY: '', R2_ENDPOINT: '' },
    { emptyDatabase: true },
  )
  const platform = await openPlatform(
    configFrom(env),
    createLogger('info', { write: (l: string) => void lines.push(l) }),
  )
  try {
    t.equal(platform.db.mode, 'embedded')
    t.equal(platform.blobs.kind, 'local')
    await platform.blobs.put('exports/new.zip', Buffer.from('zip'), 'application/zip')
    await platform.db.sql`select 1`
    t.same(openToOthers(dir), [], 'nothing under DATA_DIR is open to other local users')
    t.match(
      lines.join(''),
      /"was":"0755","now":"0700","msg":"data folder was open to other local users: made private"/,
      'the tightening of DATA_DIR is logged',
    )
  } finally {
    await platform.close()
  }
  t.same(openToOthers(dir), [], 'nor once closed')
})
