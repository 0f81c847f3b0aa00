// The prompts' line editing does what a shell's does: Ctrl-U, Ctrl-W, Ctrl-A, Ctrl-E, Backspace
// and the arrows edit the answer; no control key is ever typed into it.
import t from 'tap'
import type { Key } from 'ink'
import { editLine, type Line } from '../../../installer/ui/line-edit.js'

const NONE: Key = {
  upArrow: false,
  downArrow: false,
  leftArrow: false,
  rightArrow: false,
  pageDown: false,
  pageUp: false,
  return: false,
  escape: false,
  ctrl: false,
  shift: false,
  tab: false,
  backspace: false,
  delete: false,
  meta: false,
}
const key = (over: Partial<Key> = {}): Key => ({ ...NONE, ...over })
const ctrl = (input: string) => [input, key({ ctrl: true })] as const
/** Ink's reading of a terminal's Backspace (DEL): delete, with no input. */
const BACKSPACE = ['', key({ delete: true })] as const

/** The line after typing `keys` one after the other into `start`. */
const after = (start: Line, ...keys: (readonly [string, Key])[]) =>
  keys.reduce((l, [input, k]) => editLine(l, input, k), start)
const at = (value: string, cursor = value.length): Line => ({ value, cursor })

t.test('Ctrl-U deletes everything before the cursor: the whole answer when the cursor is at its end', async (t) => {
  t.same(after(at('https://atrium.example.comu'), ctrl('u')), at(''))
  t.same(after(at('abc def', 4), ctrl('u')), at('def', 0), 'what is after the cursor stays, as in a shell')
  t.same(after(at(''), ctrl('u')), at(''))
})

t.test('Ctrl-W deletes the word before the cursor, and the spaces after it', async (t) => {
  t.same(after(at('postgres://db one two  '), ctrl('w')), at('postgres://db one '))
  t.same(after(at('one two'), ctrl('w'), ctrl('w')), at(''))
  t.same(after(at('one two', 3), ctrl('w')), at(' two', 0))
})

t.test('Ctrl-A and Ctrl-E go to the start and the end; typing goes in at the cursor', async (t) => {
  t.same(after(at('tlas'), ctrl('a'), ['a', key()]), at('atlas', 1))
  t.same(after(at('atla', 0), ctrl('e'), ['s', key()]), at('atlas'))
  t.same(after(at('ab'), ['', key({ leftArrow: true })], ['X', key({ shift: true })]), at('aXb', 2))
  t.same(after(at('ab', 0), ctrl('f'), ctrl('b'), ctrl('f'), ctrl('f'), ctrl('f')), at('ab'), 'never past the end')
})

t.test('Backspace deletes the character before the cursor, and nothing at the start', async (t) => {
  t.same(after(at('abc'), BACKSPACE), at('ab'))
  t.same(after(at('abc', 1), BACKSPACE), at('bc', 0))
  t.same(after(at('abc', 0), BACKSPACE), at('abc', 0))
  t.same(after(at('abc'), ['', key({ backspace: true })]), at('ab'), 'Ctrl-H, which Ink calls backspace')
  t.same(after(at('one two'), ['', key({ delete: true, meta: true })]), at('one '), 'Alt-Backspace: the word')
})

t.test('Ctrl-K deletes to the end, Ctrl-D the character under the cursor; Alt-B, Alt-F move by word', async (t) => {
  t.same(after(at('abc def', 3), ctrl('k')), at('abc'))
  t.same(after(at('abc', 1), ctrl('d')), at('ac', 1))
  t.same(after(at('one two', 7), ['b', key({ meta: true })]), at('one two', 4))
  t.same(after(at('one two', 0), ['f', key({ meta: true })]), at('one two', 3))
  t.same(after(at('one two', 7), ['', key({ ctrl: true, leftArrow: true })]), at('one two', 4), 'Ctrl-Left')
})

t.test('no other control key, nor Tab, Escape or the up and down arrows, is typed into the answer', async (t) => {
  for (const input of 'cghijlnopqrstvxyz') t.same(after(at('abc'), ctrl(input)), at('abc'), `Ctrl-${input}`)
  for (const k of [{ tab: true }, { escape: true, meta: true }, { upArrow: true }, { downArrow: true }])
    t.same(after(at('abc'), ['', key(k)]), at('abc'), JSON.stringify(k))
  t.same(after(at('abc'), ['x', key({ meta: true })]), at('abc'), 'an Alt key with no meaning here')
})

t.test('pasted text goes in whole at the cursor', async (t) => {
  t.same(after(at('ab', 1), ['XYZ', key()]), at('aXYZb', 4))
})
