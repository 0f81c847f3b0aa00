import pino from 'pino'
import t from 'tap'
import { openCache } from '../../../server/platform/cache.js'
import { services } from '../../helpers/platform.js'

const log = pino({ level: 'silent' })

t.test('without REDIS_URL there is no shared cache and nothing to fail', async (t) => {
  const cache = await openCache({ redisUrl: '', log })
  t.equal(cache.redis, null)
  await cache.ping()
  await cache.close()
})

t.test('a real Redis answers', { skip: !services.redisUrl && 'TEST_REDIS_URL is not set' }, async (t) => {
  const cache = await openCache({ redisUrl: services.redisUrl, log })
  await cache.ping()
  t.equal(cache.redis?.status, 'ready')
  await cache.close()
})

t.test('an unreachable Redis does not stop start-up, and its ping fails', async (t) => {
  const cache = await openCache({ redisUrl: 'redis://127.0.0.1:1', log })
  await t.rejects(cache.ping())
  await cache.close()
})

/** The next message on a channel, or null after a while. */
const next = (messages: string[], timeoutMs = 3000) =>
  new Promise<string | null>((resolve) => {
    const started = Date.now()
    const poll = () =>
      messages.length
        ? resolve(messages.shift()!)
        : Date.now() - started > timeoutMs
          ? resolve(null)
          : setTimeout(poll, 10)
    poll()
  })

t.test('without Redis a message reaches the subscribers of this process', async (t) => {
  const cache = await openCache({ redisUrl: '', log })
  const got: string[] = []
  const off = await cache.subscribe('c', (m) => got.push(m))
  t.equal(await cache.publish('c', 'hello'), false, 'no other process can listen')
  t.same(got, ['hello'])
  await off()
  await cache.publish('c', 'again')
  t.same(got, ['hello'], 'nothing after unsubscribing')
  await cache.close()
})

t.test(
  'through Redis a message reaches every process once, and its own subscribers at once',
  { skip: !services.redisUrl && 'TEST_REDIS_URL is not set' },
  async (t) => {
    const a = await openCache({ redisUrl: services.redisUrl, log })
    const b = await openCache({ redisUrl: services.redisUrl, log })
    t.teardown(async () => {
      await a.close()
      await b.close()
    })
    const channel = `atrium:test:${Math.random()}`
    const onA: string[] = []
    const got: string[] = []
    await a.subscribe(channel, (m) => onA.push(m))
    const off = await b.subscribe(channel, (m) => got.push(m))
    // The subscription is confirmed asynchronously: publish until the other side hears.
    let heard: string | null = null
    let sent = 0
    for (let i = 0; i < 50 && !heard; i++) {
      const published = a.publish(channel, 'revoke')
      t.equal(onA.length, ++sent, 'heard in this process before Redis answers')
      await published
      heard = await next(got, 100)
    }
    t.equal(heard, 'revoke', 'as sent, without the origin marker')
    await new Promise((r) => setTimeout(r, 100))
    t.equal(onA.length, sent, 'never its own echo from Redis')

    t.equal(await a.publish(channel, 'again'), true, 'another process listens, as Redis counted')
    t.equal(await a.publish(channel, 'kept', { localOnly: true }), null, 'local only: nothing learnt')
    t.equal(onA.at(-1), 'kept', 'heard here')
    t.equal(await next(got, 100), 'again')
    t.equal(await next(got, 200), null, 'not elsewhere')
    await off()
    // Redis does the UNSUBSCRIBE on its own time: until then the other process still counts.
    let listened: boolean | null = true
    for (let i = 0; i < 50 && listened; i++) listened = await a.publish(channel, 'alone')
    t.equal(listened, false, 'only this process listens: its own subscription is not counted as another')
  },
)

t.test('with Redis down a publish still reaches this process', async (t) => {
  const cache = await openCache({ redisUrl: 'redis://127.0.0.1:1', log })
  const got: string[] = []
  await cache.subscribe('c', (m) => got.push(m))
  t.equal(await cache.publish('c', 'local'), null, 'whether another process listens is not learnt')
  t.same(got, ['local'])
  await cache.close()
})
