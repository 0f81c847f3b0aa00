import t, { type Test } from 'tap'
import { appOn, caller, testApp } from '../../helpers/app.js'
import { randomBase62 } from '../../../common/ids.js'
import { countLookups, services, suffix, testPlatform } from '../../helpers/platform.js'
import { batchTolerance, openCounters } from '../../../server/platform/counters.js'
import pino from 'pino'
import { Registry } from 'prom-client'
import { Redis } from 'ioredis'
import { openCache } from '../../../server/platform/cache.js'
import { faultProxy } from '../../helpers/fault-proxy.js'

/** Two replicas (apps) on one platform, sharing the limit's keys, and one key's caller through each. */
async function twoReplicas(t: Test, overrides: Record<string, string>) {
  const platform = await testPlatform(t, overrides)
  const prefix = `atrium:test:${suffix()}`
  const one = await appOn(t, platform, { rateLimitPrefix: prefix })
  const two = await appOn(t, platform, { rateLimitPrefix: prefix })
  const { apiKey } = await one.tenant()
  return { platform, prefix, replicas: [caller(one.app, apiKey), caller(two.app, apiKey)] as const }
}

t.test('every API response carries the rate-limit headers', async (t) => {
  const h = await testApp(t)
  const { call } = await h.tenant()
  const first = await call('GET', '/api/v1/projects')
  t.equal(first.headers['x-ratelimit-limit'], '1000')
  t.equal(first.headers['x-ratelimit-remaining'], '999')
  const reset = Number(first.headers['x-ratelimit-reset'])
  t.ok(reset >= 1 && reset <= 60, `reset in seconds: ${reset}`)
  t.equal((await call('GET', '/api/v1/projects')).headers['x-ratelimit-remaining'], '998')
  for (const r of [
    await call('GET', '/api/v1/projects/not-a-uuid'),
    await h.anonymous('GET', '/api/v1/projects'),
    await call('GET', '/api/v1/unknown'),
  ]) {
    t.equal(r.headers['x-ratelimit-limit'], '1000', `${r.status} responses too`)
  }
})

t.test('past the limit: 429 RATE_LIMIT_EXCEEDED with Retry-After, per key', async (t) => {
  const h = await testApp(t, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '30' })
  const a = await h.tenant()
  const b = await h.tenant()
  for (let i = 0; i < 3; i++) t.equal((await a.call('GET', '/api/v1/projects')).status, 200)
  const limited = await a.call('GET', '/api/v1/projects')
  t.equal(limited.status, 429)
  t.equal(limited.body.error.code, 'RATE_LIMIT_EXCEEDED')
  t.equal(limited.headers['x-ratelimit-remaining'], '0')
  const retry = Number(limited.headers['retry-after'])
  t.ok(retry >= 1 && retry <= 30, `Retry-After ${retry}`)
  t.match(limited.body.error.details, { limit: 3, windowSeconds: 30, retryAfterSeconds: retry })
  const write = await a.call('POST', '/api/v1/projects', { name: 'over the limit' })
  t.equal(write.status, 429, 'writes are limited too')
  t.equal((await b.call('GET', '/api/v1/projects')).status, 200, 'another key has its own budget')
  t.same((await b.call('GET', '/api/v1/projects')).body.data, [])
})

t.test('unauthenticated requests are limited by address', async (t) => {
  const h = await testApp(t, { RATE_LIMIT_MAX: '2' })
  t.equal((await h.anonymous('GET', '/api/v1/projects')).status, 401)
  t.equal((await h.anonymous('GET', '/api/v1/projects')).status, 401)
  const third = await h.anonymous('GET', '/api/v1/projects', undefined, {
    authorization: 'Bearer svc_ci_' + 'y'.repeat(40),
  })
  t.equal(third.status, 429, 'guessing keys from one address is limited')
})

