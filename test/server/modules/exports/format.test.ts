// The archive format's rules that need no server: ids mapped for another tenant, includes, CSV fields.
import t from 'tap'
import { v7 } from 'uuid'
import { isUuid } from '../../../../common/ids.js'
import { csvField, normalizeInclude, remapId } from '../../../../server/modules/exports/format.js'

const A = v7()
const B = v7()

t.test('an id keeps itself in its own tenant, and maps to the same UUIDv7 every time in another', async (t) => {
  const id = v7()
  t.equal(remapId(id, A, A), id)
  const mapped = remapId(id, A, B)
  t.not(mapped, id)
  t.ok(isUuid(mapped))
  t.equal(mapped[14], '7', 'still version 7')
  t.match(mapped[19], /[89ab]/, 'still the RFC variant')
  t.equal(remapId(id, A, B), mapped, 'deterministic: a second restore meets the first one’s records')
  t.not(remapId(id, A, v7()), mapped, 'another tenant, another id')
  t.equal(remapId(id.toUpperCase(), A, B), mapped, 'the same whatever the case')
})

t.test('mapped ids sort as the originals did, also within one millisecond', async (t) => {
  const ids = Array.from({ length: 2000 }, () => v7()) // many share a millisecond
  const sorted = [...ids].sort()
  t.same(
    sorted.map((id) => remapId(id, A, B)),
    sorted.map((id) => remapId(id, A, B)).sort(),
  )
  t.equal(new Set(ids.map((id) => remapId(id, A, B))).size, ids.length, 'no two the same')
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
  for (const f of ['=1+1', '+1', '-1', '@SUM(A1)', '\tx']) t.equal(csvField(f)[0] === '"' ? csvField(f)[1] : csvField(f)[0], "'", JSON.stringify(f))
  t.equal(csvField(-1), '-1', 'numbers are numbers, not formulas')
})
