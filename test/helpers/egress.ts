// A network that records what leaves it, for the zero-outbound proof (test/air-gap.test.ts): an
// internal engine network (no route out), and on the host, for traffic coming in from its bridge,
// - a DNS server that answers every query (declared names with their service's address, any other
//   name with a public-looking address, so that a connection attempt follows) and records every
//   name outside the declared ones;
// - iptables nat rules that send DNS to that server, let the declared services' ports through, and
//   redirect every other TCP connection and UDP datagram to sinks that record them (a TLS client's
//   server name, an HTTP request's Host and first line);
// - the kernel's connection table (/proc/net/nf_conntrack), polled, for every flow a container on
//   the network opened, whatever its protocol, with the destination it was addressed to.
// Nothing here leaves the machine: the redirected traffic ends at the sinks, and the engine drops
// anything else the network would forward.
import { createSocket } from 'node:dgram'
import { readFileSync } from 'node:fs'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import type { Test } from 'tap'
import { docker } from './engine.js'
import { suffix } from './platform.js'
import { runTool } from './tools.js'

export interface EgressNetwork {
  name: string
  /** The host's interface for it (br-<id>). */
  bridge: string
  /** The host's address on it: the declared services listen here. */
  gateway: string
  /** a.b.c. of its /24: containers get fixed addresses in it. */
  prefix: string
}

/** An attempt to reach something that is not a declared service. */
export type Egress =
  | { kind: 'dns'; name: string; type: string }
  | { kind: 'tcp'; from: string; serverName?: string; http?: string }
  | { kind: 'udp'; from: string; bytes: number }
  | { kind: 'flow'; protocol: string; to: string }

