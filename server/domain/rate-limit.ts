// How every limit answers once it is past: 429 RATE_LIMIT_EXCEEDED with Retry-After, whether it is
// the API's general limit (http/rate-limit.ts), the sign-in guard or password throttling.
import { AppError } from './errors.js'

/** What a limit's counter says of when its window ends (platform/counters.ts CounterState). */
export interface WindowState {
  msBeforeNext: number
}

export const secondsBeforeNext = (state: WindowState) => Math.max(1, Math.ceil(state.msBeforeNext / 1000))

/**
 * 429 RATE_LIMIT_EXCEEDED for a counter's state, as every limit answers: Retry-After, and the
 * limit, its window and the seconds to wait in details (with a reason when the limit is not the API's).
 */
export function limitExceeded(
  state: WindowState,
  limit: { max: number; windowSeconds: number; reason?: string },
  message?: (retry: number) => string,
): AppError {
  const retry = secondsBeforeNext(state)
  return new AppError(
    'RATE_LIMIT_EXCEEDED',
    message?.(retry) ??
      `Rate limit of ${limit.max} requests per ${limit.windowSeconds} s exceeded; retry in ${retry} s`,
    {
      ...(limit.reason ? { reason: limit.reason } : {}),
      limit: limit.max,
      windowSeconds: limit.windowSeconds,
      retryAfterSeconds: retry,
    },
    { 'retry-after': String(retry) },
  )
}
