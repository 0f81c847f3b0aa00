// Counters over a time window, shared by every replica through Redis (rate-limiter-flexible, one
// round trip per operation), kept per replica in memory while Redis is unreachable or when there is
// none: availability wins, and abuse stays bounded (N replicas x the limit). Keys expire with their
// window, so what a flood of made-up keys leaves behind is bounded by the window too. Each switch to
// memory is logged (at most once a minute) and counted in atrium_rate_limit_fallback_total.
import { mastersOf, type RedisClient } from '../../common/redis-topology.js'
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
  /**
   * Deletes every key that starts with `prefix`, in Redis (which it scans: an administrator's
   * action, not a request's) and in this process's memory; gives the keys it deleted. Redis being
   * unreachable is an error here, not a fallback: a deletion in memory alone would leave the keys
   * every replica counts with.
   */
  deleteStartingWith(prefix: string): Promise<string[]>
}

/** What a request limit answers: whether this request is allowed, and what the headers say. */
export interface LimitState {
  allowed: boolean
  /** Points left in the window as this replica knows them (exact with one replica). */
  remainingPoints: number
  msBeforeNext: number
}

/** A limit checked on every request: see requestLimit below for how it spares Redis. */
export interface RequestLimit {
  hit(key: string): Promise<LimitState>
  /**
   * The same as hit, answered at once when memory alone decides (a token held, or the window known
   * to be full); null when it would have to wait (a reservation from Redis). Limits without such a
   * path leave it out. Spares the hot path a promise and its microtasks per request.
   */
  hitNow?(key: string): LimitState | null
}

export interface Counters {
  counter(o: CounterOptions): WindowCounter
  /** A limit for the hot path: tokens reserved from Redis in batches (see below). */
  requestLimit(o: CounterOptions): RequestLimit
}

const FALLBACK_METRIC = 'atrium_rate_limit_fallback_total'
/** What every limit's keys start with (tests give each app a prefix of its own). */
export const RATE_LIMIT_PREFIX = 'atrium:rl'
/** Redis's glob characters, escaped so that a key's text matches only itself. */
const literalGlob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&')

