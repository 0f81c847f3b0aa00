import { chmodSync, existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import pino from 'pino'
import { createTenant } from '../../../server/modules/tenants/service.js'
import { APP_ROLE, openDb, SYSTEM_ROLE } from '../../../server/platform/db.js'
import { migrate } from '../../../server/platform/migrate.js'
import { newId } from '../../../common/ids.js'
import {
  embeddedDataDir,
  openToOthers,
  suffix,
  tempDir,
  testPlatform,
  unmigratedEmbeddedDb,
} from '../../helpers/platform.js'

const platform = await testPlatform(t)
const { db } = platform
const a = await createTenant(platform, { name: 'A', email: `a-${suffix()}@example.com` })
const b = await createTenant(platform, { name: 'B', email: `b-${suffix()}@example.com` })
const insertProject = (tenantId: string, name: string) =>
  db.tenant(
    tenantId,
    (sql) => sql`insert into projects (id, tenant_id, name) values (${newId()}, ${tenantId}, ${name})`,
  )
await insertProject(a.tenantId, 'a1')
await insertProject(b.tenantId, 'b1')

/** A second database handle on the test's database with a pool of one: every call reuses the one connection. */
async function singleConnection(t: Test) {
  const single = await openDb({
    databaseUrl: platform.config.DATABASE_URL,
    dataDir: platform.config.DATA_DIR,
    poolMax: 1,
    log: pino({ level: 'silent' }),
  })
  t.teardown(() => single.close())
  return single
}
const postgresOnly = { skip: db.mode !== 'postgres' && 'sessions are kept for PostgreSQL only' }

t.test('every tenant table has row-level security enabled and forced', async (t) => {
  const tables = await db.sql<
    { relname: string; relrowsecurity: boolean; relforcerowsecurity: boolean; owner: string }[]
  >`
    select c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner) as owner
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind = 'r'
       and (c.relname = 'tenants' or exists (
             select 1 from information_schema.columns col
              where col.table_schema = n.nspname and col.table_name = c.relname and col.column_name = 'tenant_id'))`
  t.ok(tables.length >= 6, `${tables.length} tenant tables found`)
  for (const tb of tables) {
    t.ok(tb.relrowsecurity, `${tb.relname}: row-level security enabled`)
    t.ok(tb.relforcerowsecurity, `${tb.relname}: row-level security forced`)
    t.not(tb.owner, APP_ROLE, `${tb.relname} is not owned by the role the server acts as`)
    t.not(tb.owner, SYSTEM_ROLE)
  }
})

t.test('the roles the server acts as bypass nothing', async (t) => {
  const roles = await db.sql<{ rolname: string; rolsuper: boolean; rolbypassrls: boolean }[]>`
    select rolname, rolsuper, rolbypassrls from pg_roles where rolname in (${APP_ROLE}, ${SYSTEM_ROLE})`
  t.equal(roles.length, 2)
  for (const r of roles) t.notOk(r.rolsuper || r.rolbypassrls, `${r.rolname} is neither superuser nor BYPASSRLS`)
})

t.test('a tenant transaction sees only its own rows, even with no tenant filter', async (t) => {
  const rows = await db.tenant(a.tenantId, (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`)
  t.same(
    rows.map((r) => r.tenant_id),
    [a.tenantId],
  )
  const tenants = await db.tenant(a.tenantId, (sql) => sql<{ id: string }[]>`select id from tenants`)
  t.same(
    tenants.map((r) => r.id),
    [a.tenantId],
  )
  const keys = await db.tenant(a.tenantId, (sql) => sql`select id from api_keys where tenant_id = ${b.tenantId}`)
  t.equal(keys.length, 0, "another tenant's keys are invisible")
})

t.test("a tenant transaction cannot write or change another tenant's rows", async (t) => {
  await t.rejects(
    db.tenant(
      a.tenantId,
      (sql) => sql`insert into projects (id, tenant_id, name) values (${newId()}, ${b.tenantId}, 'sneaky')`,
    ),
    { code: '42501' },
    'insert for another tenant violates the policy',
  )
  const updated = await db.tenant(
    a.tenantId,
    (sql) => sql`update projects set name = 'x' where tenant_id = ${b.tenantId} returning id`,
  )
  t.equal(updated.length, 0)
  const deleted = await db.tenant(
    a.tenantId,
    (sql) => sql`delete from projects where tenant_id = ${b.tenantId} returning id`,
  )
  t.equal(deleted.length, 0)
})

t.test('tenant and system transactions run as the non-owner roles', async (t) => {
  const [inTenant] = await db.tenant(
    a.tenantId,
    (sql) =>
      sql<{ role: string; tenant: string }[]>`select current_user as role, current_setting('app.tenant_id') as tenant`,
  )
  t.same(inTenant, { role: APP_ROLE, tenant: a.tenantId })
  const [inSystem] = await db.system((sql) => sql<{ role: string }[]>`select current_user as role`)
  t.equal(inSystem!.role, SYSTEM_ROLE)
})

t.test('with no tenant chosen, the app role sees nothing', async (t) => {
  // An empty app.tenant_id reads as no tenant (atrium_current_tenant() is null): no row matches the policies.
  t.same(await db.tenant('', (sql) => sql`select id from projects`), [], 'in a transaction')
  t.same(await db.tenantRead('', (sql) => sql`select id from projects`), [], 'in a single read')
  t.same(await db.tenant('', (sql) => sql`select id from tenants`), [], 'not even the tenants table')
})

t.test('a connection that served one tenant shows the next only its own rows', async (t) => {
  // One connection per pool, so every call below reuses the connection the previous one used.
  const single = await singleConnection(t)
  for (let i = 0; i < 6; i++) {
    const tenant = i % 2 ? a.tenantId : b.tenantId
    // no tenant filter on purpose: only row-level security stands between the tenants here
    const read = await single.tenantRead(tenant, (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`)
    t.same(
      read.map((r) => r.tenant_id),
      [tenant],
      `read ${i}`,
    )
    const inTx = await single.tenant(tenant, (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`)
    t.same(
      inTx.map((r) => r.tenant_id),
      [tenant],
      `transaction ${i}`,
    )
  }
  const [owner] = await single.sql<
    { tenant: string | null; role: string }[]
  >`select current_setting('app.tenant_id', true) as tenant, current_user as role`
  t.ok(!owner!.tenant, 'the owner connection never carries a tenant')
  t.not(owner!.role, APP_ROLE)
})

t.test(
  'a session whose connection was cut is replaced, and the new one is set for its tenant',
  postgresOnly,
  async (t) => {
    const single = await singleConnection(t)
    const own = (tenant: string) =>
      single.tenantRead(
        tenant,
        (sql) => sql<{ tenant_id: string; pid: number }[]>`select tenant_id, pg_backend_pid() as pid from projects`,
      )
    const first = await own(a.tenantId)
    t.same(
      first.map((r) => r.tenant_id),
      [a.tenantId],
    )
    const again = await own(a.tenantId)
    t.equal(again[0]!.pid, first[0]!.pid, 'the same session serves the same tenant again')
    await db.sql`select pg_terminate_backend(${first[0]!.pid})`
    await new Promise((r) => setTimeout(r, 300)) // the client learns of the close
    const after = await own(a.tenantId)
    t.same(
      after.map((r) => r.tenant_id),
      [a.tenantId],
      'a new session, set for the tenant: not a 404 from an unset one',
    )
    t.not(after[0]!.pid, first[0]!.pid)
    // Ten reads at once through one session, alternating tenants: each waits its turn and sees its own.
    const reads = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a.tenantId : b.tenantId)).map(async (tenant) => ({
        tenant,
        rows: await own(tenant),
      })),
    )
    t.same(
      reads.filter((r) => r.rows.length !== 1 || r.rows[0]!.tenant_id !== r.tenant),
      [],
    )
  },
)

t.test('a transaction is served while reads keep every session busy', postgresOnly, async (t) => {
  const single = await singleConnection(t)
  let stop = false
  let reads = 0
  // Eight readers that never pause: the one session always has reads in flight.
  const readers = Array.from({ length: 8 }, async (_, i) => {
    while (!stop) {
      const tenant = i % 2 ? a.tenantId : b.tenantId
      const rows = await single.tenantRead(
        tenant,
        (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`,
      )
      if (rows.length !== 1 || rows[0]!.tenant_id !== tenant)
        throw new Error(`read for ${tenant} saw ${JSON.stringify(rows)}`)
      reads++
    }
  })
  await new Promise((r) => setTimeout(r, 100))
  const inTx = await single.tenant(b.tenantId, (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`)
  t.same(
    inTx.map((r) => r.tenant_id),
    [b.tenantId],
    'the transaction got the session and saw its own tenant',
  )
  const before = reads
  await new Promise((r) => setTimeout(r, 100))
  stop = true
  await Promise.all(readers)
  t.ok(reads > before, 'reads went on after it')
})

t.test('a system transaction sees every tenant', async (t) => {
  const rows = await db.system(
    (sql) =>
      sql<
        { tenant_id: string }[]
      >`select distinct tenant_id from projects where tenant_id in (${a.tenantId}, ${b.tenantId})`,
  )
  t.equal(rows.length, 2)
})

t.test('an embedded database is shared with a second opener through its socket', async (t) => {
  const dir = tempDir(t)
  const log = pino({ level: 'silent' })
  const owner = await openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log })
  const guest = await openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log })
  t.equal(owner.mode, 'embedded')
  await migrate(guest.sql)
  await guest.sql`insert into tenants (id, name, plan) values (${newId()}, 'shared', 'free')`
  const n = await owner.system(
    (sql) => sql<{ n: number }[]>`select count(*)::int as n from tenants where name = 'shared'`,
  )
  t.equal(n[0]!.n, 1, "the owner sees the guest's write")
  await guest.close()
  await owner.close()
})

t.test('a failure inside a tenant transaction rolls back everything it wrote', async (t) => {
  const id = newId()
  await t.rejects(
    db.tenant(a.tenantId, async (sql) => {
      await sql`insert into projects (id, tenant_id, name) values (${id}, ${a.tenantId}, 'rolled back')`
      await sql`select 1/0`
    }),
    { code: '22012' },
  )
  const rows = await db.system((sql) => sql`select id from projects where id = ${id}`)
  t.equal(rows.length, 0)
})

t.test('a failing single read is reported and leaves the connection clean', async (t) => {
  await t.rejects(
    db.tenantRead(a.tenantId, (sql) => sql`select 1/0 as x`),
    { code: '22012' },
  )
  const rows = await db.tenantRead(a.tenantId, (sql) => sql<{ n: number }[]>`select count(*)::int as n from projects`)
  t.equal(rows[0]!.n, 1, 'the next read on the pool works, in its own tenant')
  await t.test(
    'no transaction is left open',
    {
      skip:
        db.mode === 'postgres'
          ? false
          : 'the embedded database is one session: no other one could hold a transaction open',
    },
    async (t) => {
      const [open] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`
      t.equal(open!.n, 0)
    },
  )
})

