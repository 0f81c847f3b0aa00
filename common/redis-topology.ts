// REDIS_URL names one of three Redis topologies, each through ioredis's own support for it:
//   redis://[user:password@]host:6379[/db]                      one server (rediss:// for TLS)
//   redis+sentinel://[user:password@]h1:26379,h2:26379/master[/db]   the master a Sentinel set names
//   redis+cluster://[user:password@]h1:6379,h2:6379               a Redis Cluster, from any of its nodes
// (rediss+sentinel:// and rediss+cluster:// for TLS). One URL, so that the one setting carries it
// through the installer, the env file, Compose and the chart unchanged. WHATWG URL refuses a list of
// hosts, so the forms with many are read here. The user and password are the data nodes'; a Sentinel
// set with a password of its own takes ?sentinelPassword= (and ?sentinelUsername=).
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis'

export interface HostPort {
  host: string
  port: number
}

interface Credentials {
  username?: string
  password?: string
  tls: boolean
}

export type RedisTopology =
  | ({ kind: 'single'; url: string } & Credentials)
  | ({
      kind: 'sentinel'
      sentinels: HostPort[]
      /** The master's name in the Sentinel set (sentinel monitor <name> ...). */
      name: string
      db: number
      sentinelUsername?: string
      sentinelPassword?: string
    } & Credentials)
  | ({ kind: 'cluster'; nodes: HostPort[] } & Credentials)

export const REDIS_PROTOCOLS = [
  'redis:',
  'rediss:',
  'redis+sentinel:',
  'rediss+sentinel:',
  'redis+cluster:',
  'rediss+cluster:',
] as const

const DEFAULT_PORT = { sentinel: 26379, cluster: 6379 } as const

/** `host:port`, `[v6]:port` or a bare host (the topology's default port). Errors quote nothing of it. */
function hostPort(text: string, kind: 'sentinel' | 'cluster'): HostPort {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/?#@,]+))(?::(\d{1,5}))?$/.exec(text)
  if (!m) throw new Error('is not host:port')
  const port = m[3] === undefined ? DEFAULT_PORT[kind] : Number(m[3])
  if (port < 1 || port > 65535) throw new Error(`has port ${port}, out of range (1-65535)`)
  return { host: (m[1] ?? m[2])!, port }
}

const decode = (s: string | undefined) => {
  try {
    return s ? decodeURIComponent(s) : undefined
  } catch {
    return s // a stray '%' is itself
  }
}

/**
 * What REDIS_URL names; throws an Error that says what is wrong (without the password) otherwise.
 * An empty URL is not a topology: callers treat it as "no Redis".
 */
export function parseRedisUrl(url: string): RedisTopology {
  const scheme = /^([a-z+]+):\/\//i.exec(url)?.[1]?.toLowerCase()
  if (!scheme || !(REDIS_PROTOCOLS as readonly string[]).includes(scheme + ':'))
    throw new Error(`must start with ${REDIS_PROTOCOLS.map((p) => p + '//').join(', ')}`)
  const tls = scheme.startsWith('rediss')
  if (scheme === 'redis' || scheme === 'rediss') {
    let u: URL
    try {
      u = new URL(url)
    } catch {
      throw new Error('is not a URL (redis://user:password@host:6379/0)')
    }
    if (!u.hostname) throw new Error('names no host')
    return { kind: 'single', url, tls, username: decode(u.username), password: decode(u.password) }
  }
  const kind = scheme.endsWith('sentinel') ? 'sentinel' : 'cluster'
  const rest = url.slice(scheme.length + 3)
  const q = rest.indexOf('?')
  const beforeQuery = q < 0 ? rest : rest.slice(0, q)
  // The credentials end at the last '@' (a password may hold a raw '/' or '@'); hosts hold neither.
  const at = beforeQuery.lastIndexOf('@')
  const userinfo = at >= 0 ? beforeQuery.slice(0, at) : ''
  const afterUser = at >= 0 ? beforeQuery.slice(at + 1) : beforeQuery
  const slash = afterUser.indexOf('/')
  const hostList = slash < 0 ? afterUser : afterUser.slice(0, slash)
  const path = (slash < 0 ? '' : afterUser.slice(slash + 1)).replace(/\/+$/, '')
  const colon = userinfo.indexOf(':')
  const username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon))
  const password = decode(colon < 0 ? undefined : userinfo.slice(colon + 1))
  const hosts = hostList.split(',')
  if (!hostList) throw new Error(`names no ${kind === 'sentinel' ? 'Sentinel' : 'cluster node'} (host:port,host:port)`)
  // Said by position, never quoted: a password written with a raw '?' would be in the text.
  const nodes = hosts.map((h, n) => {
    try {
      return hostPort(h, kind)
    } catch (err) {
      throw new Error(
        `host ${n + 1} of ${hosts.length} ${(err as Error).message} (write special characters in the password as %XX)`,
      )
    }
  })
  // Each parameter percent-decoded as the password is ('+' stays a plus).
  const params = new Map(
    (q < 0 ? '' : rest.slice(q + 1))
      .split('&')
      .filter(Boolean)
      .map((pair) => {
        const eq = pair.indexOf('=')
        return [
          decode(eq < 0 ? pair : pair.slice(0, eq)) ?? '',
          decode(eq < 0 ? '' : pair.slice(eq + 1)) ?? '',
        ] as const
      }),
  )
  if (kind === 'cluster') {
    if (path)
      throw new Error('a Redis Cluster has database 0 only: leave the path out (redis+cluster://h1:6379,h2:6379)')
    return { kind, nodes, tls, username, password }
  }
  const [name, db = '0', ...more] = path.split('/')
  if (!name || more.length) throw new Error("names no master: add the Sentinel set's master name (/mymaster)")
  if (!/^\d{1,2}$/.test(db)) throw new Error('has a database that is not a number (/mymaster/0)')
  return {
    kind,
    sentinels: nodes,
    name: decode(name)!,
    db: Number(db),
    tls,
    username,
    password,
    sentinelUsername: params.get('sentinelUsername') || undefined,
    sentinelPassword: params.get('sentinelPassword') || undefined,
  }
}

