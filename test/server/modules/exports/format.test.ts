// The archive format's rules that need no server: ids derived for a tenant, includes, CSV fields.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { v7 } from 'uuid'
import { isUuid } from '../../../../common/ids.js'
import { csvField, derivedId, normalizeInclude } from '../../../../server/modules/exports/format.js'

const KEY = randomBytes(32)
const B = v7()

t.test(
  'an id derived for a tenant is the same UUIDv7 every time, and another for another tenant or installation',
  async (t) => {
    const id = v7()
    const mapped = derivedId(KEY, B, id)
    t.not(mapped, id)
    t.ok(isUuid(mapped))
    t.equal(mapped[14], '7', 'still version 7')
    t.match(mapped[19], /[89ab]/, 'still the RFC variant')
    t.equal(derivedId(KEY, B, id), mapped, 'deterministic: a second restore meets the first one’s records')
    t.not(derivedId(KEY, v7(), id), mapped, 'another tenant, another id')
    t.not(
      derivedId(randomBytes(32), B, id),
      mapped,
      'without the installation’s key nobody can tell what an id becomes',
    )
    t.equal(derivedId(KEY, B, id.toUpperCase()), mapped, 'the same whatever the case')
  },
)

t.test('derived ids sort as the originals did, also within one millisecond', async (t) => {
  const ids = Array.from({ length: 2000 }, () => v7()) // many share a millisecond
  const sorted = [...ids].sort()
  t.same(
    sorted.map((id) => derivedId(KEY, B, id)),
    sorted.map((id) => derivedId(KEY, B, id)).sort(),
  )
  t.equal(new Set(ids.map((id) => derivedId(KEY, B, id))).size, ids.length, 'no two the same')
})

t.test('include: all, and the specification’s "chat history"', async (t) => {
  t.same(normalizeInclude(['all']), ['projects', 'agents', 'chat_history', 'settings'])
  t.same(normalizeInclude(['settings', 'chat history', 'settings']), ['chat_history', 'settings'])
  t.same(normalizeInclude(['nothing']), [])
})

t.test('a CSV field is quoted as RFC 4180 says, and a formula is defused', async (t) => {
  t.equal(csvField('plain'), 'plain')
  t.equal(csvField('a,b'), '"a,b"')
  t.equal(csvField('say "hi"'), '"say ""hi"""')
  t.equal(csvField('two\nlines'), '"two\nlines"')
  t.equal(csvField(null), '')
  t.equal(csvField(42), '42')
  t.equal(csvField({ a: [1, 'x'] }), '"{""a"":[1,""x""]}"')
  t.equal(csvField(new Date('2026-01-02T03:04:05Z')), '2026-01-02T03:04:05.000Z')
  for (const f of ['=1+1', '+1', '-1', '@SUM(A1)', '\tx'])
    t.equal(csvField(f)[0] === '"' ? csvField(f)[1] : csvField(f)[0], "'", JSON.stringify(f))
  t.equal(csvField(-1), '-1', 'numbers are numbers, not formulas')
})