t.test('many concurrent tenant transactions never see each other', async (t) => {
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => {
      const tenant = i % 2 ? a.tenantId : b.tenantId
      return db
        .tenantRead(tenant, (sql) => sql<{ tenant_id: string }[]>`select tenant_id from projects`)
        .then((rows) => ({ tenant, rows }))
    }),
  )
  // Each tenant has exactly one project: an empty answer fails as surely as another tenant's row.
  t.same(
    results.filter((r) => r.rows.length !== 1 || r.rows[0]!.tenant_id !== r.tenant),
    [],
    'every read saw its own project and nothing else',
  )
})

t.test('embedded: a lock left by a crash is taken over', async (t) => {
  const log = pino({ level: 'silent' })
  const cases: [string, string][] = [
    ['empty, from a crash mid-write', ''],
    ['a dead process', JSON.stringify({ pid: 2 ** 22 + 7, socket: '/nonexistent/db.sock' })],
  ]
  for (const [what, content] of cases) {
    const dir = await embeddedDataDir(t)
    const lock = join(dir, 'db.lock')
    writeFileSync(lock, content)
    const old = new Date(Date.now() - 60_000)
    utimesSync(lock, old, old)
    const db = await openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log })
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from atrium_migrations`
    t.ok(row!.n >= 1, what)
    await db.close()
  }
})

t.test('embedded: two opens at once in one process share one owner', async (t) => {
  const dir = await embeddedDataDir(t)
  const log = pino({ level: 'silent' })
  const [one, two] = await Promise.all([
    openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log }),
    openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log }),
  ])
  await one.sql`create table shared_probe (id int)`
  await two.sql`insert into shared_probe values (1)`
  const rows = await one.sql`select * from shared_probe`
  t.equal(rows.length, 1, 'both reach the same database')
  await two.close()
  await one.close()
})

t.test(
  'embedded: a new database in a DATA_DIR open to others is private, the files PGlite writes included',
  async (t) => {
    const dir = join(tempDir(t), 'data')
    mkdirSync(dir)
    chmodSync(dir, 0o755)
    const db = await openDb({ databaseUrl: '', dataDir: dir, poolMax: 1, log: pino({ level: 'silent' }) })
    t.ok(existsSync(join(dir, 'pgdata', 'PG_VERSION')), 'a new cluster was made')
    t.ok(existsSync(join(dir, 'db.sock')), 'the socket is in DATA_DIR')
    t.same(openToOthers(dir), [], 'once open (its initdb, lock and socket included)')
    await migrate(db.sql)
    await db.sql`checkpoint`
    t.same(openToOthers(dir), [], 'after migrations and a checkpoint')
    await db.close()
    t.same(openToOthers(dir), [], 'once closed')
  },
)

t.test('a transaction whose role cannot be taken fails with that reason, not as an aborted transaction', async (t) => {
  const fresh = await unmigratedEmbeddedDb(t)
  // Said as PostgreSQL's 'undefined object' (42704), which answers 503: the migrations make the roles.
  await t.rejects(
    fresh.system((sql) => sql`select 1`),
    {
      code: '42704',
      message: new RegExp(`role ${SYSTEM_ROLE} does not exist`),
      cause: { code: '22023', message: new RegExp(`role "${SYSTEM_ROLE}" does not exist`) },
    },
  )
  await t.rejects(
    fresh.tenant(newId(), (sql) => sql`select 1`),
    { code: '42704', message: new RegExp(`role ${APP_ROLE} does not exist`), cause: { code: '22023' } },
  )
  t.same(await fresh.sql`select 1 as one`, [{ one: 1 }], 'the session was rolled back and serves on')
})