t.test('routes outside the API are not limited', async (t) => {
  const h = await testApp(t, { RATE_LIMIT_MAX: '1' })
  for (let i = 0; i < 3; i++) t.equal((await h.anonymous('GET', '/healthz')).status, 200)
  t.notOk((await h.anonymous('GET', '/healthz')).headers['x-ratelimit-limit'])
})

t.test('routes marked exempt (auth endpoints) are not limited', async (t) => {
  const h = await testApp(
    t,
    { RATE_LIMIT_MAX: '1' },
    {
      routes: (app) =>
        app.post('/api/v1/auth/test-exempt', { config: { auth: false, rateLimit: false } }, async () => ({
          data: {},
          meta: {},
        })),
    },
  )
  for (let i = 0; i < 3; i++) t.equal((await h.anonymous('POST', '/api/v1/auth/test-exempt')).status, 200)
})

t.test(
  'two server instances on one Redis share the limit',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const [viaOne, viaTwo] = (await twoReplicas(t, { RATE_LIMIT_MAX: '4' })).replicas
    const statuses = [
      (await viaOne('GET', '/api/v1/projects')).status,
      (await viaTwo('GET', '/api/v1/projects')).status,
      (await viaOne('GET', '/api/v1/projects')).status,
      (await viaTwo('GET', '/api/v1/projects')).status,
      (await viaOne('GET', '/api/v1/projects')).status,
      (await viaTwo('GET', '/api/v1/projects')).status,
    ]
    t.same(statuses, [200, 200, 200, 200, 429, 429])
  },
)

t.test(
  'replicas reserving tokens in batches never pass more than the limit, and refuse early no more than the stated tolerance',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const max = 1000
    const { platform, prefix, replicas } = await twoReplicas(t, {
      RATE_LIMIT_MAX: String(max),
      RATE_LIMIT_WINDOW_SECONDS: '300',
    })
    // Reservations are scripts run on this limit's keys: counted as the client sends them.
    const redis = platform.cache.redis!
    const evalCalls = { n: 0 }
    const send = redis.sendCommand.bind(redis)
    redis.sendCommand = ((command: Parameters<typeof redis.sendCommand>[0], ...rest: unknown[]) => {
      if (/^eval/i.test(command.name) && command.args.some((a) => String(a).startsWith(prefix))) evalCalls.n++
      return (send as (...a: unknown[]) => unknown)(command, ...rest)
    }) as typeof redis.sendCommand
    t.teardown(() => void (redis.sendCommand = send))

    // Bursts of 32 at once, alternating replicas, until both refuse.
    const statuses: number[] = []
    const remaining: number[] = []
    while (statuses.filter((s) => s === 429).length < 32) {
      const burst = await Promise.all(Array.from({ length: 32 }, (_, i) => replicas[i % 2]!('GET', '/api/v1/unknown')))
      for (const r of burst) {
        statuses.push(r.status === 404 ? 200 : r.status)
        if (r.status === 404) remaining.push(Number(r.headers['x-ratelimit-remaining']))
      }
    }
    const granted = statuses.filter((s) => s === 200).length
    const tolerance = batchTolerance(max, 2)
    t.ok(granted <= max, `never more than the limit: ${granted} of ${max}`)
    t.ok(granted >= max - tolerance, `refused early by at most ${tolerance}: ${granted} granted`)
    t.ok(
      remaining.every((r) => r >= 0 && r < max),
      'X-RateLimit-Remaining stays within the limit',
    )
    // Batches of up to 32 while much is left, one by one for the last 31: about 93 for one replica.
    t.ok(evalCalls.n < granted / 5, `far fewer Redis round trips than requests: ${evalCalls.n} for ${statuses.length}`)
    const before = evalCalls.n
    t.equal((await replicas[0]!('GET', '/api/v1/unknown')).status, 429)
    t.equal((await replicas[1]!('GET', '/api/v1/unknown')).status, 429)
    t.equal(evalCalls.n, before, 'a key past its limit is refused without asking Redis until the window ends')
  },
)

