// Table-driven checks of a function that sorts its inputs into answers (a license expression, an error code, an
// address): each answer with the inputs that must give it, one assertion an input, named by the input so that a
// failing case says which.
import type { Test } from 'tap'

export function givesEach<I, O>(
  t: Test,
  fn: (input: I) => O,
  table: Iterable<readonly [expected: O, inputs: readonly I[]]>,
  name: (input: I, expected: O) => string = (input) => String(input),
): void {
  for (const [expected, inputs] of table)
    for (const input of inputs) t.equal(fn(input), expected, name(input, expected))
}
