// Redis through ioredis. With no REDIS_URL there is no shared cache: users of the cache (the rate
// limiter) keep their state in process, and messages reach this process only, which is right for a
// single replica only.
import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'

export type Unsubscribe = () => Promise<void>

export interface Cache {
  /** null in embedded mode. */
  readonly redis: Redis | null
  ping(): Promise<void>
  /**
   * Tells every replica (every subscriber of the channel). Fire and forget: a lost message is logged.
   * Resolves to whether another process listens on the channel (as Redis counted the receivers), or
   * null when that was not learnt. `localOnly`: this process's subscribers only, for a message that
   * a later one covers (a live event, whose row a later message announces), sent while no other
   * process listens.
   */
  publish(channel: string, message: string, o?: { localOnly?: boolean }): Promise<boolean | null>
  subscribe(channel: string, handler: (message: string) => void): Promise<Unsubscribe>
  close(): Promise<void>
}

/** Messages within this process: the embedded default, and the local half of Redis pub/sub. */
function localBus() {
  const bus = new EventEmitter().setMaxListeners(0)
  return {
    publish: async (channel: string, message: string): Promise<boolean | null> => (bus.emit(channel, message), false),
    subscribe: async (channel: string, handler: (message: string) => void): Promise<Unsubscribe> => {
      bus.on(channel, handler)
      return async () => void bus.off(channel, handler)
    },
  }
}

export async function openCache(opts: { redisUrl: string; log: Logger }): Promise<Cache> {
  if (!opts.redisUrl) {
    return { redis: null, ping: async () => {}, ...localBus(), close: async () => {} }
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
  // A connection in subscriber mode can do nothing else: subscriptions get their own, opened on
  // first use and re-subscribed by ioredis after a reconnect.
  const local = localBus()
  // This process's subscribers hear its messages at once, not after a round trip through Redis:
  // messages carry their origin, and the echo of one's own is dropped.
  const origin = `${randomBytes(6).toString('hex')}\u0000`
  let subscriber: Redis | null = null
  const subscribed = new Map<string, number>()
  /** Channels Redis has confirmed this process's subscription to: it counts this process among their receivers. */
  const confirmed = new Set<string>()
  const listen = (channel: string) => {
    if (!subscriber) {
      subscriber = redis.duplicate({ enableOfflineQueue: true, lazyConnect: false, maxRetriesPerRequest: null })
      subscriber.on('error', () => {}) // the main connection logs outages
      // Reconnected, ioredis subscribes again without telling: until a channel is confirmed anew, another listener is
      // assumed (the safe side).
      subscriber.on('close', () => confirmed.clear())
      subscriber.on('message', (ch: string, message: string) => {
        if (message.startsWith(origin)) return
        const at = message.indexOf('\u0000')
        void local.publish(ch, at >= 0 && at <= 12 ? message.slice(at + 1) : message)
      })
    }
    const n = subscribed.get(channel) ?? 0
    subscribed.set(channel, n + 1)
    // Not awaited: with Redis away it waits for the reconnect, and start-up must not.
    if (n === 0)
      subscriber
        .subscribe(channel)
        .then(() => (subscribed.get(channel) ?? 0) > 0 && confirmed.add(channel))
        .catch(() => {})
  }
  return {
    redis,
    ping: async () => {
      if ((await redis.ping()) !== 'PONG') throw new Error('unexpected PING reply')
    },
    publish: async (channel, message, o) => {
      await local.publish(channel, message)
      if (o?.localOnly) return null
      try {
        const receivers = await redis.publish(channel, origin + message)
        return receivers > (confirmed.has(channel) ? 1 : 0)
      } catch (err) {
        // Subscribers of this process heard it; the others find out when their caches expire.
        opts.log.warn({ err: (err as Error).message, channel }, 'could not publish to other replicas')
        return null
      }
    },
    subscribe: async (channel, handler) => {
      const off = await local.subscribe(channel, handler)
      listen(channel)
      return async () => {
        await off()
        const n = (subscribed.get(channel) ?? 1) - 1
        if (n > 0) subscribed.set(channel, n)
        else {
          subscribed.delete(channel)
          // Counted by Redis until it has done the UNSUBSCRIBE: meanwhile another listener is assumed, the safe side.
          confirmed.delete(channel)
        }
        // Only while connected: queued for a Redis that is away, the call would wait for its return.
        if (n === 0 && subscriber?.status === 'ready') await subscriber.unsubscribe(channel).catch(() => {})
      }
    },
    close: async () => {
      subscriber?.disconnect()
      if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect())
      else redis.disconnect()
    },
  }
}
