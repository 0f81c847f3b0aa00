import pino from 'pino'
import t from 'tap'
import type { Principal } from '../../../server/domain/principal.js'
import { openCache } from '../../../server/platform/cache.js'
import { INVALIDATE_CHANNEL, openCredentials } from '../../../server/platform/credentials.js'

t.test('invalidating on one replica drops the entry on the others', async (t) => {
  const bus = await openCache({ redisUrl: '', log: pino({ level: 'silent' }) })
  const a = await openCredentials(bus)
  const b = await openCredentials(bus)
  const principal: Principal = { kind: 'user', id: 'u1', tenantId: 't1', plan: 'pro', userId: 'u1', role: 'member', sessionId: 's9', permissions: new Set() }
  b.cache.set('jwt', principal, null)
  await a.invalidate({ kind: 'session', id: 's9' })
  t.equal(b.cache.get('jwt'), undefined)
  await bus.publish(INVALIDATE_CHANNEL, 'not json')
  t.pass('a malformed message is ignored')
  await a.close()
  await b.close()
})
