import pino from 'pino'
import t from 'tap'
import { principal } from '../../helpers/principal.js'
import { openCache } from '../../../server/platform/cache.js'
import { INVALIDATE_CHANNEL, openCredentials } from '../../../server/platform/credentials.js'

t.test('invalidating on one replica drops the entry on the others', async (t) => {
  const bus = await openCache({ redisUrl: '', log: pino({ level: 'silent' }) })
  t.teardown(() => bus.close())
  const a = await openCredentials(bus)
  const b = await openCredentials(bus)
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  b.cache.set('jwt', principal({ sessionId: 's9' }), null)
  await a.invalidate({ kind: 'session', id: 's9' })
  t.equal(b.cache.get('jwt'), undefined)
})

t.test('a malformed invalidation is logged and ignored: it drops nothing, and later ones still work', async (t) => {
  const bus = await openCache({ redisUrl: '', log: pino({ level: 'silent' }) })
  t.teardown(() => bus.close())
  const warned: unknown[] = []
  const b = await openCredentials(bus, { warn: (o) => void warned.push(o) })
  t.teardown(() => b.close())
  b.cache.set('jwt1', principal({ sessionId: 's1' }), null)
  b.cache.set('jwt2', principal({ sessionId: 's2' }), null)
  await bus.publish(INVALIDATE_CHANNEL, 'not json')
  t.same(warned, [{ message: 'not json' }], 'the malformed message is logged')
  t.match(b.cache.get('jwt1'), { sessionId: 's1' }, 'and drops nothing')
  t.match(b.cache.get('jwt2'), { sessionId: 's2' })
  await bus.publish(INVALIDATE_CHANNEL, JSON.stringify({ kind: 'session', id: 's1' }))
  t.equal(b.cache.get('jwt1'), undefined, 'the subscription survived: the next message is applied')
  t.match(b.cache.get('jwt2'), { sessionId: 's2' })
})
