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

/**
 * The first of `lines` that fit in `rows` wrapped at `columns`, then `more(n)` for the n left out
 * (that line counts too); every line when all fit.
 */
export function fitRows(
  lines: readonly string[],
  rows: number,
  columns: number,
  more: (n: number) => string,
): string[] {
  const total = lines.reduce((n, l) => n + rowsOf(l, columns), 0)
  if (total <= rows) return [...lines]
  const shown: string[] = []
  let used = rowsOf(more(lines.length), columns)
  for (const line of lines) {
    if (used + rowsOf(line, columns) > rows) break
    shown.push(line)
    used += rowsOf(line, columns)
  }
  return [...shown, more(lines.length - shown.length)]
}

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