t.test(
  'a new window gives a key its whole limit again, across replicas',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const { replicas } = await twoReplicas(t, { RATE_LIMIT_MAX: '64', RATE_LIMIT_WINDOW_SECONDS: '3' })
    const round = async () => {
      // The window starts with the round's first request; 100 requests take far less than its 3 s.
      const r = await Promise.all(Array.from({ length: 100 }, (_, i) => replicas[i % 2]!('GET', '/api/v1/unknown')))
      return r.filter((x) => x.status === 404).length
    }
    for (const n of [1, 2]) {
      const granted = await round()
      t.ok(granted <= 64 && granted >= 64 - batchTolerance(64, 2), `window ${n}: ${granted} of 64 granted`)
      await new Promise((r) => setTimeout(r, 3100))
    }
  },
)

t.test('with Redis unreachable the limit still holds, per replica, and the fallback is counted', async (t) => {
  const h = await testApp(t, { RATE_LIMIT_MAX: '2', REDIS_URL: 'redis://127.0.0.1:1' })
  const { call } = await h.tenant()
  t.equal((await call('GET', '/api/v1/projects')).status, 200)
  t.equal((await call('GET', '/api/v1/projects')).status, 200)
  t.equal((await call('GET', '/api/v1/projects')).status, 429)
  const metrics = (await h.anonymous('GET', '/metrics')).raw.toString()
  t.match(metrics, /atrium_rate_limit_fallback_total{limiter="api"} 3\n/, 'each request counted once, in memory only')
})

t.test(
  'made-up keys are refused without a database lookup, and an address that keeps sending them is limited',
  async (t) => {
    const h = await testApp(t, { RATE_LIMIT_MAX: '3' })
    const counted = countLookups(h.platform.db)
    const madeUp = [
      () => `svc_ci_${randomBase62(40)}`,
      () => `svc_ci_${randomBase62(32)}`,
      () => `eyJ${randomBase62(20)}.eyJ${randomBase62(30)}.${randomBase62(43)}`,
    ]
    const statuses: number[] = []
    for (let i = 0; i < 6; i++)
      statuses.push(
        (await h.anonymous('GET', '/api/v1/projects', undefined, { authorization: `Bearer ${madeUp[i % 3]!()}` }))
          .status,
      )
    t.same(statuses, [401, 401, 401, 429, 429, 429])
    t.equal(counted.lookups, 0, 'no key was looked up: none of them was issued here')
  },
)

t.test("a valid key is never refused because of other clients' bad keys from the same address", async (t) => {
  // One address for everyone: a NAT, or a proxy that TRUSTED_PROXIES does not name.
  const h = await testApp(t, { RATE_LIMIT_MAX: '3' })
  const { apiKey } = await h.tenant()
  for (let i = 0; i < 10; i++)
    await h.anonymous('GET', '/api/v1/projects', undefined, { authorization: `Bearer svc_ci_${randomBase62(40)}` })
  t.equal((await h.anonymous('GET', '/api/v1/projects')).status, 429, 'the address is over its limit')
  const first = await h.anonymous('GET', '/api/v1/projects', undefined, { authorization: `Bearer ${apiKey}` })
  t.equal(first.status, 200, 'a key this replica has not seen yet is looked up and served')
  t.equal(first.headers['x-ratelimit-remaining'], '2', 'counted against the key, not the address')
})

