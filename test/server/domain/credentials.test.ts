import t from 'tap'
import { CredentialCache } from '../../../server/domain/credentials.js'
import { principal } from '../../helpers/principal.js'

t.test('a cached credential is returned until it expires', async (t) => {
  const cache = new CredentialCache()
  t.equal(cache.get('a'), undefined, 'unknown: only a lookup can tell')
  cache.set('a', principal({}), 1000)
  t.match(cache.get('a', 999), { id: 'u1' })
  t.equal(cache.get('a', 1000), null, 'expired: refused without a lookup')
})

t.test('an invalidation drops exactly the principals it names', async (t) => {
  const cache = new CredentialCache()
  cache.set('jwt1', principal({ sessionId: 's1' }), null)
  cache.set('jwt2', principal({ sessionId: 's2' }), null)
  cache.set('key1', principal({ kind: 'api_key', id: 'k1', userId: 'u2', sessionId: null }), null)
  cache.set('key2', principal({ kind: 'api_key', id: 'k2', userId: null, sessionId: null, tenantId: 't2' }), null)
  cache.drop({ kind: 'session', id: 's1' })
  t.equal(cache.get('jwt1'), undefined)
  t.ok(cache.get('jwt2'))
  cache.drop({ kind: 'api_key', id: 'u1' })
  t.ok(cache.get('jwt2'), 'a key invalidation never matches a user principal')
  cache.drop({ kind: 'user', id: 'u2' })
  t.equal(cache.get('key1'), undefined, 'a user invalidation drops the keys they own')
  cache.drop({ kind: 'tenant', id: 't2' })
  t.equal(cache.get('key2'), undefined)
  t.ok(cache.get('jwt2'))
})