/** Whether a URL names a Sentinel set or a Cluster: a list of hosts, which WHATWG URL cannot read. */
export const isRedisList = (url: string | undefined): url is string => !!url && /^rediss?\+/i.test(url)

/**
 * The Sentinel set or Cluster a URL names; null for any other URL, and for one that does not parse
 * (the configuration's own check says what is wrong with it).
 */
export function redisListOf(url: string | undefined): RedisTopology | null {
  if (!isRedisList(url)) return null
  try {
    return parseRedisUrl(url)
  } catch {
    return null
  }
}

/** Why REDIS_URL is not usable, or null; for the config schema. */
export function redisUrlProblem(url: string): string | null {
  try {
    parseRedisUrl(url)
    return null
  } catch (err) {
    return (err as Error).message
  }
}

/** The hosts a topology names (the one server, the Sentinels or the cluster's seed nodes). */
export function redisHosts(t: RedisTopology): HostPort[] {
  if (t.kind === 'sentinel') return t.sentinels
  if (t.kind === 'cluster') return t.nodes
  const u = new URL(t.url)
  return [{ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) }]
}

export type RedisClient = Redis | Cluster

/**
 * A client for the topology, with `options` for every connection it makes (the data nodes, and the
 * Sentinels' own when told). A cluster's nodes get the same options; its redirections (MOVED, ASK)
 * and failovers are ioredis's, which refreshes the slot map.
 */
export function redisClient(
  t: RedisTopology,
  options: RedisOptions,
  cluster: Omit<ClusterOptions, 'redisOptions'> = {},
): RedisClient {
  const tls = t.tls ? { tls: {} } : {}
  const auth = { ...(t.username ? { username: t.username } : {}), ...(t.password ? { password: t.password } : {}) }
  if (t.kind === 'single') return new Redis(t.url, options)
  if (t.kind === 'sentinel') {
    return new Redis({
      ...options,
      ...auth,
      ...tls,
      sentinels: t.sentinels,
      name: t.name,
      db: t.db,
      ...(t.sentinelUsername ? { sentinelUsername: t.sentinelUsername } : {}),
      ...(t.sentinelPassword ? { sentinelPassword: t.sentinelPassword } : {}),
      ...(t.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
      // Told of a switch by the Sentinels' +switch-master, not only when the old master's connection drops.
      failoverDetector: true,
    })
  }
  return new Cluster(t.nodes, {
    ...cluster,
    redisOptions: { ...options, ...auth, ...tls },
    ...(t.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  })
}

/** The master nodes of a client: the cluster's masters, or the client itself. */
export const mastersOf = (client: RedisClient): Redis[] =>
  client instanceof Cluster ? client.nodes('master') : [client]
