// Line editing for the prompts, as a shell's readline does it: Ctrl-U deletes what is before the
// cursor (the whole answer when the cursor is at its end), Ctrl-W the word before it, Ctrl-A and
// Ctrl-E go to the start and the end, Backspace deletes the character before the cursor. Pure: the
// prompt (ui/LineInput.tsx) hands it each key as Ink parses it, and draws what comes back.
import type { Key } from 'ink'

export interface Line {
  value: string
  /** Where the next character goes: 0 (before the first) to value.length (after the last). */
  cursor: number
}

const line = (value: string, cursor: number): Line => ({ value, cursor: Math.max(0, Math.min(cursor, value.length)) })

/** Where the word before the cursor starts: spaces skipped back, then the word (readline's unix-word-rubout). */
function wordBefore(value: string, cursor: number): number {
  let i = cursor
  while (i > 0 && value[i - 1] === ' ') i--
  while (i > 0 && value[i - 1] !== ' ') i--
  return i
}

/** Where the word after the cursor ends. */
function wordAfter(value: string, cursor: number): number {
  let i = cursor
  while (i < value.length && value[i] === ' ') i++
  while (i < value.length && value[i] !== ' ') i++
  return i
}

/** Deletes value[from, to) and leaves the cursor where the deleted text began. */
const cut = (l: Line, from: number, to: number): Line => line(l.value.slice(0, from) + l.value.slice(to), from)

/**
 * The line after one key. A key that edits nothing (Tab, the up and down arrows, Escape, a Ctrl key
 * with no meaning here) leaves it as it was: none of them is ever typed into the answer.
 */
export function editLine(l: Line, input: string, key: Key): Line {
  const { value, cursor } = l
  if (key.return || key.tab || key.upArrow || key.downArrow || key.pageUp || key.pageDown) return l
  // Ink reports the Backspace key of most terminals (DEL) as delete, and Ctrl-H as backspace: both
  // delete backwards, as a terminal user expects (Ink gives the Delete key the same name).
  const back = key.backspace || key.delete
  if (key.ctrl) {
    if (key.leftArrow) return line(value, wordBefore(value, cursor))
    if (key.rightArrow) return line(value, wordAfter(value, cursor))
    switch (input) {
      case 'a':
        return line(value, 0)
      case 'e':
        return line(value, value.length)
      case 'b':
        return line(value, cursor - 1)
      case 'f':
        return line(value, cursor + 1)
      case 'u':
        return cut(l, 0, cursor)
      case 'k':
        return cut(l, cursor, value.length)
      case 'w':
        return cut(l, wordBefore(value, cursor), cursor)
      case 'd':
        return cut(l, cursor, cursor + 1)
      default:
        return l
    }
  }
  if (key.meta) {
    // Alt (or Escape then the key): readline's word commands.
    if (back) return cut(l, wordBefore(value, cursor), cursor)
    if (input === 'b' || key.leftArrow) return line(value, wordBefore(value, cursor))
    if (input === 'f' || key.rightArrow) return line(value, wordAfter(value, cursor))
    if (input === 'd') return cut(l, cursor, wordAfter(value, cursor))
    return l
  }
  if (key.leftArrow) return line(value, cursor - 1)
  if (key.rightArrow) return line(value, cursor + 1)
  if (back) return cursor > 0 ? cut(l, cursor - 1, cursor) : l
  if (key.escape || !input) return l
  return line(value.slice(0, cursor) + input + value.slice(cursor), cursor + input.length)
}
