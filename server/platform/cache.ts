// Redis through ioredis: one server, a Sentinel set's master or a Redis Cluster, as REDIS_URL names
// it (common/redis-topology.ts). With no REDIS_URL there is no shared cache: users of the cache (the
// rate limiter) keep their state in process, and messages reach this process only, which is right
// for a single replica only.
import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { ATTR_DB_OPERATION_NAME, ATTR_DB_SYSTEM_NAME } from '@opentelemetry/semantic-conventions'
import { Cluster, type Command } from 'ioredis'
import type { Logger } from 'pino'
import {
  mastersOf,
  parseRedisUrl,
  redisClient,
  type RedisClient,
  type RedisTopology,
} from '../../common/redis-topology.js'
import { errorCode, failSpan, type Tracing } from './tracing.js'

export type Unsubscribe = () => Promise<void>

export interface Cache {
  /** null in embedded mode. */
  readonly redis: RedisClient | null
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
  /** How many processes listen on the channel, as Redis counts them (null: no Redis). */
  listeners(channel: string): Promise<number | null>
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

export async function openCache(opts: { redisUrl: string; log: Logger; tracing?: Tracing }): Promise<Cache> {
  if (!opts.redisUrl) {
    return { redis: null, ping: async () => {}, ...localBus(), listeners: async () => null, close: async () => {} }
  }
  const topology = parseRedisUrl(opts.redisUrl)
  const redis = connect(topology)
  if (opts.tracing?.enabled) traceCommands(redis, opts.tracing)
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
  let subscriber: Subscriber | null = null
  const subscribed = new Map<string, number>()
  /** Channels Redis has confirmed this process's subscription to: it counts this process among their receivers. */
  const confirmed = new Set<string>()
  const listen = (channel: string) => {
    if (!subscriber) {
      subscriber = subscriberOf(topology)
      subscriber.client.on('error', () => {}) // the main connection logs outages
      // Reconnected, ioredis subscribes again without telling: until a channel is confirmed anew, another listener is
      // assumed (the safe side).
      const lost = () => {
        generation++
        confirmed.clear()
      }
      subscriber.client.on('close', lost)
      subscriber.client.on('-subscriber', lost)
      subscriber.client.on(subscriber.event, (ch: string, message: string) => {
        if (message.startsWith(origin)) return
        const at = message.indexOf('\u0000')
        void local.publish(ch, at >= 0 && at <= 12 ? message.slice(at + 1) : message)
      })
    }
    const n = subscribed.get(channel) ?? 0
    subscribed.set(channel, n + 1)
    if (n === 0) subscribeUntilDone(channel, 200)
  }
  let generation = 0
  /**
   * Not awaited: with Redis away it waits for the reconnect, and start-up must not. Tried again
   * while wanted: a cluster refuses SSUBSCRIBE for a slot whose subscriber is being replaced (a
   * failover), and does not remember the channel. A confirmation from before a lost connection
   * confirms nothing.
   */
  const subscribeUntilDone = (channel: string, delayMs: number) => {
    const at = generation
    subscriber!.subscribe(channel).then(
      () => at === generation && (subscribed.get(channel) ?? 0) > 0 && confirmed.add(channel),
      () => {
        if ((subscribed.get(channel) ?? 0) > 0 && subscriber)
          setTimeout(
            () => (subscribed.get(channel) ?? 0) > 0 && subscribeUntilDone(channel, Math.min(delayMs * 2, 5000)),
            delayMs,
          ).unref()
      },
    )
  }
  const sharded = redis instanceof Cluster
  return {
    redis,
    ping: async () => {
      if ((await redis.ping()) !== 'PONG') throw new Error('unexpected PING reply')
    },
    publish: async (channel, message, o) => {
      await local.publish(channel, message)
      if (o?.localOnly) return null
      try {
        // On a cluster, SPUBLISH goes to the master of the channel's slot, where the sharded
        // subscribers are: its count is every receiver's (a PUBLISH's would be its node's alone).
        const receivers = Number(
          await (sharded ? redis.spublish(channel, origin + message) : redis.publish(channel, origin + message)),
        )
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
        if (n === 0 && subscriber?.client.status === 'ready') await subscriber.unsubscribe(channel).catch(() => {})
      }
    },
    listeners: async (channel) => {
      // Sharded: only the master of the channel's slot has its subscribers, so the masters' counts add up.
      if (!sharded) return Number(((await redis.pubsub('NUMSUB', channel)) as [string, number])[1])
      const counts = await Promise.all(
        mastersOf(redis).map(async (m) => Number(((await m.pubsub('SHARDNUMSUB', channel)) as [string, number])[1])),
      )
      return counts.reduce((a, b) => a + b, 0)
    },
    close: async () => {
      subscribed.clear() // nothing is wanted any more: no subscription is tried again
      subscriber?.client.disconnect()
      if (redis.status === 'ready') await redis.quit().catch(() => {})
      // Also after QUIT: it ends the data connection only, and a Sentinel client's connections to
      // the Sentinels (its failover detector) close on disconnect alone.
      redis.disconnect()
    },
  }
}

/**
 * The shared connection. Fail fast while Redis is away (no offline queue, one retry), so callers
 * fall back at once instead of queueing requests; commands issued in the same tick share one write
 * (under load, many requests' rate-limit checks go to Redis together).
 */
function connect(topology: RedisTopology): RedisClient {
  const node = { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 5000 }
  const retryStrategy = (times: number) => Math.min(times * 200, 5000)
  return redisClient(
    topology,
    { ...node, enableAutoPipelining: true, retryStrategy },
    {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      clusterRetryStrategy: retryStrategy,
      // A master's failover takes the cluster's node timeout and an election: retried meanwhile, a
      // command waits for it rather than fail at once (then the caller's fallback answers).
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      slotsRefreshTimeout: 2000,
    },
  )
}

/**
 * Each command sent under a request's or job's span is a client span of its own: its name, never
 * its arguments (keys name tenants and credentials). With auto-pipelining a command waits for the
 * next pipeline, which is sent later (in the context of the first command of its batch): so a
 * pipelined command's span starts when it joins the pipeline, in its caller's context, and covers
 * the wait. Commands sent straight away (or a pipeline's, once sent) are taken at sendCommand.
 */
const REDIS = { [ATTR_DB_SYSTEM_NAME]: 'redis' }

function traceCommands(redis: RedisClient, tracing: Tracing) {
  const seen = new WeakSet<Command>()
  const watch = (command: Command) => {
    if (seen.has(command)) return // sent again (a pipeline's, a retry): it has its span
    seen.add(command)
    const span = tracing.child('redis', REDIS)
    if (!span) return
    const operation = command.name.toUpperCase()
    span.updateName(operation).setAttribute(ATTR_DB_OPERATION_NAME, operation)
    command.promise.then(
      () => span.end(),
      (err: unknown) => {
        failSpan(span, errorCode(err))
        span.end()
      },
    )
  }
  const send = redis.sendCommand.bind(redis) as (command: Command, ...rest: unknown[]) => unknown
  redis.sendCommand = ((command: Command, ...rest: unknown[]) => {
    watch(command)
    return send(command, ...rest)
  }) as typeof redis.sendCommand
  // ioredis's Pipeline queues a command with its own sendCommand (not in its public type).
  type Queueing = { sendCommand(command: Command): unknown }
  const pipeline = redis.pipeline.bind(redis)
  redis.pipeline = (...a) => {
    const p = pipeline(...a) as ReturnType<typeof pipeline> & Queueing
    const queue = p.sendCommand.bind(p)
    p.sendCommand = (command) => (watch(command), queue(command))
    return p
  }
}

/** A connection in subscriber mode, which can do nothing else: on a cluster, one per master (sharded pub/sub). */
interface Subscriber {
  client: RedisClient
  /** The event a message arrives by. */
  event: 'message' | 'smessage'
  subscribe(channel: string): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
}

/** Subscriptions are re-made by ioredis after a reconnect (or, on a cluster, a failover): it keeps an offline queue. */
function subscriberOf(topology: RedisTopology): Subscriber {
  const options = { enableOfflineQueue: true, lazyConnect: false, maxRetriesPerRequest: null, connectTimeout: 5000 }
  const client = redisClient(topology, options, { shardedSubscribers: true, enableOfflineQueue: true })
  if (client instanceof Cluster)
    return {
      client,
      event: 'smessage',
      subscribe: (channel) => client.ssubscribe(channel),
      unsubscribe: (channel) => client.sunsubscribe(channel),
    }
  return {
    client,
    event: 'message',
    subscribe: (channel) => client.subscribe(channel),
    unsubscribe: (channel) => client.unsubscribe(channel),
  }
}
