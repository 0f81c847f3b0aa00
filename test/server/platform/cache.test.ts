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
