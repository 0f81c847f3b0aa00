// When a failed delivery is tried again: the Standard Webhooks schedule, with jitter so that the
// retries of many deliveries that failed together (a receiver's outage) do not arrive together,
// and no sooner than the receiver's Retry-After.

/** Seconds after each failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h. */
export const RETRY_SCHEDULE_SECONDS: readonly number[] = [5, 300, 1800, 7200, 18_000, 36_000, 50_400, 72_000, 86_400]
/** Up to this fraction of the wait is added at random. */
export const JITTER = 0.1
/** A Retry-After longer than this is read as this (a receiver cannot park a delivery for ever). */
export const MAX_RETRY_AFTER_SECONDS = 86_400

/**
 * When attempt number `attempt` (1 for the first) failed at `failedAt`: the time of the next one,
 * or null when the schedule is used up.
 */
export function nextAttemptAt(
  attempt: number,
  failedAt: number,
  opts: { schedule?: readonly number[]; retryAfterSeconds?: number | null; random?: () => number } = {},
): number | null {
  const schedule = opts.schedule ?? RETRY_SCHEDULE_SECONDS
  const wait = schedule[attempt - 1]
  if (wait === undefined) return null
  const jittered = wait * 1000 * (1 + JITTER * (opts.random ?? Math.random)())
  const asked = Math.min(opts.retryAfterSeconds ?? 0, MAX_RETRY_AFTER_SECONDS) * 1000
  return failedAt + Math.round(Math.max(jittered, asked))
}

/** Retry-After as seconds from `now`: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (!value) return null
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text)
  // An HTTP date names its day and month ("Wed, 21 Oct 2015 07:28:00 GMT"); Date.parse alone would
  // also take "-5" or "2".
  const at = /[a-z]{3}/i.test(text) ? Date.parse(text) : Number.NaN
  if (Number.isNaN(at)) return null
  return Math.max(0, Math.ceil((at - now) / 1000))
}
