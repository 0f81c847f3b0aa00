// Screens that fit the terminal (80x24 unless it says otherwise): a list longer than the rows left
// shows what fits and says how many more, and where to see them all.

/** The rows one line takes as Ink wraps it: at spaces, a word wider than the row cut where it must. */
function lineRows(line: string, columns: number): number {
  if (line.length <= columns) return 1
  let rows = 1
  let width = 0
  for (const word of line.split(' ')) {
    let w = word.length
    const need = width === 0 ? w : width + 1 + w
    if (need <= columns) {
      width = need
      continue
    }
    if (width > 0) {
      rows++
      width = 0
    }
    while (w > columns) {
      rows++
      w -= columns
    }
    width = w
  }
  return rows
}

/** How many terminal rows a text takes when wrapped at `columns`. */
export const rowsOf = (text: string, columns: number): number =>
  text.split('\n').reduce((n, line) => n + lineRows(line, Math.max(1, columns)), 0)

/** A window on a list: the items from `offset` on that fit, and the lines that say what is above and below it. */
export interface Window<T> {
  shown: T[]
  /** Before the items: how many are above them; null when none is. */
  above: string | null
  /** After the items: how many more are below them; null when none is. */
  below: string | null
  /** The greatest offset worth scrolling to: from it on, every item left fits. */
  last: number
}

/**
 * The items from `offset` on that fit in `rows` (each taking `size(item)` rows), with a line before
 * them (`above(n)`) when `offset` leaves n out and one after them (`below(n)`) when n do not fit;
 * those lines take their rows too. An offset past the end shows the last item.
 */
export function fitWindow<T>(
  items: readonly T[],
  o: {
    rows: number
    columns: number
    size: (item: T) => number
    below: (n: number) => string
    above?: (n: number) => string
    offset?: number
  },
): Window<T> {
  // The last screenful: as many items from the end as fit under the line that says how many are above them.
  let last = items.length
  let tail = o.above ? rowsOf(o.above(items.length), o.columns) : 0
  while (last > 0 && tail + o.size(items[last - 1]!) <= o.rows) tail += o.size(items[--last]!)
  // An item too long for the screen on its own is still a place to scroll to.
  last = Math.max(0, Math.min(last, items.length - 1))
  const offset = Math.max(0, Math.min(o.offset ?? 0, last))
  const above = offset > 0 && o.above ? o.above(offset) : null
  const rest = items.slice(offset)
  const budget = o.rows - (above ? rowsOf(above, o.columns) : 0)
  if (rest.reduce((n, item) => n + o.size(item), 0) <= budget) return { shown: rest, above, below: null, last }
  const shown: T[] = []
  let used = rowsOf(o.below(rest.length), o.columns)
  for (const item of rest) {
    if (used + o.size(item) > budget) break
    shown.push(item)
    used += o.size(item)
  }
  return { shown, above, below: o.below(rest.length - shown.length), last }
}

/** The lines of a window, in order. */
export const windowLines = (w: Window<string>): string[] => [
  ...(w.above ? [w.above] : []),
  ...w.shown,
  ...(w.below ? [w.below] : []),
]

/** What a scrolled list says about what it does not show: the keys that show it. */
export const SCROLL = {
  above: (n: number) => `  ...${n} above: the up arrow shows them`,
  below: (n: number) => `  ...and ${n} more: the down arrow shows them`,
}

/**
 * The first of `lines` that fit in `rows` wrapped at `columns`, then `more(n)` for the n left out
 * (that line counts too); every line when all fit.
 */
export const fitRows = (
  lines: readonly string[],
  rows: number,
  columns: number,
  more: (n: number) => string,
): string[] => windowLines(fitWindow(lines, { rows, columns, size: (l) => rowsOf(l, columns), below: more }))

/**
 * The last of `lines` that fit (a failed command's output ends with its cause), after `before(n)` for the n left out.
 */
export function fitTail(
  lines: readonly string[],
  rows: number,
  columns: number,
  before: (n: number) => string,
): string[] {
  return fitRows([...lines].reverse(), rows, columns, before).reverse()
}
