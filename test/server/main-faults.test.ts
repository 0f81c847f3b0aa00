// Fault injection: the server runs as its own process (as in production) with PostgreSQL and Redis
// behind proxies the test cuts and restores while clients write. The process must stay up, answer
// the requests caught in a cut with 503 in the envelope, report itself not ready, recover when the
// dependency is back, and keep every write it acknowledged.
import postgres from 'postgres'
import t from 'tap'
import { admin, startServer } from '../helpers/cli.js'
import { faultProxy } from '../helpers/fault-proxy.js'
import { services, testEnv } from '../helpers/platform.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const WRITERS = 16

interface Outcome {
  status: number
  code?: string
  id?: string
}

/** Clients creating projects as fast as the server answers, until stopped. */
function writeLoad(base: string, apiKey: string, server: { done: Promise<{ code: number | null; stderr: string }> }) {
  let died: string | null = null
  void server.done.then((r) => (died = `the server exited (code ${r.code}):\n${r.stderr.slice(-3000)}`))
  const outcomes: Outcome[] = []
  let running = true
  let n = 0
  const writer = async () => {
    while (running) {
      const name = `load ${n++}`
      try {
        const r = await fetch(`${base}/api/v1/projects`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name, description: 'written under faults', language: 'typescript' }),
          signal: AbortSignal.timeout(30_000),
        })
        const body = (await r.json()) as { data?: { id: string }; error?: { code: string } }
        outcomes.push({ status: r.status, code: body.error?.code, id: body.data?.id })
      } catch (err) {
        outcomes.push({ status: 0, code: (err as Error).name })
      }
    }
  }
  const writers = Array.from({ length: WRITERS }, writer)
  return {
    outcomes,
    /** Waits until `count` more answers have arrived. */
    async answers(count: number) {
      const until = outcomes.length + count
      while (outcomes.length < until) {
        if (died) throw new Error(died)
        await sleep(20)
      }
    },
    async stop() {
      running = false
      await Promise.all(writers)
    },
  }
}

async function readiness(base: string): Promise<number> {
  return (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) })).status
}

async function until(what: string, check: () => Promise<boolean>, ms = 30_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`)
    await sleep(100)
  }
}

t.test(
  'a PostgreSQL cut under write load: 503s, not ready, recovery, no acknowledged write lost',
  {
    skip: services.databaseUrl
      ? false
      : 'needs PostgreSQL (TEST_DATABASE_URL): the embedded database has no network to cut',
  },
  async (t) => {
    const env = await testEnv(t, { LOG_LEVEL: 'info', RATE_LIMIT_MAX: '1000000' }) // the load is the point here, not the limit
    const created = await admin(['create-tenant', '--name', 'Faults', '--plan', 'enterprise'], env)
    t.equal(created.code, 0, created.stderr)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }

    const direct = new URL(env.DATABASE_URL!)
    const db = await faultProxy(t, { host: direct.hostname, port: Number(direct.port || 5432) })
    const server = await startServer({ ...env, DATABASE_URL: db.via(env.DATABASE_URL!) })
    t.teardown(() => {
      server.child.kill('SIGKILL')
    })
    let exited = false
    void server.done.then(() => (exited = true))

    const load = writeLoad(server.base, apiKey, server)
    await load.answers(200)
    t.equal(await readiness(server.base), 200, 'ready before the cut')

    // Two cuts: the second one finds connections that were re-opened after the first.
    for (const round of [1, 2]) {
      db.cut()
      await load.answers(WRITERS * 4)
      t.equal(await readiness(server.base), 503, `cut ${round}: not ready while the database is away`)
      db.restore()
      await until(`ready again after cut ${round}`, async () => (await readiness(server.base)) === 200)
      await load.answers(200)
    }
    await load.stop()
    t.notOk(exited, 'the process stayed up')
    t.ok(db.resets > 0, 'connections were cut')

    const statuses = [...new Set(load.outcomes.map((o) => o.status))].sort()
    t.same(statuses, [201, 503], 'every answer was a success or 503 (no 500, no dropped connection)', {
      others: load.outcomes.filter((o) => o.status !== 201 && o.status !== 503).slice(0, 5),
    })
    const unavailable = load.outcomes.filter((o) => o.status === 503)
    t.ok(
      unavailable.every((o) => o.code === 'SERVICE_UNAVAILABLE'),
      '503s carry SERVICE_UNAVAILABLE',
    )

    const acknowledged = load.outcomes.filter((o) => o.status === 201).map((o) => o.id!)
    const check = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
    t.teardown(() => check.end())
    const [{ present } = { present: -1 }] = await check<
      { present: number }[]
    >`select count(*)::int as present from projects where id = any(${acknowledged}::uuid[])`
    t.equal(present, acknowledged.length, `all ${acknowledged.length} acknowledged writes are stored`)
    t.comment(
      `${load.outcomes.length} requests: ${acknowledged.length} acknowledged, ${unavailable.length} answered 503 during ${db.resets} connection resets`,
    )

    t.comment('SIGTERM')
    server.child.kill('SIGTERM')
    const exit = await server.done
    t.equal(exit.code, 0, 'drains and exits cleanly after the faults', { stdout: exit.stdout.slice(-4000) })
    t.notMatch(exit.stderr, /TypeError|uncaught/i)
  },
)

t.test(
  'a Redis cut: requests keep succeeding, readiness says degraded, recovery',
  {
    skip: services.redisUrl ? false : 'needs Redis (TEST_REDIS_URL)',
  },
  async (t) => {
    const env = await testEnv(t, { LOG_LEVEL: 'info', RATE_LIMIT_MAX: '1000000' }) // the load is the point here, not the limit
    const created = await admin(['create-tenant', '--name', 'Redis faults'], env)
    t.equal(created.code, 0, created.stderr)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }

    const direct = new URL(services.redisUrl)
    const cache = await faultProxy(t, { host: direct.hostname, port: Number(direct.port || 6379) })
    const server = await startServer({ ...env, REDIS_URL: cache.via(services.redisUrl) })
    t.teardown(() => {
      server.child.kill('SIGKILL')
    })

    const load = writeLoad(server.base, apiKey, server)
    await load.answers(100)
    cache.cut()
    const before = load.outcomes.length
    await load.answers(200)
    const ready = (await (await fetch(`${server.base}/readyz`)).json()) as {
      data: { status: string; checks: { cache: { status: string } } }
    }
    t.match(
      ready.data,
      { status: 'degraded', checks: { cache: { status: 'fail' } } },
      'ready, with the cache reported failing',
    )
    t.ok(
      load.outcomes.slice(before).every((o) => o.status === 201),
      'writes succeed while Redis is away (rate limit falls back to the replica)',
    )
    cache.restore()
    await until('the cache check passes again', async () => {
      const r = (await (await fetch(`${server.base}/readyz`)).json()) as { data: { status: string } }
      return r.data.status === 'ready'
    })
    await load.answers(100)
    await load.stop()
    t.same(
      load.outcomes.filter((o) => o.status !== 201),
      [],
      'no request failed',
    )

    server.child.kill('SIGTERM')
    const exit = await server.done
    t.equal(exit.code, 0)
  },
)
