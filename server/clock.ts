// Time as the services see it. Tests pass their own clock (AppOptions.now) to move time forward
// without waiting; everything else reads Date.now.

/** Milliseconds since the epoch, like Date.now. */
export type Clock = () => number

/** A function giving the current time as a Date, read from the clock given (Date.now when none). */
export const dateClock =
  (clock?: Clock): (() => Date) =>
  () =>
    new Date((clock ?? Date.now)())
