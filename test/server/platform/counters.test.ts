// Window counters (platform/counters.ts) as an administrator's action uses them: every key under a
// prefix deleted at once, in Redis when there is one and in this process's memory.
import pino from 'pino'
import { Registry } from 'prom-client'
import t from 'tap'
import { openCache } from '../../../server/platform/cache.js'
import { openCounters } from '../../../server/platform/counters.js'
import { services, suffix } from '../../helpers/platform.js'

t.test(
  `deleteStartingWith deletes the keys under the prefix and no other, a glob character taken as itself (${services.redisUrl ? 'Redis' : 'memory'})`,
  async (t) => {
    const log = pino({ level: 'silent' })
    const cache = await openCache({ redisUrl: services.redisUrl, log })
    t.teardown(() => cache.close())
    const counter = openCounters({ redis: cache.redis, log, registry: new Registry() }).counter({
      points: 10,
      windowSeconds: 60,
      keyPrefix: `atrium:test:${suffix()}`,
      name: 'test',
    })
    const keys = ['acct:10.0.0.1', 'acct:10.0.0.2', 'acct*:10.0.0.3', 'acct2:10.0.0.1', 'other:acct:10.0.0.1']
    for (const key of keys) await counter.hit(key)
    t.same((await counter.deleteStartingWith('acct:')).sort(), ['acct:10.0.0.1', 'acct:10.0.0.2'])
    t.same((await counter.deleteStartingWith('acct*')).sort(), ['acct*:10.0.0.3'], "'*' matches only a '*'")
    const left = await Promise.all(keys.map(async (key) => [key, (await counter.get(key))?.consumedPoints ?? null]))
    t.same(Object.fromEntries(left), {
      'acct:10.0.0.1': null,
      'acct:10.0.0.2': null,
      'acct*:10.0.0.3': null,
      'acct2:10.0.0.1': 1,
      'other:acct:10.0.0.1': 1,
    })
    t.same(await counter.deleteStartingWith('acct:'), [], 'nothing left to delete')
    await counter.deleteStartingWith('')
  },
)