/** An internal network (`--internal`: the engine routes nothing out of it) with a /24 of its own. */
export async function egressNetwork(t: Test): Promise<EgressNetwork> {
  const name = `atrium-egress-${suffix()}`
  for (let attempt = 0; attempt < 20; attempt++) {
    const prefix = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}.`
    const made = await docker([
      'network',
      'create',
      '--internal',
      '--subnet',
      `${prefix}0/24`,
      '--gateway',
      `${prefix}1`,
      name,
    ])
    if (made.code !== 0) {
      if (/overlap/i.test(made.stderr)) continue
      throw new Error(`docker network create: ${made.stderr}`)
    }
    t.teardown(() => docker(['network', 'rm', name]))
    return { name, bridge: `br-${made.stdout.trim().slice(0, 12)}`, gateway: `${prefix}1`, prefix }
  }
  throw new Error('no free /24 for the test network after 20 tries')
}

export interface RecorderOptions {
  /** host:port pairs on the gateway that containers may reach (the site's services). */
  declaredPorts: number[]
  /** Names the site's DNS knows, with their addresses: looked up without being recorded. */
  declaredNames: Record<string, string>
  /** The address every other name resolves to; connections to it are redirected to the sinks. */
  elsewhere: string
}

export interface Recorder {
  /** Every attempt so far, in order, each once. */
  record(): Egress[]
  /** Forgets what was recorded (between runs). */
  clear(): void
  /** Names looked up that were declared (proof that DNS is asked at all). */
  declaredLookups(): string[]
}

const TYPES: Record<number, string> = {
  1: 'A',
  28: 'AAAA',
  5: 'CNAME',
  12: 'PTR',
  15: 'MX',
  16: 'TXT',
  33: 'SRV',
  65: 'HTTPS',
}

/** The question of a DNS query: its name, type and where the question section ends. */
function question(msg: Buffer): { name: string; type: number; end: number } | null {
  if (msg.length < 17 || msg.readUInt16BE(4) < 1) return null
  const labels: string[] = []
  let at = 12
  while (at < msg.length) {
    const len = msg[at]!
    if (len === 0) break
    if (len > 63) return null // compression or garbage: no query uses it in its question
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'))
    at += 1 + len
  }
  if (at + 5 > msg.length) return null
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(at + 1), end: at + 5 }
}

/** The answer to a query: an A record with `address` when there is one for the question's type, else none (NOERROR). */
function answer(query: Buffer, q: { type: number; end: number }, address: string | null): Buffer {
  const header = Buffer.alloc(12)
  header.writeUInt16BE(query.readUInt16BE(0), 0) // id
  header.writeUInt16BE(0x8000 | (query.readUInt16BE(2) & 0x0100) | 0x0080, 2) // response, RD as asked, RA
  header.writeUInt16BE(1, 4)
  const records: Buffer[] = []
  if (address && q.type === 1) {
    const rr = Buffer.alloc(16)
    rr.writeUInt16BE(0xc00c, 0) // the name: a pointer to the question's
    rr.writeUInt16BE(1, 2) // A
    rr.writeUInt16BE(1, 4) // IN
    rr.writeUInt32BE(5, 6) // TTL
    rr.writeUInt16BE(4, 10)
    address.split('.').forEach((o, i) => rr.writeUInt8(Number(o), 12 + i))
    records.push(rr)
  }
  header.writeUInt16BE(records.length, 6)
  return Buffer.concat([header, query.subarray(12, q.end), ...records])
}

/** The server name of a TLS ClientHello, or the first line and Host of an HTTP request. */
function describe(first: Buffer): { serverName?: string; http?: string } {
  if (first[0] === 0x16 && first.length > 43) {
    try {
      let at = 43 // record header 5, handshake header 4, version 2, random 32
      at += 1 + first[at]! // session id
      at += 2 + first.readUInt16BE(at) // cipher suites
      at += 1 + first[at]! // compression methods
      const end = Math.min(first.length, at + 2 + first.readUInt16BE(at))
      at += 2
      while (at + 4 <= end) {
        const type = first.readUInt16BE(at)
        const len = first.readUInt16BE(at + 2)
        if (type === 0) return { serverName: first.subarray(at + 9, at + 4 + len).toString('latin1') }
        at += 4 + len
      }
    } catch {
      /* a truncated hello: recorded without its name */
    }
    return {}
  }
  const text = first.toString('latin1')
  const line = text.split('\r\n')[0] ?? ''
  if (!/^[A-Z]+ \S+ HTTP\/1\.[01]$/.test(line)) return {}
  const host = /^host:\s*(\S+)/im.exec(text)?.[1]
  return { http: `${line}${host ? ` (Host: ${host})` : ''}` }
}

interface Flow {
  protocol: string
  src: string
  dst: string
  sport?: string
  dport?: string
}

/** The original direction of every flow in the kernel's connection table. */
function flows(): Flow[] {
  let text: string
  try {
    text = readFileSync('/proc/net/nf_conntrack', 'utf8')
  } catch {
    return []
  }
  const out: Flow[] = []
  for (const line of text.split('\n')) {
    const protocol = line.split(/\s+/)[2]
    const field = (k: string) => new RegExp(`\\b${k}=(\\S+)`).exec(line)?.[1]
    const src = field('src')
    const dst = field('dst')
    if (!protocol || !src || !dst) continue
    out.push({ protocol, src, dst, sport: field('sport'), dport: field('dport') })
  }
  return out
}
const flowKey = (f: Flow) => `${f.protocol} ${f.src}:${f.sport ?? ''} ${f.dst}:${f.dport ?? ''}`

const listening = (server: Server, host: string) =>
  new Promise<number>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port))
  })

/** Why this machine cannot record a network's traffic, or null. */
export async function recorderUnavailable(): Promise<string | null> {
  const r = await runTool('iptables', ['-t', 'nat', '-S', 'PREROUTING'])
  if (r.code !== 0)
    return `iptables cannot read the nat table here (${r.stderr.trim() || `exit ${r.code}`}); the recorder needs root and iptables`
  try {
    readFileSync('/proc/net/nf_conntrack', 'utf8')
  } catch (err) {
    return `the kernel's connection table cannot be read (${(err as NodeJS.ErrnoException).code})`
  }
  return null
}