t.test(
  'the hot path answers from memory only what memory knows: nothing before a reservation, held tokens after, a full window refused',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const platform = await testPlatform(t)
    const counters = openCounters({
      redis: platform.cache.redis,
      log: pino({ level: 'silent' }),
      registry: new Registry(),
    })
    const limit = counters.requestLimit({
      points: 40,
      windowSeconds: 60,
      keyPrefix: `atrium:test:${suffix()}`,
      name: 'test',
    })
    t.equal(limit.hitNow!('k'), null, 'no tokens held yet: a reservation is needed')
    t.match(await limit.hit('k'), { allowed: true }, 'the first hit reserves a batch from Redis')
    const fromMemory = limit.hitNow!('k')
    t.match(fromMemory, { allowed: true }, 'then a held token is spent at once')
    let granted = 2
    for (;;) {
      const s = limit.hitNow!('k') ?? (await limit.hit('k'))
      if (!s.allowed) break
      granted++
    }
    t.equal(granted, 40, 'exactly the limit, whichever path answered')
    t.match(limit.hitNow!('k'), { allowed: false, remainingPoints: 0 }, 'a full window is refused from memory')
  },
)

t.test(
  'Redis lost mid-window: the replica counts on from what it saw there (no fresh budget), and Redis is told what passed',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const proxy = await faultProxy(t, services.redisUrl)
    const cache = await openCache({ redisUrl: proxy.via(services.redisUrl), log: pino({ level: 'silent' }) })
    t.teardown(() => cache.close())
    const keyPrefix = `atrium:test:${suffix()}`
    const limit = openCounters({
      redis: cache.redis,
      log: pino({ level: 'silent' }),
      registry: new Registry(),
    }).requestLimit({ points: 20, windowSeconds: 60, keyPrefix, name: 'test' })
    const hits = async (n: number) => {
      const states = []
      for (let i = 0; i < n; i++) states.push(limit.hitNow!('k') ?? (await limit.hit('k')))
      return states.filter((s) => s.allowed).length
    }
    // Limits under 32 reserve one token at a time: every hit asks Redis.
    t.equal(await hits(12), 12, '12 of 20 through Redis')
    proxy.cut()
    t.equal(await hits(15), 8, 'Redis away: 8 more pass (20 in the window), not a fresh 20 in memory')
    proxy.restore()
    const direct = new Redis(services.redisUrl)
    t.teardown(() => direct.disconnect())
    let count = 0
    for (let i = 0; i < 100 && count < 20; i++) {
      await hits(1)
      count = Number(await direct.get(`${keyPrefix}:k`))
      if (count < 20) await new Promise((r) => setTimeout(r, 50))
    }
    t.ok(count >= 20, `Redis back: its count (${count}) includes the 8 that passed while it was away`)
    t.equal(await hits(5), 0, 'and the window stays full')
  },
)

t.test(
  'Redis lost mid-window with two replicas: each passes half of what was left, so that together they stay within the limit',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL' },
  async (t) => {
    const proxy = await faultProxy(t, services.redisUrl)
    const keyPrefix = `atrium:test:${suffix()}`
    const replica = async () => {
      const cache = await openCache({ redisUrl: proxy.via(services.redisUrl), log: pino({ level: 'silent' }) })
      t.teardown(() => cache.close())
      // Two replicas, as Redis would count the listeners.
      const counters = openCounters({
        redis: cache.redis,
        log: pino({ level: 'silent' }),
        registry: new Registry(),
        replicas: async () => 2,
      })
      const limit = counters.requestLimit({ points: 20, windowSeconds: 60, keyPrefix, name: 'test' })
      return async (n: number) => {
        let passed = 0
        for (let i = 0; i < n; i++) if ((limit.hitNow!('k') ?? (await limit.hit('k'))).allowed) passed++
        return passed
      }
    }
    const [a, b] = [await replica(), await replica()]
    // Requests alternate between them, as a balancer sends them: each has seen the window lately.
    let before = 0
    for (let i = 0; i < 6; i++) before += (await a(1)) + (await b(1))
    t.equal(before, 12, '12 of 20 through Redis, six on each')
    proxy.cut()
    const during = (await a(10)) + (await b(10))
    // Each passes half of what it saw left, less the batch the other may have taken since: 4 and 3.
    t.equal(during, 7, 'Redis away: 7 more pass between them, not past the 8 left')
  },
)