export function openCounters(o: {
  redis: RedisClient | null
  log: Logger
  registry: Registry
  /**
   * How many replicas share the limits (as Redis last counted them): while Redis fails, each may
   * pass only its share of what is left of a window. Unknown: one.
   */
  replicas?: () => Promise<number | null>
}): Counters {
  const fallbacks =
    (o.registry.getSingleMetric(FALLBACK_METRIC) as Counter<'limiter'> | undefined) ??
    new Counter({
      name: FALLBACK_METRIC,
      help: 'Rate-limit and throttle operations kept in process because Redis was unreachable',
      labelNames: ['limiter'],
      registers: [o.registry],
    })
  let lastWarn = 0
  const fellBack = (name: string, err: unknown) => {
    fallbacks.inc({ limiter: name })
    if (Date.now() - lastWarn > 60_000) {
      lastWarn = Date.now()
      o.log.warn(
        { err: (err as Error).message, limiter: name },
        'rate limit store unreachable: counting per replica in memory',
      )
    }
  }

  /** The replicas as last counted, asked again at most every 5 s, by a reservation (never on a request's path). */
  let known = { replicas: 1, at: 0 }
  const replicas = () => {
    if (o.replicas && Date.now() - known.at > 5000) {
      known = { ...known, at: Date.now() }
      void o
        .replicas()
        .then((n) => n && (known = { replicas: n, at: Date.now() }))
        .catch(() => {})
    }
    return known.replicas
  }

  return {
    counter(c) {
      const options = { points: c.points, duration: c.windowSeconds, keyPrefix: c.keyPrefix }
      const memory = new RateLimiterMemory(options)
      const shared: RateLimiterAbstract = o.redis
        ? new RateLimiterRedis({ ...options, storeClient: o.redis, rejectIfRedisNotReady: true })
        : memory
      /** The operation on Redis, or in memory when Redis fails it (a limit's refusal is not a failure). */
      const run = async <T>(op: (l: RateLimiterAbstract) => Promise<T>): Promise<T> => {
        try {
          return await op(shared)
        } catch (err) {
          if (err instanceof RateLimiterRes || shared === memory) throw err
          fellBack(c.name, err)
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
        deleteStartingWith: async (prefix) => {
          const deleted = new Set(
            memory.dump().storage.flatMap((r) => (String(r.key).startsWith(prefix) ? [String(r.key)] : [])),
          )
          await Promise.all([...deleted].map((key) => memory.delete(key)))
          // Each master holds its own keys (one, but for a cluster); a key is unlinked on its own,
          // as keys of different slots cannot go in one command.
          for (const node of o.redis ? mastersOf(o.redis) : []) {
            const pattern = `${literalGlob(c.keyPrefix)}:${literalGlob(prefix)}*`
            let cursor = '0'
            do {
              const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
              await Promise.all(keys.map((key) => o.redis!.unlink(key)))
              for (const key of keys) deleted.add(key.slice(c.keyPrefix.length + 1))
              cursor = next
            } while (cursor !== '0')
          }
          return [...deleted]
        },
      }
    },
    requestLimit(c) {
      // In memory only: without Redis, and for a request whose reservation Redis failed (already
      // counted as a fallback; asking Redis again through counter() would count it twice).
      const memory = new RateLimiterMemory({ points: c.points, duration: c.windowSeconds, keyPrefix: c.keyPrefix })
      const viaMemory: RequestLimit = {
        hit: async (key) => {
          const s = await memory.consume(key).catch((err: unknown) => {
            if (err instanceof RateLimiterRes) return err
            throw err
          })
          return {
            allowed: s.consumedPoints <= c.points,
            remainingPoints: Math.max(0, s.remainingPoints),
            msBeforeNext: s.msBeforeNext,
          }
        },
      }
      return o.redis ? batchedLimit(o.redis, c, viaMemory, (err) => fellBack(c.name, err), replicas) : viaMemory
    },
  }
}

// ---- the request limit: tokens reserved in batches -------------------------------------------

/**
 * How many tokens to reserve when `left` of `points` are left in the window as last seen: a
 * sixteenth of what is left, at most 32 (or a sixty-fourth of the limit, for limits above 2,048),
 * at least one. Limits under 32 are therefore counted one by one, exactly, and so is the end of
 * every window.
 */
export const batchSize = (left: number, points: number) =>
  Math.max(1, Math.min(Math.max(32, Math.floor(points / 64)), Math.floor(left / 16)))

/**
 * The most requests a client may be refused early, in one window, when it spreads its requests
 * over `replicas` replicas: the tokens the others still hold. It is never granted more than `points`.
 * With the default limit (1,000 a minute): 31 for each replica past the first.
 */
export const batchTolerance = (points: number, replicas: number) => (replicas - 1) * (batchSize(points, points) - 1)

// Adds the batch to the key's window count and gives the count and the window's milliseconds left;
// the first reservation of a window starts it (a key without an expiry gets one, whatever made it).
const RESERVE_SCRIPT = `local n = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {n, ttl}`
const RESERVE_COMMAND = 'atriumReserveTokens'
type Reserving = RedisClient & {
  [RESERVE_COMMAND](key: string, batch: number, windowMs: number): Promise<[number, number]>
}

interface Held {
  /** Tokens this replica reserved and has not spent. */
  tokens: number
  /** The window's count in Redis after this replica's last reservation (all replicas' reservations). */
  seen: number
  /** When the window ends, by this replica's clock (never later than Redis's expiry). */
  until: number
  /** Requests passed here while Redis failed the window's reservations: added to the next one. */
  owed: number
  /** While Redis fails: what this replica may still pass of the window (its share of what was left), else null. */
  share: number | null
  reserving: Promise<void> | null
}

/**
 * A fixed-window limit shared by every replica without a Redis round trip per request. Each
 * replica reserves tokens from the window's count in Redis (INCRBY) a batch at a time and spends
 * them in memory; the batch shrinks as the window fills (batchSize), and requests that find none
 * left wait for the one reservation in flight. A reservation is granted only up to the limit, so no
 * more than `points` requests pass in a window, across all replicas. What it costs: tokens one
 * replica holds cannot be spent at another, so a client that spreads its requests may be refused
 * up to batchTolerance early. Once the count has reached the limit, the replica refuses without
 * asking Redis until the window ends. If Redis fails, the request is counted on from the window this
 * replica knows (countHere), or in memory when it knows none (viaMemory).
 */
function batchedLimit(
  client: RedisClient,
  c: CounterOptions,
  viaMemory: RequestLimit,
  fellBack: (err: unknown) => void,
  replicas: () => number,
): RequestLimit {
  // A defined command goes as EVALSHA (the script's text only when Redis has not cached it).
  if (!(RESERVE_COMMAND in client)) client.defineCommand(RESERVE_COMMAND, { numberOfKeys: 1, lua: RESERVE_SCRIPT })
  const redis = client as Reserving
  const held = new Map<string, Held>()
  const windowMs = c.windowSeconds * 1000
  let sweepAt = 0
  /** Drops the ended windows now and then, so that keys seen once do not stay. */
  const sweep = (now: number) => {
    if (now < sweepAt) return
    sweepAt = now + windowMs
    for (const [key, h] of held) if (h.until <= now && !h.reserving) held.delete(key)
  }
  const reserve = async (key: string, h: Held) => {
    const batch = batchSize(c.points - h.seen, c.points)
    const sent = Date.now()
    const owed = sent < h.until ? h.owed : 0
    const [count, ttl] = await redis[RESERVE_COMMAND](`${c.keyPrefix}:${key}`, batch + owed, windowMs)
    // Reserved before this window ended here: tokens still held are the same window's (Redis keeps
    // one key per window), else they are void.
    if (sent >= h.until) h.tokens = 0
    h.tokens += Math.max(0, Math.min(batch, c.points - (count - batch)))
    h.seen = count
    h.until = sent + ttl
    h.owed = 0
    h.share = null
    replicas() // kept current while Redis answers, for when it does not
  }
  /**
   * Redis failed a reservation (away, or a master failing over): within a window this replica
   * knows, it counts on from what it last saw there, passing its share of what was left (the
   * others do the same), so that a client stays within the limit (and one over it stays over);
   * what passes is added to the next reservation. Null: no window known.
   */
  const countHere = (h: Held, now: number): LimitState | null => {
    if (h.until <= now) return null
    // The others count on alone too: each passes its share of what was left, less what each other
    // may have reserved since this one last looked (a batch), so that together they stay within it.
    const n = replicas()
    h.share ??= Math.max(0, Math.floor((c.points - h.seen - (n - 1) * batchSize(c.points - h.seen, c.points)) / n))
    const allowed = h.seen < c.points && h.share > 0
    if (allowed) {
      h.seen++
      h.owed++
      h.share--
    }
    return { allowed, remainingPoints: Math.max(0, c.points - h.seen), msBeforeNext: h.until - now }
  }
  /** The key's held state, made on first sight and emptied when its window has ended. */
  const heldFor = (key: string, now: number): Held => {
    let h = held.get(key)
    if (!h) {
      sweep(now)
      h = { tokens: 0, seen: 0, until: 0, owed: 0, share: null, reserving: null }
      held.set(key, h)
    }
    if (h.until <= now && !h.reserving) Object.assign(h, { tokens: 0, seen: 0, owed: 0, share: null })
    return h
  }
  /** The decision when memory alone can make it (a token spent, or a full window); null: a reservation is needed. */
  const decide = (h: Held, now: number): LimitState | null => {
    if (h.tokens > 0 && h.until > now) {
      h.tokens--
      return { allowed: true, remainingPoints: Math.max(0, c.points - h.seen + h.tokens), msBeforeNext: h.until - now }
    }
    // Full, and Redis knows all that passed here: refused without asking it. (What passed while it
    // was away is owed to it first, or other replicas would go on spending it.)
    if (h.seen >= c.points && h.until > now && !h.owed)
      return { allowed: false, remainingPoints: 0, msBeforeNext: h.until - now }
    return null
  }
  return {
    hitNow: (key) => {
      const now = Date.now()
      return decide(heldFor(key, now), now)
    },
    hit: async (key) => {
      for (;;) {
        const now = Date.now()
        const h = heldFor(key, now)
        const decided = decide(h, now)
        if (decided) return decided
        if (!h.reserving) {
          const mine = (h.reserving = reserve(key, h).finally(() => (h.reserving = null)))
          try {
            await mine
          } catch (err) {
            fellBack(err)
            return countHere(h, Date.now()) ?? viaMemory.hit(key)
          }
        } else {
          // Another request's reservation: its failure is that request's to report.
          await h.reserving.catch(() => {})
        }
      }
    },
  }
}
