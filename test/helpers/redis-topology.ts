// Redis topologies of a test's own, made of this machine's redis-server on loopback ports: a Redis
// Cluster (three masters, each with a replica) and a Sentinel set (a master, a replica, three
// Sentinels). Each process is the test's child, killed when the test ends; `kill` stops a master
// the way a crash does (SIGKILL), and `failedOver` waits for the topology to name another.
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { tempDir } from './platform.js'
import { findTool, runTool } from './tools.js'

/** tap's skip option: false when redis-server and redis-cli are here, else why not. */
export function topologySkip(): false | string {
  for (const tool of ['redis-server', 'redis-cli'])
    if (!findTool(tool))
      return `needs ${tool} (apt-get install redis-server): the test runs a cluster and a Sentinel set`
  return false
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
  })

/**
 * `n` loopback ports free now, each with port+10000 free too (a cluster node's bus port), in a
 * random range below 55000 so that parallel test files rarely meet.
 */
async function freePorts(n: number): Promise<number[]> {
  for (;;) {
    const base = 20000 + Math.floor(Math.random() * 3500) * 10
    const ports = Array.from({ length: n }, (_, i) => base + i)
    const free = await Promise.all(ports.flatMap((p) => [portFree(p), portFree(p + 10000)]))
    if (free.every(Boolean)) return ports
  }
}

interface Node {
  port: number
  child: ChildProcess
}

/**
 * Starts redis-server with `args` (its configuration on the command line, after the file `conf`
 * when given: it must come first) and waits until it answers PING.
 */
async function redisServer(t: Test, dir: string, port: number, args: string[], conf?: string): Promise<Node> {
  const argv = [...(conf ? [conf] : []), '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...args]
  const child = spawn('redis-server', argv, { stdio: 'ignore' })
  t.teardown(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')))
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  client.on('error', () => {})
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`redis-server on ${port} exited (${child.exitCode})`)
      if (
        await client.connect().then(
          () => client.ping(),
          () => null,
        )
      )
        break
      if (i > 100) throw new Error(`redis-server on ${port} did not answer`)
      await sleep(50)
    }
  } finally {
    client.disconnect()
  }
  return { port, child }
}

