// Calendar days (YYYY-MM-DD, UTC) as request parameters: the one check of what a date is, and of a
// period of whole days between two of them (the usage report, the chat export).
import { invalid } from './errors.js'

export const DAY_MS = 86_400_000

/**
 * A calendar date (YYYY-MM-DD) as UTC midnight in ms; VALIDATION_ERROR on `field` unless it is one (2024-02-30 is not).
 */
export function calendarDay(field: string, text: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : NaN
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== text)
    throw invalid(field, 'must be a date as YYYY-MM-DD')
  return ms
}

/** The UTC day of a time, as YYYY-MM-DD. */
export const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** The longest period a request may cover, in days (a leap year): the usage report's and the chat export's. */
export const MAX_PERIOD_DAYS = 366

/**
 * Checks a period from the first day to the last, both included: VALIDATION_ERROR on the first's
 * field when it is after the last (rule `order`) or the period is longer than MAX_PERIOD_DAYS
 * (rule `maxDays`, with `limit`).
 */
export function checkPeriod(first: { field: string; ms: number }, last: { field: string; ms: number }): void {
  if (first.ms > last.ms) throw invalid(first.field, `must not be after ${last.field}`, { rule: 'order' })
  const days = (last.ms - first.ms) / DAY_MS + 1
  if (days > MAX_PERIOD_DAYS)
    throw invalid(first.field, `the period may cover at most ${MAX_PERIOD_DAYS} days`, {
      rule: 'maxDays',
      limit: MAX_PERIOD_DAYS,
      days,
    })
}