/** Starts recording what containers on `net` try to reach. Removed at the end of the test. */
export async function egressRecorder(t: Test, net: EgressNetwork, o: RecorderOptions): Promise<Recorder> {
  const seen = new Set<string>()
  let record: Egress[] = []
  const declaredLookups: string[] = []
  const note = (e: Egress) => {
    const key = JSON.stringify(e)
    if (seen.has(key)) return
    seen.add(key)
    record.push(e)
  }
  const declared = new Map(Object.entries(o.declaredNames).map(([k, v]) => [k.toLowerCase(), v]))
  const resolve = (query: Buffer): Buffer | null => {
    const q = question(query)
    if (!q) return null
    const known = declared.get(q.name)
    if (known) declaredLookups.push(q.name)
    else note({ kind: 'dns', name: q.name, type: TYPES[q.type] ?? String(q.type) })
    return answer(query, q, known ?? o.elsewhere)
  }

  // DNS over UDP and TCP (a resolver retries over TCP when an answer is truncated).
  const dnsUdp = createSocket('udp4')
  dnsUdp.on('error', () => {}) // a reply the container no longer waits for
  dnsUdp.on('message', (msg, from) => {
    const reply = resolve(msg)
    if (reply) dnsUdp.send(reply, from.port, from.address)
  })
  await new Promise<void>((r) => dnsUdp.bind(0, net.gateway, r))
  const dnsTcp = createServer((s) => {
    let buf = Buffer.alloc(0)
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const reply = resolve(buf.subarray(2, 2 + buf.readUInt16BE(0)))
        buf = buf.subarray(2 + buf.readUInt16BE(0))
        if (reply) s.write(Buffer.concat([Buffer.from([reply.length >> 8, reply.length & 0xff]), reply]))
      }
    }).on('error', () => {})
  })
  // Every other TCP connection: what it is, then closed.
  const sockets = new Set<Socket>()
  const tcpSink = createServer((s) => {
    sockets.add(s)
    const from = `${s.remoteAddress}:${s.remotePort}`
    const done = (first?: Buffer) => {
      note({ kind: 'tcp', from, ...(first ? describe(first) : {}) })
      s.destroy()
    }
    const timer = setTimeout(() => done(), 2000)
    s.once('data', (c: Buffer) => {
      clearTimeout(timer)
      done(c)
    })
    s.on('error', () => {}).on('close', () => {
      clearTimeout(timer)
      sockets.delete(s)
    })
  })
  const udpSink = createSocket('udp4')
  udpSink.on('error', () => {})
  udpSink.on('message', (msg, from) => note({ kind: 'udp', from: `${from.address}:${from.port}`, bytes: msg.length }))
  await new Promise<void>((r) => udpSink.bind(0, net.gateway, r))
  const [dnsTcpPort, tcpSinkPort] = [await listening(dnsTcp, net.gateway), await listening(tcpSink, net.gateway)]
  t.teardown(async () => {
    for (const s of sockets) s.destroy()
    await Promise.all([new Promise((r) => dnsTcp.close(r)), new Promise((r) => tcpSink.close(r))])
    dnsUdp.close()
    udpSink.close()
  })

  // The rules, in a chain of their own that the bridge's traffic enters first.
  const chain = `ATRIUM-EGRESS-${suffix().slice(0, 8)}`
  const ipt = async (...args: string[]) => {
    const r = await runTool('iptables', ['-w', '5', '-t', 'nat', ...args])
    if (r.code !== 0) throw new Error(`iptables -t nat ${args.join(' ')}: ${r.stderr}`)
  }
  await ipt('-N', chain)
  // runTool resolves with the exit code (never rejects), so every step runs whatever the others did.
  t.teardown(async () => {
    await runTool('iptables', ['-w', '5', '-t', 'nat', '-D', 'PREROUTING', '-i', net.bridge, '-j', chain])
    await runTool('iptables', ['-w', '5', '-t', 'nat', '-F', chain])
    await runTool('iptables', ['-w', '5', '-t', 'nat', '-X', chain])
  })
  await ipt(
    '-A',
    chain,
    '-p',
    'udp',
    '--dport',
    '53',
    '-j',
    'REDIRECT',
    '--to-ports',
    String((dnsUdp.address() as AddressInfo).port),
  )
  await ipt('-A', chain, '-p', 'tcp', '--dport', '53', '-j', 'REDIRECT', '--to-ports', String(dnsTcpPort))
  for (const port of o.declaredPorts)
    await ipt('-A', chain, '-p', 'tcp', '-d', net.gateway, '--dport', String(port), '-j', 'RETURN')
  await ipt('-A', chain, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', String(tcpSinkPort))
  await ipt('-A', chain, '-p', 'udp', '-j', 'REDIRECT', '--to-ports', String((udpSink.address() as AddressInfo).port))
  await ipt('-I', 'PREROUTING', '1', '-i', net.bridge, '-j', chain)

  // Flows from the network's containers (not the host's own address on it), new since now.
  const before = new Set(flows().map(flowKey))
  const allowed = new Set(o.declaredPorts.map((p) => `tcp ${net.gateway}:${p}`))
  const poll = () => {
    for (const f of flows()) {
      if (!f.src.startsWith(net.prefix) || f.src === net.gateway || before.has(flowKey(f))) continue
      if (f.dst === net.gateway && f.dport === '53') continue // DNS: judged by the names asked
      if (allowed.has(`${f.protocol} ${f.dst}:${f.dport}`)) continue
      note({ kind: 'flow', protocol: f.protocol, to: f.dport ? `${f.dst}:${f.dport}` : f.dst })
    }
  }
  const timer = setInterval(poll, 200)
  t.teardown(() => clearInterval(timer))

  return {
    record: () => {
      poll()
      return [...record]
    },
    clear: () => {
      poll()
      for (const f of flows()) before.add(flowKey(f))
      record = []
      seen.clear()
      declaredLookups.length = 0
    },
    declaredLookups: () => [...new Set(declaredLookups)],
  }
}
