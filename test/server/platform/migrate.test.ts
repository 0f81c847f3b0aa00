import t from 'tap'
import { loadMigrations, migrate, pendingMigrations, waitForMigrations } from '../../../server/platform/migrate.js'
import { admin } from '../../helpers/cli.js'
import postgres from 'postgres'
import { configFrom, freshDatabase, services, suffix, testEnv, testPlatform } from '../../helpers/platform.js'
import { openPlatform } from '../../../server/platform/index.js'
import { createLogger } from '../../../server/logger.js'

const all = loadMigrations()

// Numbers are taken on branches in parallel, so one may be missing until its branch lands: the
// rule is order and uniqueness, not density.
t.test('migration files are numbered from 1, in order, each number once', async (t) => {
  t.ok(all.length >= 1)
  t.equal(all[0]!.version, 1)
  t.ok(
    all.every((m, i) => i === 0 || m.version > all[i - 1]!.version),
    'strictly increasing',
  )
})

t.test('two processes migrating one fresh database at once apply each migration exactly once', async (t) => {
  const env = await testEnv(t, { MIGRATE_ON_START: 'false' }, { emptyDatabase: true })
  const [one, two] = await Promise.all([admin(['migrate'], env), admin(['migrate'], env)])
  t.equal(one.code, 0, one.stderr)
  t.equal(two.code, 0, two.stderr)
  const applied = [...JSON.parse(one.stdout).applied, ...JSON.parse(two.stdout).applied].sort(
    (x: number, y: number) => x - y,
  )
  t.same(
    applied,
    all.map((m) => m.version),
    'between them, every migration applied once',
  )

  const again = await admin(['migrate'], env)
  t.same(JSON.parse(again.stdout), { applied: [] }, 'a third run has nothing to do')
})

t.test('a migrated database records each migration once', async (t) => {
  const { db } = await testPlatform(t)
  const rows = await db.sql<
    { version: number; checksum: string }[]
  >`select version, checksum from atrium_migrations order by version`
  t.same(
    rows.map((r) => r.version),
    all.map((m) => m.version),
  )
  t.same(await migrate(db.sql), [])
})

t.test('a migration edited after it was applied is refused', async (t) => {
  const { db } = await testPlatform(t)
  const edited = [{ ...all[0]!, sql: all[0]!.sql + '\n-- edited', checksum: 'different' }, ...all.slice(1)]
  await t.rejects(migrate(db.sql, edited), {
    name: 'MigrationError',
    message: /1_foundation was changed after it was applied/,
  })
})

t.test('a failing migration leaves nothing behind', async (t) => {
  const { db } = await testPlatform(t)
  const broken = { version: 9999, name: 'broken', sql: 'create table half_done (id int); select 1/0;', checksum: 'x' }
  await t.rejects(migrate(db.sql, [...all, broken]), { code: '22012' })
  const [row] = await db.sql<{ n: number; table: string | null }[]>`
    select (select count(*)::int from atrium_migrations where version = 9999) as n, to_regclass('half_done')::text as table`
  t.same(row, { n: 0, table: null })
})

t.test(
  'a database user that cannot take the atrium roles is told what to grant',
  { skip: !services.databaseUrl && 'needs TEST_DATABASE_URL (PGlite has one superuser)' },
  async (t) => {
    const admin = postgres(services.databaseUrl, { max: 1, onnotice: () => {} })
    const user = `atrium_t_low_${suffix()}`
    const dbUrl = await freshDatabase(t)
    const dbName = new URL(dbUrl).pathname.slice(1)
    await admin.unsafe(`create role ${user} login`)
    await admin.unsafe(`alter database ${dbName} owner to ${user}`)
    t.teardown(async () => {
      await admin.unsafe(`drop database if exists ${dbName} with (force)`)
      await admin.unsafe(`drop role if exists ${user}`)
      await admin.end()
    })
    const url = new URL(dbUrl)
    url.username = user
    url.password = ''
    const low = postgres(url.toString(), { max: 1, onnotice: () => {} })
    t.teardown(() => low.end())
    await migrate(low).then(
      () => t.fail('migrated without the roles'),
      (err: { message: string; hint?: string }) => {
        t.match(err.message, new RegExp(`the database user ${user} cannot act as atrium_app and atrium_system`))
        t.match(err.hint, /GRANT atrium_app, atrium_system TO/)
      },
    )
  },
)

t.test(
  'wait-for-migrations returns once another process has migrated, and names what is pending when the time is up',
  async (t) => {
    const env = await testEnv(t, { MIGRATE_ON_START: 'false' }, { emptyDatabase: true })
    const early = await admin(['wait-for-migrations', '--timeout-seconds', '1'], env)
    t.equal(early.code, 1, 'nothing migrated yet: it gives up')
    t.same(JSON.parse(early.stdout), { pending: all.map((m) => m.version) })
    const waiting = admin(['wait-for-migrations', '--timeout-seconds', '120'], env)
    const migrated = await admin(['migrate'], env)
    t.equal(migrated.code, 0, migrated.stderr)
    const waited = await waiting
    t.equal(waited.code, 0, waited.stderr)
    t.same(JSON.parse(waited.stdout), { pending: [] })
    t.equal((await admin(['wait-for-migrations', '--timeout-seconds', 'soon'], env)).code, 2)
  },
)

t.test('pendingMigrations lists what this release knows and the database lacks', async (t) => {
  const { db } = await testPlatform(t)
  t.same(await pendingMigrations(db.sql), [])
  const next = { version: all.at(-1)!.version + 1, name: 'next', sql: 'select 1', checksum: 'n' }
  t.same(await pendingMigrations(db.sql, [...all, next]), [next.version])
  t.same(await waitForMigrations(db.sql, { timeoutMs: 50, intervalMs: 10, migrations: [...all, next] }), {
    ok: false,
    pending: [next.version],
  })
})

t.test(
  'a database a newer release migrated is refused by migrate, wait-for-migrations and the server, which name the rollback: a restore',
  async (t) => {
    const env = await testEnv(t)
    // Opened and closed here: the embedded database has one owner at a time, and the CLI below needs it.
    const platform = await openPlatform(configFrom(env), createLogger('silent'))
    const last = all.at(-1)!.version
    const said = new RegExp(
      `schema has migration ${last + 1}, newer than this release's ${last}: .*restoring the backup taken before the upgrade`,
    )
    try {
      await platform.db
        .sql`insert into atrium_migrations (version, name, checksum) values (${last + 1}, 'from_a_newer_release', 'n')`
      await t.rejects(migrate(platform.db.sql), { name: 'MigrationError', message: said })
      await t.rejects(
        waitForMigrations(platform.db.sql, { timeoutMs: 60_000 }),
        { name: 'MigrationError', message: said },
        'at once, not after the wait',
      )
    } finally {
      await platform.close()
    }
    for (const MIGRATE_ON_START of ['true', 'false']) {
      const refused = await admin(['migrate'], { ...env, MIGRATE_ON_START })
      t.equal(refused.code, 1)
      t.match(refused.stderr, said)
      await t.rejects(
        testPlatform(t, { ...env, MIGRATE_ON_START }),
        { message: said },
        `the server does not start (MIGRATE_ON_START=${MIGRATE_ON_START})`,
      )
    }
  },
)
