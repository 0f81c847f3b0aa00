// Opaque cursors and pages (pagination.ts): a cursor is only ever one this API returned, of the kind
// the list asks for.
import t from 'tap'
import { decodeIdCursor, decodeNumberCursor, encodeCursor, toPage } from '../../../server/domain/pagination.js'

const ID = '01900000-0000-7000-8000-00000000abcd'
const cursorOf = (text: string) => Buffer.from(text).toString('base64url')
const notACursor = {
  code: 'VALIDATION_ERROR',
  status: 400,
  details: { errors: [{ field: 'cursor', message: 'is not a cursor this API returned' }] },
}

t.test('a cursor reads back as the key it was made from; no cursor is the first page', async (t) => {
  t.equal(decodeIdCursor(encodeCursor(ID)), ID)
  t.equal(decodeNumberCursor(encodeCursor(42)), 42)
  t.equal(decodeNumberCursor(encodeCursor(0)), 0)
  t.equal(decodeIdCursor(undefined), null)
  t.equal(decodeNumberCursor(undefined), null)
  t.match(encodeCursor(ID), /^[A-Za-z0-9_-]+$/, 'safe in a query string as it is')
})

t.test('an id cursor holds a lower-case UUID and nothing else', async (t) => {
  for (const text of [
    `v1:${ID.toUpperCase()}`,
    `v1:${ID} `,
    `v2:${ID}`,
    ID,
    'v1:42',
    'v1:',
    `v1:${ID.replace(/-/g, '')}`,
  ]) {
    t.throws(() => decodeIdCursor(cursorOf(text)), notACursor, JSON.stringify(text))
  }
  t.throws(() => decodeIdCursor('not-a-cursor'), notACursor)
  t.throws(() => decodeIdCursor(''), notACursor)
})

t.test('a number cursor holds a whole number of at most ten digits, written as we write it', async (t) => {
  for (const text of ['v1:-1', 'v1:007', 'v1:1.5', 'v1:1e3', 'v1:12345678901', `v1:${ID}`, 'v1:', 'v1: 3']) {
    t.throws(() => decodeNumberCursor(cursorOf(text)), notACursor, JSON.stringify(text))
  }
  t.equal(decodeNumberCursor(cursorOf('v1:9999999999')), 9_999_999_999)
})

t.test("a cursor of one kind is not accepted as the other's", async (t) => {
  t.throws(() => decodeNumberCursor(encodeCursor(ID)), notACursor)
  t.throws(() => decodeIdCursor(encodeCursor(3)), notACursor)
})

t.test(
  'a page is the first `limit` rows; the extra row fetched only says there is a next page, which starts after the last item',
  async (t) => {
    const rows = [{ v: 5 }, { v: 4 }, { v: 3 }]
    const full = toPage(rows, 2, (r) => r.v)
    t.same(full.items, [{ v: 5 }, { v: 4 }])
    t.equal(decodeNumberCursor(full.nextCursor!), 4)
    t.same(
      toPage(rows, 3, (r) => r.v),
      { items: rows, nextCursor: null },
      'exactly limit rows: the last page',
    )
    t.same(
      toPage([], 3, (r: { v: number }) => r.v),
      { items: [], nextCursor: null },
    )
  },
)
