// Fixed-window rate limit shared by every replica (platform/counters.ts: tokens reserved from Redis
// in batches, or per replica in memory while Redis is unreachable), with the X-RateLimit-* headers
// and 429 past the limit.
import type { FastifyReply } from 'fastify'
import { limitExceeded, secondsBeforeNext } from '../domain/rate-limit.js'
import type { Counters, LimitState } from '../platform/counters.js'

export interface RateLimiter {
  /**
   * Counts one request against key; sets the X-RateLimit-* headers; throws (or rejects with) 429
   * past the limit. Decided at once when memory can (no promise: undefined), else a promise.
   */
  consume(key: string, reply: FastifyReply): Promise<void> | undefined
}

export interface RateLimitOptions {
  counters: Counters
  max: number
  windowSeconds: number
  keyPrefix: string
  /** Names this limiter in atrium_rate_limit_fallback_total{limiter}. */
  name?: string
}

export function createRateLimiter(o: RateLimitOptions): RateLimiter {
  const limit = o.counters.requestLimit({
    points: o.max,
    windowSeconds: o.windowSeconds,
    keyPrefix: o.keyPrefix,
    name: o.name ?? 'api',
  })
  const apply = (state: LimitState, reply: FastifyReply) => {
    reply.header('x-ratelimit-limit', o.max)
    reply.header('x-ratelimit-remaining', state.remainingPoints)
    reply.header('x-ratelimit-reset', secondsBeforeNext(state))
    if (!state.allowed) throw limitExceeded(state, o)
  }
  return {
    consume(key, reply) {
      const now = limit.hitNow?.(key)
      if (!now) return limit.hit(key).then((state) => apply(state, reply))
      apply(now, reply)
      return undefined
    },
  }
}