/** One command to one server, by redis-cli; its output. */
async function cli(port: number, args: string[]): Promise<string> {
  const r = await runTool('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])
  if (r.code !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${r.stderr || r.stdout}`)
  return r.stdout
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const got = await probe().catch(() => null)
    if (got) return got
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(50)
  }
}

export interface Topology {
  /** REDIS_URL for Atrium. */
  url: string
  /** The port of the master that holds `key` (a cluster: of its slot; Sentinel: the one master). */
  masterOf(key: string): Promise<number>
  /** Kills the master on `port` as a crash would (SIGKILL). */
  kill(port: number): void
  /** Resolves when the topology serves again without `port`: a replica promoted in its place. */
  failedOver(port: number): Promise<number>
}

/** Node timeout and Sentinel's down-after: a dead master is noticed after this. */
export const DOWN_AFTER_MS = 1000

/** Three masters with a replica each, made by redis-cli --cluster create. */
export async function redisCluster(t: Test): Promise<Topology> {
  const dir = tempDir(t, 'atrium-redis-cluster-')
  const ports = await freePorts(6)
  const nodes = await Promise.all(
    ports.map((port) =>
      redisServer(t, dir, port, [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        String(DOWN_AFTER_MS),
        '--save',
        '',
        '--appendonly',
        'no',
      ]),
    ),
  )
  await runTool('redis-cli', [
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '1',
    '--cluster-yes',
  ]).then((r) => {
    if (r.code !== 0) throw new Error(`redis-cli --cluster create: ${r.stdout}${r.stderr}`)
  })
  // Every node agrees the cluster is up and knows its replicas.
  await until('the cluster up', 30_000, async () => {
    for (const p of ports) if (!(await cli(p, ['cluster', 'info'])).includes('cluster_state:ok')) return false
    // CLUSTER NODES: id, address, flags (myself,master ...), ...
    const flags = (await cli(ports[0]!, ['cluster', 'nodes'])).split('\n').map((l) => l.split(' ')[2]?.split(',') ?? [])
    return (
      flags.filter((f) => f.includes('master')).length === 3 && flags.filter((f) => f.includes('slave')).length === 3
    )
  })
  const byPort = new Map(nodes.map((n) => [n.port, n]))
  const alive = () => ports.filter((p) => byPort.get(p)!.child.exitCode === null && !byPort.get(p)!.child.signalCode)
  const masterOfSlot = async (slot: number): Promise<number | null> => {
    for (const p of alive()) {
      const slots = JSON.parse(await cli(p, ['--json', 'cluster', 'slots']).catch(() => 'null')) as
        [number, number, [string, number, string]][] | null
      const range = slots?.find(([from, to]) => slot >= from && slot <= to)
      if (range) return range[2][1]
    }
    return null
  }
  return {
    url: `redis+cluster://${ports
      .slice(0, 3)
      .map((p) => `127.0.0.1:${p}`)
      .join(',')}`,
    masterOf: async (key) => (await masterOfSlot(Number(await cli(ports[0]!, ['cluster', 'keyslot', key]))))!,
    kill: (port) => void byPort.get(port)!.child.kill('SIGKILL'),
    failedOver: async (port) => {
      // A slot the dead master held, served by another node that every live node agrees on.
      const slots = await until('a slot of the killed master', 5000, async () => {
        for (const p of alive()) {
          const line = (await cli(p, ['cluster', 'nodes'])).split('\n').find((l) => l.includes(`:${port}@`))
          const held = line
            ?.split(' ')
            .slice(8)
            .find((s) => /^\d/.test(s))
          if (held) return held
        }
        return null
      })
      const slot = Number(slots.split('-')[0])
      return until('a replica promoted', 30_000, async () => {
        for (const p of alive()) if (!(await cli(p, ['cluster', 'info'])).includes('cluster_state:ok')) return null
        const now = await masterOfSlot(slot)
        return now && now !== port ? now : null
      })
    },
  }
}

/** A master, its replica and three Sentinels (quorum two), the master named `atrium`. */
export async function redisSentinel(t: Test): Promise<Topology> {
  const dir = tempDir(t, 'atrium-redis-sentinel-')
  const [masterPort, replicaPort, ...sentinelPorts] = (await freePorts(5)) as [number, number, ...number[]]
  const data = ['--save', '', '--appendonly', 'no']
  const nodes = new Map<number, Node>()
  nodes.set(masterPort, await redisServer(t, dir, masterPort, data))
  nodes.set(
    replicaPort,
    await redisServer(t, dir, replicaPort, [...data, '--replicaof', '127.0.0.1', String(masterPort)]),
  )
  await until('the replica in sync', 15_000, async () =>
    (await cli(replicaPort, ['info', 'replication'])).includes('master_link_status:up'),
  )
  for (const port of sentinelPorts) {
    // Sentinel rewrites its configuration file: one each, writable.
    const conf = join(dir, `sentinel-${port}.conf`)
    writeFileSync(
      conf,
      [
        `sentinel monitor atrium 127.0.0.1 ${masterPort} 2`,
        `sentinel down-after-milliseconds atrium ${DOWN_AFTER_MS}`,
        'sentinel failover-timeout atrium 10000',
        'sentinel parallel-syncs atrium 1',
        '',
      ].join('\n'),
    )
    await redisServer(t, dir, port, ['--sentinel'], conf)
  }
  const masterNow = async () => {
    for (const p of sentinelPorts) {
      const [host, port] = (await cli(p, ['sentinel', 'get-master-addr-by-name', 'atrium']).catch(() => '')).split('\n')
      if (host && port) return Number(port)
    }
    return null
  }
  // Every Sentinel knows the replica and the other Sentinels before a failover can be agreed on.
  await until('the Sentinels ready', 30_000, async () => {
    for (const p of sentinelPorts) {
      // redis-cli prints the reply's fields and values on lines of their own, in turn.
      const lines = (await cli(p, ['sentinel', 'master', 'atrium'])).trim().split('\n')
      const field = (name: string) => Number(lines[lines.indexOf(name) + 1] ?? -1)
      if (field('num-slaves') < 1 || field('num-other-sentinels') < sentinelPorts.length - 1) return false
    }
    return true
  })
  return {
    url: `redis+sentinel://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/atrium`,
    masterOf: async () => (await masterNow())!,
    kill: (port) => void nodes.get(port)!.child.kill('SIGKILL'),
    failedOver: (port) =>
      until('the Sentinels promoting the replica', 30_000, async () => {
        const now = await masterNow()
        if (!now || now === port) return null
        return (await cli(now, ['info', 'replication'])).includes('role:master') ? now : null
      }),
  }
}
