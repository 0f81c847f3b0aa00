import t from 'tap'
import { addressKey } from '../../../server/domain/client-address.js'

t.test('IPv4 counts as itself, also when a dual-stack socket reports it mapped into IPv6', async (t) => {
  t.equal(addressKey('192.0.2.7'), '192.0.2.7')
  t.equal(addressKey('::ffff:192.0.2.7'), '192.0.2.7')
})

t.test('IPv6 counts by its /64: one host holds them all', async (t) => {
  const keys = ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:fffe', '2001:0db8:0001:0002:0:0:0:42'].map(addressKey)
  t.same(new Set(keys).size, 1)
  t.equal(keys[0], '2001:db8:1:2::/64')
  t.not(addressKey('2001:db8:1:3::1'), keys[0], 'the next /64 is another client')
})

t.test('something that is no address counts as itself', async (t) => {
  t.equal(addressKey('unix-socket'), 'unix-socket')
})
