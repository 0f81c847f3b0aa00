import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { generateSecret, secretProblem, sign, signingKey } from '../../../../server/modules/webhooks/signing.js'

t.test('signatures match the reference implementation for both secret forms', async (t) => {
  const body = JSON.stringify({ id: 'e1', type: 'project.created', data: { name: 'é✓' } })
  const ts = Math.floor(Date.now() / 1000)
  for (const secret of [generateSecret(), 'a-raw-secret-of-enough-characters']) {
    const reference = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' })
    t.equal(
      sign([signingKey(secret)], 'msg_1', ts, body),
      reference.sign('msg_1', new Date(ts * 1000), body),
      secret.slice(0, 6),
    )
  }
})

t.test('several keys give several space-separated signatures, any of which verifies', async (t) => {
  const [a, b] = [generateSecret(), generateSecret()]
  const ts = Math.floor(Date.now() / 1000)
  const header = sign([signingKey(a), signingKey(b)], 'msg_2', ts, '{}')
  t.equal(header.split(' ').length, 2)
  for (const s of [a, b])
    t.same(
      new Webhook(s).verify('{}', {
        'webhook-id': 'msg_2',
        'webhook-timestamp': String(ts),
        'webhook-signature': header,
      }),
      {},
    )
  t.throws(() =>
    new Webhook(generateSecret()).verify('{}', {
      'webhook-id': 'msg_2',
      'webhook-timestamp': String(ts),
      'webhook-signature': header,
    }),
  )
})

t.test('a whsec_ secret must be base64 of at least 16 bytes; other secrets are taken as they are', async (t) => {
  t.equal(secretProblem(generateSecret()), null)
  t.equal(secretProblem('plain-secret-that-is-long-enough'), null)
  t.match(secretProblem('whsec_!!!!!!!!!!!!!!!!!!!!!!!!'), /base64/)
  t.match(secretProblem('whsec_' + Buffer.alloc(15).toString('base64')), /16 bytes/)
  t.equal(signingKey('whsec_' + Buffer.from('0123456789abcdef').toString('base64')).toString(), '0123456789abcdef')
})
