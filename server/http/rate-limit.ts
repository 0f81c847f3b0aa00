// Fixed-window rate limit shared by every replica (platform/counters.ts: Redis, or per replica in
// memory while Redis is unreachable), with the X-RateLimit-* headers and 429 past the limit.
import type { FastifyReply } from 'fastify'
import { CounterState, type Counters } from '../platform/counters.js'
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

/** 429 RATE_LIMIT_EXCEEDED for a counter's state: the details and Retry-After every limit answers with. */
export function limitExceeded(state: Pick<CounterState, 'msBeforeNext'>, limit: { max: number; windowSeconds: number }, message?: string): AppError {
  const retry = Math.max(1, Math.ceil(state.msBeforeNext / 1000))
  return new AppError('RATE_LIMIT_EXCEEDED', message ?? `Rate limit of ${limit.max} requests per ${limit.windowSeconds} s exceeded; retry in ${retry} s`,
    { limit: limit.max, windowSeconds: limit.windowSeconds, retryAfterSeconds: retry }, { 'retry-after': String(retry) })
}

export function createRateLimiter(o: RateLimitOptions): RateLimiter {
  const counter = o.counters.counter({ points: o.max, windowSeconds: o.windowSeconds, keyPrefix: o.keyPrefix ?? 'atrium:rl', name: o.name ?? 'api' })
  return {
    async consume(key, reply) {
      let state: CounterState
      let limited = false
      try {
        state = await counter.consume(key)
      } catch (rejected) {
        if (!(rejected instanceof CounterState)) throw rejected
        state = rejected
        limited = true
      }
      reply.header('x-ratelimit-limit', o.max)
      reply.header('x-ratelimit-remaining', Math.max(0, state.remainingPoints))
      reply.header('x-ratelimit-reset', Math.max(1, Math.ceil(state.msBeforeNext / 1000)))
      if (limited) throw limitExceeded(state, o)
    },
  }
}
