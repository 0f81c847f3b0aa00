import t from 'tap'
import { findNul } from '../../../server/http/validation.js'

t.test('finds a NUL character anywhere in a body and names its place', async (t) => {
  t.equal(findNul({ a: 'ok', b: ['x', { c: 'bad\u0000' }] }), 'body.b.1.c')
  t.equal(findNul({ ['k\u0000']: 1 }), 'body.k\u0000')
  t.equal(findNul('\u0000'), 'body')
})

t.test('clean bodies pass', async (t) => {
  for (const body of [undefined, null, 1, true, 'text \\u0000 written out', { a: [1, 'b', { c: null }] }]) t.equal(findNul(body), null)
})
