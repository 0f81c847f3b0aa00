// Atrium on a Redis Cluster (three masters, a replica each) and on a Sentinel set, both real
// redis-server processes on loopback (test/helpers/redis-topology.ts). First what uses Redis behaves
// as on one server: pub/sub between processes, the window counters, the request limit, a prefix
// deleted across every master. Then two server processes under a steady load of writes, rate-limited
// clients and a chat reply streamed from the other replica, while the master holding a limited
// client's counter is killed and a replica takes its place: the processes stay up, every
// acknowledged write is there, the stream's deltas are the reply exactly (across a cut, resumed with
// Last-Event-ID), and no client gets past its limit.
import { Cluster, Redis } from 'ioredis'
import pino from 'pino'
import postgres from 'postgres'
import { Registry } from 'prom-client'
import t, { type Test } from 'tap'
import { mastersOf, parseRedisUrl, redisClient } from '../../../common/redis-topology.js'
import { redisChecks } from '../../../common/service-checks.js'
import { openCache } from '../../../server/platform/cache.js'
import { batchTolerance, openCounters } from '../../../server/platform/counters.js'
import { assertWholeReply, follow, gate } from '../../helpers/chat-stream.js'
import { adminTenant, serverProcess, type ServerProcess } from '../../helpers/cli.js'
import { fakeLlm } from '../../helpers/fake-llm.js'
import { faultProxy } from '../../helpers/fault-proxy.js'
import { services, suffix, testEnv } from '../../helpers/platform.js'
import { redisCluster, redisSentinel, topologySkip, type Topology } from '../../helpers/redis-topology.js'

const log = pino({ level: 'silent' })
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const TOPOLOGIES = [
  ['a Redis Cluster', redisCluster],
  ['a Sentinel set', redisSentinel],
] as const

for (const [name, make] of TOPOLOGIES) {
  t.test(
    `on ${name}: pub/sub, counters, the request limit and a prefix deleted everywhere`,
    { skip: topologySkip() },
    async (t) => {
      const topology = await make(t)
      const [a, b] = await Promise.all([
        openCache({ redisUrl: topology.url, log }),
        openCache({ redisUrl: topology.url, log }),
      ])
      t.teardown(async () => {
        await a.close()
        await b.close()
      })
      await a.ping()
      // The preflight's checks (installer and `check-services`) read the topology as the server does.
      const checked = Object.fromEntries((await redisChecks(topology.url)).map((c) => [c.id, c.status]))
      t.same(
        checked,
        {
          'redis.connect': 'pass',
          'redis.topology': 'pass',
          'redis.version': 'pass',
          'redis.eviction': checked['redis.eviction'],
        },
        'the checks pass',
      )
      const wrong =
        name === 'a Redis Cluster'
          ? `redis+cluster://${new URL(services.redisUrl || 'redis://127.0.0.1:6379').host}`
          : topology.url.replace(/\/atrium$/, '/nosuchmaster')
      const refused = await redisChecks(wrong, { timeoutMs: 3000 })
      t.match(refused, [{ id: 'redis.connect', status: 'fail' }], `a wrong topology fails: ${refused[0]?.found}`)
      t.equal(a.redis instanceof Cluster, name === 'a Redis Cluster', 'a cluster client for a cluster only')

      // Channels in several slots: on a cluster each is another master's (sharded pub/sub).
      const channels = Array.from({ length: 6 }, (_, i) => `atrium:test:${suffix()}:${i}`)
      const heard = new Map<string, string[]>(channels.map((c) => [c, []]))
      for (const c of channels) await b.subscribe(c, (m) => m !== 'probe' && heard.get(c)!.push(m))
      for (const c of channels) {
        // Until B's subscription is confirmed by Redis, A cannot tell it listens.
        for (let i = 0; i < 100 && !(await a.publish(c, 'probe')); i++) await sleep(20)
        t.equal(await a.publish(c, `to ${c}`), true, `${c}: another process listens`)
      }
      await sleep(200)
      for (const c of channels) t.same(heard.get(c), [`to ${c}`], `${c}: heard once, by the other process`)

      const counters = openCounters({ redis: a.redis, log, registry: new Registry() })
      const keyPrefix = `atrium:test:${suffix()}`
      const counter = counters.counter({ points: 3, windowSeconds: 60, keyPrefix, name: 'test' })
      const keys = Array.from({ length: 12 }, (_, i) => `acct:${i}`)
      for (const key of keys) for (let i = 0; i < 3; i++) await counter.consume(key)
      t.match(
        await counter.consume('acct:0').catch((state: unknown) => state),
        { remainingPoints: 0 },
        'past the limit: refused',
      )
      await counter.block('blocked', 30)
      t.ok((await counter.get('blocked'))!.consumedPoints > 3, 'blocked')
      const slotsUsed = new Set(
        await Promise.all(
          keys.map((k) => (a.redis as Redis).call('cluster', 'keyslot', `${keyPrefix}:${k}`).catch(() => 0)),
        ),
      )
      if (a.redis instanceof Cluster) t.ok(slotsUsed.size > 1, 'the keys are in several slots')
      t.same((await counter.deleteStartingWith('acct:')).sort(), [...keys].sort(), 'every key deleted, on every master')
      t.equal(await counter.get('acct:0'), null)

      const limit = counters.requestLimit({ points: 50, windowSeconds: 60, keyPrefix, name: 'test' })
      const states = []
      for (let i = 0; i < 60; i++) states.push(await limit.hit('client'))
      t.equal(states.filter((s) => s.allowed).length, 50, 'exactly the limit passes')
      t.equal(
        states.findIndex((s) => !s.allowed),
        50,
        'the first refused is the 51st',
      )
      // The other process shares the count.
      const other = openCounters({ redis: b.redis, log, registry: new Registry() }).requestLimit({
        points: 50,
        windowSeconds: 60,
        keyPrefix,
        name: 'test',
      })
      t.equal((await other.hit('client')).allowed, false, 'over the limit on the other process too')
    },
  )
}

