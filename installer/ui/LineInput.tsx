// The prompts' text field: the answer with its cursor, edited as a shell line is (ui/line-edit.ts).
// Enter submits; a secret is drawn as its mask, one character for each typed.
import React, { useRef, useState } from 'react'
import { Text, useInput, useStdout } from 'ink'
import { editLine, type Line } from './line-edit.js'

export interface LineInputProps {
  value: string
  onChange: (value: string) => void
  onSubmit: (value: string) => void
  /** Drawn in place of each character (a secret). */
  mask?: string
}

export function LineInput({ value, onChange, onSubmit, mask }: LineInputProps) {
  // The line as the last key left it: keys that come faster than the screen is drawn (a terminal
  // hands typed text over in pieces) each edit what the one before made, not the last drawn value.
  const line = useRef<Line>({ value, cursor: value.length })
  // The value changed from outside (the answer cut at a pasted line end): the cursor stays within it.
  if (line.current.value !== value) line.current = { value, cursor: Math.min(line.current.cursor, value.length) }
  const [, redraw] = useState(0)
  const { stdout } = useStdout()
  useInput((input, key) => {
    if (key.return) return onSubmit(line.current.value)
    const before = line.current
    line.current = editLine(before, input, key)
    redraw((n) => n + 1)
    if (line.current.value !== before.value) onChange(line.current.value)
  })
  const { cursor } = line.current
  const shown = mask ? mask.repeat(value.length) : value
  // One string, the cursor in reverse video on a terminal: Ink measures a text by its string, and a
  // part that starts empty and then grows inside nested texts is drawn at the width it had.
  const [on, off] = stdout.isTTY ? ['\u001B[7m', '\u001B[27m'] : ['', '']
  return <Text>{`${shown.slice(0, cursor)}${on}${shown[cursor] ?? ' '}${off}${shown.slice(cursor + 1)}`}</Text>
}
