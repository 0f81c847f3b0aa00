// Counters over a time window, shared by every replica through Redis (rate-limiter-flexible, one
// round trip per operation), kept per replica in memory while Redis is unreachable or when there is
// none: availability wins, and abuse stays bounded (N replicas x the limit). Keys expire with their
// window, so what a flood of made-up keys leaves behind is bounded by the window too. Each switch to
// memory is logged (at most once a minute) and counted in atrium_rate_limit_fallback_total.
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { Counter, type Registry } from 'prom-client'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'

export { RateLimiterRes as CounterState }

export interface CounterOptions {
  /** How many points a key may consume per window. */
  points: number
  windowSeconds: number
  keyPrefix: string
  /** Names the counter in atrium_rate_limit_fallback_total{limiter}. */
  name: string
}

export interface WindowCounter {
  readonly points: number
  readonly windowSeconds: number
  /** Consumes points; rejects with the counter's state (a CounterState) when that goes past the limit. */
  consume(key: string, points?: number): Promise<RateLimiterRes>
  /** Consumes points and gives the state either way: past the limit when consumedPoints > points. */
  hit(key: string, points?: number): Promise<RateLimiterRes>
  /** Sets the key's points and starts its window again (a streak that a new failure prolongs). */
  set(key: string, points: number): Promise<void>
  /** The key's state without consuming; null when it has none. */
  get(key: string): Promise<RateLimiterRes | null>
  /** Refuses the key for the given seconds (consume rejects until then). */
  block(key: string, seconds: number): Promise<void>
  delete(key: string): Promise<void>
}

export interface Counters {
  counter(o: CounterOptions): WindowCounter
}

const FALLBACK_METRIC = 'atrium_rate_limit_fallback_total'

export function openCounters(o: { redis: Redis | null; log: Logger; registry: Registry }): Counters {
  const fallbacks =
    (o.registry.getSingleMetric(FALLBACK_METRIC) as Counter<'limiter'> | undefined) ??
    new Counter({
      name: FALLBACK_METRIC,
      help: 'Rate-limit and throttle operations kept in process because Redis was unreachable',
      labelNames: ['limiter'],
      registers: [o.registry],
    })
  let lastWarn = 0

  return {
    counter(c) {
      const options = { points: c.points, duration: c.windowSeconds, keyPrefix: c.keyPrefix }
      const memory = new RateLimiterMemory(options)
      const shared: RateLimiterAbstract = o.redis ? new RateLimiterRedis({ ...options, storeClient: o.redis, rejectIfRedisNotReady: true }) : memory
      /** The operation on Redis, or in memory when Redis fails it (a limit's refusal is not a failure). */
      const run = async <T>(op: (l: RateLimiterAbstract) => Promise<T>): Promise<T> => {
        try {
          return await op(shared)
        } catch (err) {
          if (err instanceof RateLimiterRes || shared === memory) throw err
          fallbacks.inc({ limiter: c.name })
          if (Date.now() - lastWarn > 60_000) {
            lastWarn = Date.now()
            o.log.warn({ err: (err as Error).message, limiter: c.name }, 'rate limit store unreachable: counting per replica in memory')
          }
          return op(memory)
        }
      }
      return {
        points: c.points,
        windowSeconds: c.windowSeconds,
        consume: (key, points = 1) => run((l) => l.consume(key, points)),
        hit: (key, points = 1) =>
          run((l) => l.consume(key, points)).catch((err: unknown) => {
            if (err instanceof RateLimiterRes) return err
            throw err
          }),
        set: async (key, points) => {
          await run((l) => l.set(key, points, c.windowSeconds))
        },
        get: (key) => run((l) => l.get(key)),
        block: async (key, seconds) => {
          await run((l) => l.block(key, seconds))
        },
        delete: async (key) => {
          await run((l) => l.delete(key))
        },
      }
    },
  }
}
