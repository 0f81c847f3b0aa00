import t from 'tap'
import { fitRows, fitTail, fitWindow, rowsOf, windowLines } from '../../../installer/ui/fit.js'

t.test('a text takes a row per line, and more where a line is wider than the terminal', async (t) => {
  t.equal(rowsOf('', 80), 1)
  t.equal(rowsOf('x'.repeat(80), 80), 1)
  t.equal(rowsOf('x'.repeat(81), 80), 2)
  t.equal(rowsOf('a\nb\n' + 'x'.repeat(200), 80), 5)
  t.equal(rowsOf('aaaa bbbb cccc', 9), 2, 'wrapped at a space, as Ink does')
  t.equal(rowsOf('aaaa bbbbbbb', 9), 2, 'a word that does not fit goes to the next row whole')
  t.equal(rowsOf(`${'word '.repeat(21)}end`, 80), 2)
  // 111 characters that a division by the width takes for 2 rows, and Ink wraps into 3.
  const line = `${'x'.repeat(50)} ${'y'.repeat(50)} ${'z'.repeat(9)}`
  t.equal(rowsOf(line, 60), 2)
  t.equal(rowsOf(`${'x'.repeat(50)} ${'y'.repeat(50)} ${'z'.repeat(50)}`, 60), 3)
})

t.test('a list longer than its rows shows what fits and how many more, the "more" line counted in', async (t) => {
  const more = (n: number) => `...and ${n} more`
  const lines = ['a', 'b', 'c', 'd', 'e']
  t.same(fitRows(lines, 5, 80, more), lines, 'all fit: no "more" line')
  t.same(fitRows(lines, 4, 80, more), ['a', 'b', 'c', '...and 2 more'])
  t.same(fitRows(['a', 'x'.repeat(160), 'c'], 3, 80, more), ['a', '...and 2 more'], 'a wrapped line takes its rows')
  t.same(fitRows(lines, 0, 80, more), ['...and 5 more'])
  t.same(
    fitTail(lines, 3, 80, (n) => `...${n} before`),
    ['...3 before', 'd', 'e'],
    'the end kept, what was left out said first',
  )
})

t.test(
  'a window scrolled down shows how many are above and below, and stops where the last item comes into view',
  async (t) => {
    const items = ['a', 'b', 'c', 'd', 'e', 'f']
    const o = {
      rows: 4,
      columns: 80,
      size: () => 1,
      above: (n: number) => `${n} above`,
      below: (n: number) => `${n} below`,
    }
    t.same(fitWindow(items, o), { shown: ['a', 'b', 'c'], above: null, below: '3 below', last: 3 })
    t.same(fitWindow(items, { ...o, offset: 1 }), { shown: ['b', 'c'], above: '1 above', below: '3 below', last: 3 })
    t.same(windowLines(fitWindow(items, { ...o, offset: 3 })), ['3 above', 'd', 'e', 'f'], 'the last screenful')
    t.same(fitWindow(items, { ...o, offset: 99 }), fitWindow(items, { ...o, offset: 3 }), 'never past it')
    t.same(fitWindow(['x'.repeat(400)], { ...o, size: (l: string) => rowsOf(l, 80) }).last, 0, 'an item too long')
    t.same(fitWindow([], o), { shown: [], above: null, below: null, last: 0 })
    t.same(fitWindow(['a', 'b'], o), { shown: ['a', 'b'], above: null, below: null, last: 0 }, 'all fit')
  },
)
