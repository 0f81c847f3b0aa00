// Fixed-window rate limit shared by every replica (platform/counters.ts: Redis, or per replica in
// memory while Redis is unreachable), with the X-RateLimit-* headers and 429 past the limit.
import type { FastifyReply } from 'fastify'
import type { Counters, CounterState } from '../platform/counters.js'
import { AppError } from './errors.js'

export interface RateLimiter {
  /** Counts one request against key; sets the X-RateLimit-* headers; throws 429 past the limit. */
  consume(key: string, reply: FastifyReply): Promise<void>
}

export interface RateLimitOptions {
  counters: Counters
  max: number
  windowSeconds: number
  keyPrefix?: string
  /** Names this limiter in atrium_rate_limit_fallback_total{limiter}. */
  name?: string
}

export const secondsBeforeNext = (state: Pick<CounterState, 'msBeforeNext'>) => Math.max(1, Math.ceil(state.msBeforeNext / 1000))

/**
 * 429 RATE_LIMIT_EXCEEDED for a counter's state, as every limit answers: Retry-After, and the
 * limit, its window and the seconds to wait in details (with a reason when the limit is not the API's).
 */
export function limitExceeded(state: Pick<CounterState, 'msBeforeNext'>, limit: { max: number; windowSeconds: number; reason?: string }, message?: (retry: number) => string): AppError {
  const retry = secondsBeforeNext(state)
  return new AppError('RATE_LIMIT_EXCEEDED', message?.(retry) ?? `Rate limit of ${limit.max} requests per ${limit.windowSeconds} s exceeded; retry in ${retry} s`,
    { ...(limit.reason ? { reason: limit.reason } : {}), limit: limit.max, windowSeconds: limit.windowSeconds, retryAfterSeconds: retry }, { 'retry-after': String(retry) })
}

export function createRateLimiter(o: RateLimitOptions): RateLimiter {
  const counter = o.counters.counter({ points: o.max, windowSeconds: o.windowSeconds, keyPrefix: o.keyPrefix ?? 'atrium:rl', name: o.name ?? 'api' })
  return {
    async consume(key, reply) {
      const state = await counter.hit(key)
      reply.header('x-ratelimit-limit', o.max)
      reply.header('x-ratelimit-remaining', Math.max(0, state.remainingPoints))
      reply.header('x-ratelimit-reset', secondsBeforeNext(state))
      if (state.consumedPoints > o.max) throw limitExceeded(state, o)
    },
  }
}