interface Outcome {
  at: number
  status: number
  code?: string
}

/** Calls `once` back to back (with `pauseMs` between) until `stop` says so; every outcome noted, a network error as 0. */
async function loop(stop: () => boolean, pauseMs: number, once: (i: number) => Promise<number>, into: Outcome[]) {
  for (let i = 0; !stop(); i++) {
    const status = await once(i).catch(() => 0)
    into.push({ at: Date.now(), status })
    if (pauseMs) await sleep(pauseMs)
  }
}

/** The key a counter's holder has in Redis: the one whose count is within `[min, max]`. */
async function keyCounted(topology: Topology, min: number, max: number): Promise<string | null> {
  const client = redisClient(parseRedisUrl(topology.url), { maxRetriesPerRequest: 1 })
  try {
    if (client instanceof Cluster) await client.connect().catch(() => {})
    for (const node of mastersOf(client)) {
      let cursor = '0'
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', 'atrium:rl*', 'COUNT', 1000)
        for (const key of keys) {
          const n = Number(await node.get(key).catch(() => null))
          if (n >= min && n <= max) return key
        }
        cursor = next
      } while (cursor !== '0')
    }
    return null
  } finally {
    client.disconnect()
  }
}

const LIMIT = 1200

async function failoverUnderLoad(t: Test, name: string, make: (t: Test) => Promise<Topology>) {
  const topology = await make(t)
  const llm = await fakeLlm(t)
  const env = await testEnv(t, {
    REDIS_URL: topology.url,
    OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32',
    RATE_LIMIT_MAX: String(LIMIT),
    // One window for the whole test: a client's count is never reset under it.
    RATE_LIMIT_WINDOW_SECONDS: '600',
  })
  // Two writers, so that neither comes near the limit.
  const writers = [
    await adminTenant(t, env, 'Writer', 'enterprise'),
    await adminTenant(t, env, 'Writer 2', 'enterprise'),
  ]
  const writer = writers[0]!
  const over = await adminTenant(t, env, 'Over the limit', 'enterprise')
  const half = await adminTenant(t, env, 'Half the limit', 'enterprise')

  // A alone at first, so that A's job runner takes the reply.
  const a = await serverProcess(t, env)
  const llmSet = await a.call(writer.apiKey, 'PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'openai-compatible',
    baseUrl: llm.url,
    model: 'm',
    apiKey: 'sk-failover-test-00000',
  })
  t.match(llmSet, { status: 200 }, 'LLM settings saved')
  const sessionId = (await a.call(writer.apiKey, 'POST', '/api/v1/chat/sessions', { title: 'failover' })).body.data.id
  const words = Array.from({ length: 160 }, (_, i) => ['café', 'über', '日本語', '🙂', 'atrium'][i % 5]! + i)
  const text = words.join(' ') + '.'
  const streamOpen = gate()
  const failedOver = gate()
  const resumed = gate()
  // The reply waits for the stream, then at a third for the failover, at two thirds for the resume: it spans both.
  llm.push({
    text,
    chunkDelayMs: 10,
    hold: (piece) =>
      piece === 0 ? streamOpen.opened : piece === 50 ? failedOver.opened : piece === 110 ? resumed.opened : undefined,
  })
  const posted = await a.call(writer.apiKey, 'POST', `/api/v1/chat/sessions/${sessionId}/messages`, {
    content: 'Talk.',
  })
  t.match(posted, { status: 201 }, 'message posted to A')
  for (let i = 0; i < 400 && !llm.requests.length; i++) await sleep(25)
  const b = await serverProcess(t, env)
  const servers: ServerProcess[] = [a, b]

  // The over-the-limit client spends its whole window first (both replicas), then keeps asking.
  let spent = 0
  for (let i = 0; ; i++) {
    const r = await servers[i % 2]!.call(over.apiKey, 'GET', '/api/v1/tenant')
    if (r.status === 429) break
    spent++
    if (spent > LIMIT) break
  }
  t.ok(spent <= LIMIT && spent >= LIMIT - batchTolerance(LIMIT, 2), `the limit spent: ${spent} passed, then 429`)
  // The half client spends half its window.
  const halfOutcomes: Outcome[] = []
  for (let i = 0; i < LIMIT / 2; i++)
    halfOutcomes.push({
      at: Date.now(),
      status: (await servers[i % 2]!.call(half.apiKey, 'GET', '/api/v1/tenant')).status,
    })
  t.ok(
    halfOutcomes.every((o) => o.status === 200),
    'half the limit passed',
  )

  const proxy = await faultProxy(t, { host: '127.0.0.1', port: b.port })
  let cutDone = false
  const stream = follow(`http://127.0.0.1:${proxy.port}/api/v1/chat/sessions/${sessionId}/stream`, writer.apiKey, {
    until: (e) => e.event === 'message.completed' || e.event === 'error',
    onOpen: (n) => (n === 1 ? streamOpen.open() : resumed.open()),
  })

  let stopping = false
  const stop = () => stopping
  const writes: Outcome[] = []
  const acknowledged: string[] = []
  const overOutcomes: Outcome[] = []
  const loops = [
    ...[0, 1].map((w) =>
      loop(
        stop,
        20,
        async (i) => {
          const r = await servers[(i + w) % 2]!.call(writers[w]!.apiKey, 'POST', '/api/v1/projects', { name: `w${i}` })
          if (r.status === 201) acknowledged.push(r.body.data.id)
          return r.status
        },
        writes,
      ),
    ),
    loop(
      stop,
      10,
      async (i) => (await servers[i % 2]!.call(over.apiKey, 'GET', '/api/v1/tenant')).status,
      overOutcomes,
    ),
  ]
  await sleep(1500) // the load steady before the kill

  // The master that holds the half client's counter, killed as a crash would.
  const key = await keyCounted(topology, LIMIT / 2 - 100, LIMIT / 2 + 100)
  t.ok(key, "the half client's counter found in Redis")
  const master = await topology.masterOf(key!)
  const killedAt = Date.now()
  topology.kill(master)
  // The half client goes on through the failover on each replica, until that one has refused it 20 times.
  const passedAfterRefusal: number[] = []
  const halfLoops = servers.map(async (server) => {
    let refused = 0
    for (let i = 0; refused < 20 && i < LIMIT * 2; i++) {
      const status = await server.call(half.apiKey, 'GET', '/api/v1/tenant').then(
        (r) => r.status,
        () => 0,
      )
      halfOutcomes.push({ at: Date.now(), status })
      if (status === 429) refused++
      else if (refused) passedAfterRefusal.push(status)
    }
  })
  const promoted = await topology.failedOver(master)
  const promotedAt = Date.now()
  failedOver.open()
  // A cut once the reply goes on: the client resumes with the last id it had.
  for (let i = 0; i < 200 && !cutDone; i++) {
    await sleep(25)
    if (llm.requests.length) {
      cutDone = true
      proxy.cut()
      proxy.restore()
    }
  }
  const events = await stream.events
  await Promise.all(halfLoops)
  await sleep(2000) // the load goes on after the failover
  stopping = true
  await Promise.all(loops)

  // The processes stay up and ready.
  for (const [n, s] of [
    ['A', a],
    ['B', b],
  ] as const) {
    t.equal(s.child.exitCode, null, `${n} is still running`)
    let ready = 0
    for (let i = 0; i < 100 && ready !== 200; i++, await sleep(100)) ready = (await fetch(`${s.base}/readyz`)).status
    t.equal(ready, 200, `${n} ready on the promoted master`)
  }

  // Every acknowledged write is there.
  const sql = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => sql.end())
  const stored = new Set(
    (
      await sql<{ id: string }[]>`select id from projects where tenant_id in ${sql(writers.map((w) => w.tenantId))}`
    ).map((r) => r.id),
  )
  t.ok(acknowledged.length > 50, `${acknowledged.length} writes acknowledged`)
  t.equal(acknowledged.filter((id) => !stored.has(id)).length, 0, 'every acknowledged write is stored')
  const failed = writes.filter((w) => w.status !== 201)
  t.same(failed, [], 'no write failed')

  // The stream: each event once, in order, the deltas the reply exactly, across the cut.
  t.ok(
    stream.requests.length >= 2 && stream.requests[1] === String(stream.failures[0]?.lastId),
    'resumed with Last-Event-ID',
  )
  assertWholeReply(t, events, text)

  // The limits: the client over its limit stayed over; the half client got no more than the limit.
  t.same(
    overOutcomes.filter((o) => o.status !== 429).map((o) => o.status),
    [],
    'over the limit: refused throughout',
  )
  const halfPassed = halfOutcomes.filter((o) => o.status === 200).length
  t.ok(halfPassed <= LIMIT, `the half client passed ${halfPassed} of ${LIMIT}`)
  t.ok(halfPassed >= LIMIT - batchTolerance(LIMIT, 2), `and no fewer than the limit less the tokens a replica holds`)
  t.same(passedAfterRefusal, [], 'once refused by a replica, refused there')

  const all = [...writes, ...overOutcomes, ...halfOutcomes]
  const during = all.filter((o) => o.at >= killedAt && o.at <= promotedAt)
  t.comment(
    `${name}: master ${master} killed, ${promoted} promoted after ${promotedAt - killedAt} ms; ` +
      `${all.length} requests (${during.length} during the failover), ${all.filter((o) => o.status >= 500 || o.status === 0).length} failed; ` +
      `writes ${writes.length}, the half client passed ${halfPassed}`,
  )
}

for (const [name, make] of TOPOLOGIES) {
  t.test(
    `on ${name}, a master killed under load: the servers stay up, no write or delta lost, no client past its limit`,
    {
      skip:
        topologySkip() ||
        (!services.databaseUrl && 'needs TEST_DATABASE_URL: two server processes share PostgreSQL as replicas do'),
    },
    (t) => failoverUnderLoad(t, name, make),
  )
}
