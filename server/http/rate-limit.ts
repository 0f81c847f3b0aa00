// Fixed-window rate limit shared by every replica through Redis (one Lua round trip per request).
// When Redis is unreachable the limit is enforced per replica in memory instead of failing requests
// or letting them through unlimited: availability wins, abuse stays bounded (N replicas x the limit).
// Each switch is logged and counted in atrium_rate_limit_fallback_total.
import type { FastifyReply } from 'fastify'
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { Counter, type Registry } from 'prom-client'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'
import { AppError } from './errors.js'

export interface RateLimiter {
  /** Counts one request against key; sets the X-RateLimit-* headers; throws 429 past the limit. */
  consume(key: string, reply: FastifyReply): Promise<void>
}

export interface RateLimitOptions {
  max: number
  windowSeconds: number
  redis: Redis | null
  log: Logger
  registry: Registry
  keyPrefix?: string
  /** Names this limiter in atrium_rate_limit_fallback_total{limiter}; several share one registry. */
  name?: string
}

const FALLBACK_METRIC = 'atrium_rate_limit_fallback_total'

export function createRateLimiter(o: RateLimitOptions): RateLimiter {
  const memory = new RateLimiterMemory({ points: o.max, duration: o.windowSeconds })
  const shared: RateLimiterAbstract = o.redis
    ? new RateLimiterRedis({
        storeClient: o.redis,
        points: o.max,
        duration: o.windowSeconds,
        keyPrefix: o.keyPrefix ?? 'atrium:rl',
        rejectIfRedisNotReady: true,
      })
    : memory
  const fallbacks = (o.registry.getSingleMetric(FALLBACK_METRIC) as Counter<'limiter'> | undefined) ?? new Counter({
    name: FALLBACK_METRIC,
    help: 'Requests rate-limited in process because Redis was unreachable',
    labelNames: ['limiter'],
    registers: [o.registry],
  })
  const label = { limiter: o.name ?? 'api' }
  let lastWarn = 0

  const consumeOnce = async (key: string): Promise<RateLimiterRes> => {
    try {
      return await shared.consume(key)
    } catch (res) {
      if (res instanceof RateLimiterRes || shared === memory) throw res
      fallbacks.inc(label)
      if (Date.now() - lastWarn > 60_000) {
        lastWarn = Date.now()
        o.log.warn({ err: (res as Error).message }, 'rate limit store unreachable: limiting per replica in memory')
      }
      return memory.consume(key)
    }
  }

  return {
    async consume(key, reply) {
      let res: RateLimiterRes
      let limited = false
      try {
        res = await consumeOnce(key)
      } catch (rejected) {
        if (!(rejected instanceof RateLimiterRes)) throw rejected
        res = rejected
        limited = true
      }
      const reset = Math.max(1, Math.ceil(res.msBeforeNext / 1000))
      reply.header('x-ratelimit-limit', o.max)
      reply.header('x-ratelimit-remaining', Math.max(0, res.remainingPoints))
      reply.header('x-ratelimit-reset', reset)
      if (limited) {
        throw new AppError('RATE_LIMIT_EXCEEDED', `Rate limit of ${o.max} requests per ${o.windowSeconds} s exceeded; retry in ${reset} s`,
          { limit: o.max, windowSeconds: o.windowSeconds, retryAfterSeconds: reset }, { 'retry-after': String(reset) })
      }
    },
  }
}
