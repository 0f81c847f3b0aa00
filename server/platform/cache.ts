// Redis through ioredis. With no REDIS_URL there is no shared cache: users of the cache (the rate
// limiter) keep their state in process, which is right for a single replica only.
import { Redis } from 'ioredis'
import type { Logger } from 'pino'

export interface Cache {
  /** null in embedded mode. */
  readonly redis: Redis | null
  ping(): Promise<void>
  close(): Promise<void>
}

export async function openCache(opts: { redisUrl: string; log: Logger }): Promise<Cache> {
  if (!opts.redisUrl) {
    return { redis: null, ping: async () => {}, close: async () => {} }
  }
  const redis = new Redis(opts.redisUrl, {
    lazyConnect: true,
    // Fail fast while Redis is away so callers fall back at once instead of queueing requests.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // Commands issued in the same tick share one write: under load, many requests' rate-limit
    // checks go to Redis together.
    enableAutoPipelining: true,
    connectTimeout: 5000,
    retryStrategy: (times) => Math.min(times * 200, 5000),
  })
  let warned = false
  redis.on('error', (err) => {
    if (!warned) opts.log.warn({ err: err.message }, 'redis unreachable; retrying in the background')
    warned = true
  })
  redis.on('ready', () => {
    if (warned) opts.log.info('redis connection restored')
    warned = false
  })
  try {
    await redis.connect()
  } catch (err) {
    // Start anyway: readiness reports the cache as failing, and the rate limiter falls back.
    opts.log.error({ err: (err as Error).message }, 'redis not reachable at start-up')
  }
  return {
    redis,
    ping: async () => {
      if ((await redis.ping()) !== 'PONG') throw new Error('unexpected PING reply')
    },
    close: async () => {
      if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect())
      else redis.disconnect()
    },
  }
}
