// The database connection lost mid-transaction: postgres.js (with patches/postgres+3.4.9.patch)
// and the Db adapter must settle every query with a connection error, never throw where nothing
// catches it, never hand a dead connection back to the pool, and serve again once the database is
// back. Before the patch the first test killed the process (TypeError in nextWrite) and the
// second left transactions waiting for ever.
import pino from 'pino'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { isDatabaseUnavailable, openDb, unavailableDependency } from '../../../server/platform/db.js'
import { migrate } from '../../../server/platform/migrate.js'
import { faultProxy } from '../../helpers/fault-proxy.js'
import { freshDatabase, services } from '../../helpers/platform.js'
import { givesEach } from '../../helpers/cases.js'

const skip = services.databaseUrl
  ? false
  : 'needs PostgreSQL (TEST_DATABASE_URL): the embedded database has no network to cut'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function proxied(t: Test) {
  const url = await freshDatabase(t)
  const direct = new URL(url)
  const proxy = await faultProxy(t, { host: direct.hostname, port: Number(direct.port || 5432) })
  return { url, proxy }
}

t.test(
  'a reserved connection cut between queries refuses the next one, and the pool carries on',
  { skip },
  async (t) => {
    const { url, proxy } = await proxied(t)
    const sql = postgres(proxy.via(url), { max: 2, onnotice: () => {} })
    t.teardown(() => sql.end({ timeout: 1 }))

    const reserved = await sql.reserve()
    t.same(await reserved`select 1 as one`, [{ one: 1 }])
    proxy.cut()
    await sleep(50) // the close arrives while no query is in flight on the reserved connection
    const refused = await reserved`select 2`.catch((e: unknown) => e)
    t.match(refused, { code: 'CONNECTION_CLOSED' }, 'refused, not thrown from a timer')
    t.ok(isDatabaseUnavailable(refused))
    t.match(
      await reserved`rollback`.simple().catch((e: unknown) => e),
      { code: 'CONNECTION_CLOSED' },
      'a rollback on it too',
    )
    reserved.release() // must not put the dead connection back into the pool
    proxy.restore()
    for (let i = 0; i < 4; i++) t.same(await sql`select ${i}::int as i`, [{ i }], `pooled query ${i} after the cut`)
  },
)

t.test(
  'transactions caught in repeated cuts all settle as unavailable, and the adapter serves again',
  { skip },
  async (t) => {
    const { url, proxy } = await proxied(t)
    const owner = postgres(url, { max: 1, onnotice: () => {} })
    t.teardown(() => owner.end())
    await migrate(owner)
    const tenantId = '00000000-0000-4000-8000-000000000001'
    await owner`insert into tenants (id, name, plan) values (${tenantId}, 'cut', 'free')`

    const db = await openDb({ databaseUrl: proxy.via(url), dataDir: '', poolMax: 4, log: pino({ level: 'silent' }) })
    t.teardown(() => db.close())
    const outcomes = new Map<string, number>()
    const committed: string[] = []
    let running = true
    const write = async (n: number) => {
      const id = crypto.randomUUID()
      await db.tenant(tenantId, async (sql) => {
        await sql`insert into projects (id, tenant_id, name) values (${id}, ${tenantId}, ${`p${n}`})`
        await sleep(Math.random() * 5) // work between statements, where a cut finds no query in flight
        await sql`update projects set description = 'done' where id = ${id}`
      })
      committed.push(id)
    }
    let n = 0
    const writers = Array.from({ length: 12 }, async () => {
      while (running) {
        const outcome = await write(n++).then(
          () => 'committed',
          (e: unknown) => (isDatabaseUnavailable(e) ? 'unavailable' : `other: ${String(e)}`),
        )
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
      }
    })
    for (let round = 0; round < 6; round++) {
      await sleep(150)
      proxy.cut()
      await sleep(100 + round * 50)
      proxy.restore()
    }
    await sleep(300)
    running = false
    await Promise.all(writers) // settles: nothing waits for ever

    t.same(
      [...outcomes.keys()].sort(),
      ['committed', 'unavailable'],
      'each transaction committed or failed as unavailable',
    )
    await db.ping()
    const [{ stored } = { stored: -1 }] = await owner<
      { stored: number }[]
    >`select count(*)::int as stored from projects where id = any(${committed}::uuid[]) and description = 'done'`
    t.equal(stored, committed.length, `all ${committed.length} committed transactions are stored whole`)
    t.comment(
      `${committed.length} committed, ${outcomes.get('unavailable')} refused as unavailable, ${proxy.resets} connections reset`,
    )
  },
)

t.test('connection failures are told apart from a bad request, and the database from other dependencies', async (t) => {
  givesEach(
    t,
    (code: string | undefined) => unavailableDependency({ code }),
    [
      [
        'database',
        [
          'CONNECTION_CLOSED',
          'CONNECTION_DESTROYED',
          'CONNECT_TIMEOUT',
          '08006',
          '57P01',
          '25006',
          '53300',
          '53100',
          '40001',
          '40P01',
        ],
      ],
      ['network', ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EAI_AGAIN']],
      // A schema this release does not find (not migrated yet): 503 too, said apart.
      ['schema', ['42P01', '42703', '42883', '42704', '28000']],
      [null, ['23505', '22P02', '25P02', 'ENOENT', undefined]],
    ],
    (code, dependency) => (dependency ? String(code) : `${code} is not`),
  )
  t.equal(unavailableDependency(null), null)
})

t.test(
  'a reserve waiting through an outage is served when the database is back (connections opened without type fetching too)',
  { skip },
  async (t) => {
    const { url, proxy } = await proxied(t)
    for (const fetchTypes of [true, false]) {
      const sql = postgres(proxy.via(url), { max: 1, onnotice: () => {}, fetch_types: fetchTypes, backoff: () => 0.05 })
      t.teardown(() => sql.end({ timeout: 1 }))
      proxy.cut()
      const refused = await sql.reserve().then(
        () => 'reserved',
        (e: { code?: string }) => e.code,
      )
      t.ok(
        unavailableDependency({ code: refused }),
        `fetch_types ${fetchTypes}: refused while the database is away (${refused})`,
      )
      proxy.restore()
      const reserved = await sql.reserve()
      t.same(await reserved`select 1 as one`, [{ one: 1 }], `fetch_types ${fetchTypes}: served once it is back`)
      reserved.release()
      t.same(await sql`select 2 as two`, [{ two: 2 }], 'and the connection went back to the pool')
    }
  },
)
