// Where the server may connect when it calls out (identity providers, webhooks, BYOS checks,
// self-hosted LLMs). The address actually connected to is what is judged, so a hostname that
// resolves (or re-resolves: DNS rebinding) to a forbidden address is refused at connect time.
//
// Rules, in order:
// - never: cloud metadata endpoints, link-local, unspecified (0.0.0.0 reaches this host), multicast;
// - inside OUTBOUND_ALLOWED_NETWORKS: allowed;
// - air-gapped: nothing else; and a name outside OUTBOUND_ALLOWED_DOMAINS is refused before it is
//   looked up, so not even a DNS query for it leaves the server (test/air-gap.test.ts proves it);
// - loopback, private and reserved ranges: refused (they are reachable only by being listed);
// - public addresses: allowed.
// An IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64, 6to4...) is judged as that IPv4.
// A URL being registered (a webhook, an LLM base URL) is judged up front too, so the caller hears
// why in the API's terms (outboundHostAllowed: VALIDATION_ERROR).
import { lookup as dnsLookup } from 'node:dns/promises'
import type { LookupAddress, LookupOptions } from 'node:dns'
import http from 'node:http'
import https from 'node:https'
import { isIP } from 'node:net'
import zlib from 'node:zlib'
import ipaddr from 'ipaddr.js'
import { domainList } from '../../config/schema.js'
import { AppError, invalid } from '../domain/errors.js'

type Ip = ipaddr.IPv4 | ipaddr.IPv6
type Cidr = [Ip, number]

export type AddressClass =
  'metadata' | 'link-local' | 'unspecified' | 'multicast' | 'loopback' | 'private' | 'reserved' | 'public'

export interface OutboundPolicy {
  /** OUTBOUND_ALLOWED_NETWORKS */
  allowedCidrs: readonly string[]
  /** AIR_GAPPED: only addresses inside allowedCidrs, and only names under allowedDomains. */
  airGapped: boolean
  /** OUTBOUND_ALLOWED_DOMAINS (air-gapped only); none when absent. */
  allowedDomains?: readonly string[]
}

/** The setting an operator would change to allow a refused connection. */
export type OutboundRemedy = 'OUTBOUND_ALLOWED_NETWORKS' | 'OUTBOUND_ALLOWED_DOMAINS' | null

export type OutboundDecision =
  | { allowed: true; class: AddressClass }
  | { allowed: false; class: AddressClass; reason: string; remedy: OutboundRemedy }

/** Refused by the outbound policy; `host` is what the caller asked for, `address` what it resolved to. */
export class OutboundRefused extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
    /** What would allow it (null: nothing may). */
    readonly remedy: OutboundRemedy = null,
  ) {
    super(`outbound connection to ${host}${address && address !== host ? ` (${address})` : ''} refused: ${reason}`)
    this.name = 'OutboundRefused'
  }
}

// Instance metadata services: AWS, GCP, Azure, OpenStack (169.254.169.254), AWS over IPv6,
// Alibaba Cloud, Oracle Cloud (legacy).
const METADATA = ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200', '192.0.0.192'].map((a) => ipaddr.parse(a))
const NEVER: ReadonlySet<AddressClass> = new Set(['metadata', 'link-local', 'unspecified', 'multicast'])

/**
 * An IP address in any form a resolver or URL parser would accept: dotted, bracketed IPv6 (with a
 * zone), and the inet_aton shorthands (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376, 169.254.43518)
 * which getaddrinfo would otherwise resolve quietly. null for a hostname.
 */
export function parseIp(text: string): Ip | null {
  const host = text.trim().replace(/^\[(.*)\]$/, '$1')
  if (host.includes(':')) return ipaddr.IPv6.isValid(host) ? ipaddr.IPv6.parse(host) : null
  let canonical: string
  try {
    // The WHATWG URL parser normalizes every IPv4 shorthand to dotted decimal, as browsers do.
    canonical = new URL(`http://${host}/`).hostname
  } catch {
    return null
  }
  return isIP(canonical) === 4 ? ipaddr.IPv4.parse(canonical) : null
}

/** The IPv4 address an IPv6 one stands for, if it embeds one that a gateway would reach. */
function embeddedIPv4(a: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = a.parts
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff])
  const zeros = (from: number, to: number) => p.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && p[5] === 0xffff) return v4(p[6]!, p[7]!) // ::ffff:a.b.c.d (IPv4-mapped)
  if (zeros(0, 4) && p[4] === 0xffff && p[5] === 0) return v4(p[6]!, p[7]!) // ::ffff:0:a.b.c.d (RFC 6145)
  if (zeros(0, 6) && (p[6] !== 0 || p[7]! > 1)) return v4(p[6]!, p[7]!) // ::a.b.c.d (IPv4-compatible)
  if (p[0] === 0x64 && p[1] === 0xff9b) return v4(p[6]!, p[7]!) // NAT64 (64:ff9b::/96, 64:ff9b:1::/48)
  if (p[0] === 0x2002) return v4(p[1]!, p[2]!) // 6to4
  return null
}

export function classifyIp(a: Ip): AddressClass {
  if (a.kind() === 'ipv6') {
    const v6 = a as ipaddr.IPv6
    const v4 = embeddedIPv4(v6)
    if (v4) return classifyIp(v4)
    if (METADATA.some((m) => m.kind() === 'ipv6' && v6.match(m, 128))) return 'metadata'
  } else if (METADATA.some((m) => m.kind() === 'ipv4' && a.match(m, 32))) {
    return 'metadata'
  }
  const range: string = a.range()
  switch (range) {
    case 'unicast':
      return 'public'
    case 'unspecified':
      return 'unspecified'
    case 'linkLocal':
      return 'link-local'
    case 'multicast':
    case 'broadcast':
      return 'multicast'
    case 'loopback':
      return 'loopback'
    case 'private':
    case 'uniqueLocal':
    case 'carrierGradeNat':
    case 'deprecatedSiteLocal':
      return 'private'
    default:
      return 'reserved' // documentation, benchmarking, Teredo, 240/4...: nothing a public service lives on
  }
}

/** The class of an address given as text; null when it is not an IP address. */
export function classify(text: string): AddressClass | null {
  const a = parseIp(text)
  return a ? classifyIp(a) : null
}

/** CIDRs as ipaddr ranges; throws on a malformed entry (config/schema.ts has already refused those). */
export function parseCidrs(cidrs: readonly string[]): Cidr[] {
  return cidrs.map((c) => {
    const [addr, bits] = c.trim().split('/')
    const ip = addr === undefined ? null : parseIp(addr)
    const n = Number(bits)
    if (!ip || !/^\d{1,3}$/.test(bits ?? '') || n > (ip.kind() === 'ipv4' ? 32 : 128))
      throw new Error(`not a CIDR: ${c}`)
    return [ip, n] as Cidr
  })
}

// Only an IPv4-mapped address reaches its IPv4 address itself; NAT64, 6to4 and the like reach an
// IPv6 gateway first, so the IPv4 inside them may refuse (classifyIp) but never allow.
const within = (a: Ip, cidrs: readonly Cidr[]) => {
  const forms: Ip[] = [a]
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) forms.push((a as ipaddr.IPv6).toIPv4Address())
  return forms.some((f) => cidrs.some(([net, bits]) => net.kind() === f.kind() && f.match(net, bits)))
}

function decideParsed(a: Ip, cidrs: readonly Cidr[], airGapped: boolean): OutboundDecision {
  const cls = classifyIp(a)
  if (NEVER.has(cls))
    return { allowed: false, class: cls, reason: `${cls} addresses are never reachable`, remedy: null }
  if (within(a, cidrs)) return { allowed: true, class: cls }
  if (airGapped)
    return {
      allowed: false,
      class: cls,
      reason: 'air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable',
      remedy: 'OUTBOUND_ALLOWED_NETWORKS',
    }
  if (cls !== 'public')
    return {
      allowed: false,
      class: cls,
      reason: `${cls} address outside OUTBOUND_ALLOWED_NETWORKS`,
      remedy: 'OUTBOUND_ALLOWED_NETWORKS',
    }
  return { allowed: true, class: cls }
}

/** Whether the server may connect to `ip` (text in any form parseIp takes). */
export function decideOutbound(
  ip: string,
  allowedCidrs: readonly string[],
  opts: { airGapped: boolean },
): OutboundDecision {
  const a = parseIp(ip)
  if (!a) return { allowed: false, class: 'reserved', reason: 'not an IP address', remedy: null }
  return decideParsed(a, parseCidrs(allowedCidrs), opts.airGapped)
}

/**
 * Whether `host` is one of `domains` or a name under one (dot-bounded: evil-corp.example is not
 * under corp.example), ignoring case and a trailing dot.
 */
export function withinDomains(host: string, domains: readonly string[]): boolean {
  const name = host.toLowerCase().replace(/\.$/, '')
  return domains.some((d) => name === d || name.endsWith(`.${d}`))
}

export const isAllowedOutbound = (ip: string, allowedCidrs: readonly string[], opts: { airGapped: boolean }): boolean =>
  decideOutbound(ip, allowedCidrs, opts).allowed

/** Resolves a hostname to every address it has (getaddrinfo, so /etc/hosts counts as it does for connect). */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>
export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

/** A policy with its CIDRs parsed once, for callers that judge many connections. */
export function compilePolicy(policy: OutboundPolicy, resolver: Resolver = systemResolver) {
  const cidrs = parseCidrs(policy.allowedCidrs)
  // As the setting's parser writes them, also when a caller builds the policy itself (an empty entry would match names
  // ending in '..').
  const domains = domainList(policy.allowedDomains ?? [])
  const decide = (a: Ip) => decideParsed(a, cidrs, policy.airGapped)

  /**
   * Every address `host` resolves to, when all are allowed. One forbidden answer refuses the host:
   * the connection could land on any of them.
   */
  async function resolveAllowed(host: string): Promise<string[]> {
    const literal = parseIp(host)
    if (literal) {
      const d = decide(literal)
      if (!d.allowed) throw new OutboundRefused(host, literal.toString(), d.reason, d.remedy)
      return [literal.toString()]
    }
    // Looking a name up already tells the site's resolver (and whoever it forwards to) where the server wants to go.
    if (policy.airGapped && !withinDomains(host, domains)) {
      throw new OutboundRefused(
        host,
        '',
        'air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up',
        'OUTBOUND_ALLOWED_DOMAINS',
      )
    }
    const answers = await resolver(host)
    if (!answers.length) throw new OutboundRefused(host, '', 'the name has no addresses')
    for (const { address } of answers) {
      const a = parseIp(address)
      const d: OutboundDecision = a
        ? decide(a)
        : {
            allowed: false,
            class: 'reserved',
            reason: 'the resolver answered with something that is not an address',
            remedy: null,
          }
      if (!d.allowed) throw new OutboundRefused(host, address, d.reason, d.remedy)
    }
    return answers.map((x) => x.address)
  }

  /** A `lookup` for net/http/https: connections go only to addresses the policy allows. */
  function lookup(
    hostname: string,
    options: LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void {
    resolveAllowed(hostname).then(
      (addresses) => {
        let list = addresses.map((address) => ({ address, family: isIP(address) }))
        if (options.family === 4 || options.family === 6) list = list.filter((x) => x.family === options.family)
        if (!list.length)
          return callback(
            Object.assign(new Error(`${hostname} has no IPv${options.family} address`), { code: 'ENOTFOUND' }),
            '',
            0,
          )
        if (options.all) callback(null, list)
        else callback(null, list[0]!.address, list[0]!.family)
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    )
  }

  return { policy, decide, resolveAllowed, lookup }
}
export type CompiledPolicy = ReturnType<typeof compilePolicy>

/** The deployment's policy as its settings say (AIR_GAPPED, OUTBOUND_ALLOWED_NETWORKS, OUTBOUND_ALLOWED_DOMAINS). */
export const outboundPolicyOf = (config: {
  OUTBOUND_ALLOWED_NETWORKS: readonly string[]
  OUTBOUND_ALLOWED_DOMAINS: readonly string[]
  AIR_GAPPED: boolean
}): OutboundPolicy => ({
  allowedCidrs: config.OUTBOUND_ALLOWED_NETWORKS,
  allowedDomains: config.OUTBOUND_ALLOWED_DOMAINS,
  airGapped: config.AIR_GAPPED,
})

/** Resolver-based check of one host (a hostname or an IP literal): its allowed addresses, or OutboundRefused. */
export const checkHost = (
  host: string,
  policy: OutboundPolicy,
  resolver: Resolver = systemResolver,
): Promise<string[]> => compilePolicy(policy, resolver).resolveAllowed(host)

export interface OutboundFetchInit {
  method?: string
  headers?: Record<string, string> | Headers
  body?: string | URLSearchParams | Uint8Array | ArrayBuffer | null
  signal?: AbortSignal | null
  /**
   * Redirects are never followed (the next hop would escape the check); 'manual' is accepted for fetch compatibility.
   */
  redirect?: 'manual'
}

export interface OutboundFetchOptions {
  /** Whole exchange, connect to last byte. */
  timeoutMs?: number
  /** Larger responses fail: a hostile endpoint cannot make the server buffer without end. */
  maxResponseBytes?: number
  /** Keep the first maxResponseBytes of a larger response instead of failing (webhooks keep an excerpt). */
  truncateResponse?: boolean
  /**
   * Resolve as soon as the headers arrive, with the body as a web ReadableStream (model calls read
   * server-sent events as they come). The body is still bounded: it errors beyond maxResponseBytes
   * (or ends there, with truncateResponse), when the whole-exchange timeout passes and when the
   * caller's signal aborts; cancelling it destroys the connection. Off: the body is buffered first.
   */
  stream?: boolean
  resolver?: Resolver
}

const NO_BODY = new Set([204, 205, 304])

/**
 * A fetch for outbound calls under the policy: DNS answers are checked and pinned (the connection
 * goes to the address that was judged), IP literals judged directly, redirects never followed.
 * Failures are TypeError('fetch failed', {cause}) like fetch's own; an OutboundRefused is the cause
 * when the policy said no. Each instance has its own connection pool, so no connection opened under
 * one policy serves another.
 */
export function outboundFetch(policy: OutboundPolicy | CompiledPolicy, o: OutboundFetchOptions = {}) {
  const compiled = 'resolveAllowed' in policy ? policy : compilePolicy(policy, o.resolver)
  const timeoutMs = o.timeoutMs ?? 10_000
  const maxBytes = o.maxResponseBytes ?? 2 * 1024 * 1024
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) }

  async function fetchOutbound(input: string | URL, init: OutboundFetchInit = {}): Promise<Response> {
    const url = new URL(input)
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TypeError(`only http: and https: URLs can be fetched, not ${url.protocol}`)
    const literal = parseIp(url.hostname)
    if (literal) {
      // net.connect skips lookup for an IP literal: judge it here.
      const d = compiled.decide(literal)
      if (!d.allowed)
        throw new TypeError('fetch failed', {
          cause: new OutboundRefused(url.hostname, literal.toString(), d.reason, d.remedy),
        })
    }
    const headers = new Headers(init.headers)
    const body =
      init.body == null
        ? null
        : typeof init.body === 'string' || init.body instanceof URLSearchParams
          ? Buffer.from(String(init.body))
          : Buffer.from(init.body instanceof ArrayBuffer ? new Uint8Array(init.body) : init.body)
    if (init.body instanceof URLSearchParams && !headers.has('content-type'))
      headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8')
    if (body) headers.set('content-length', String(body.length))
    if (!headers.has('accept-encoding')) headers.set('accept-encoding', 'gzip, deflate, br')
    const method = (init.method ?? 'GET').toUpperCase()

    return new Promise<Response>((resolve, reject) => {
      // Set once a streamed response has been handed over: failures from then on end its body.
      let bodyFailed: ((err: unknown) => void) | null = null
      const fail = (err: unknown) => {
        clearTimeout(timer)
        const e = err instanceof TypeError ? err : new TypeError('fetch failed', { cause: err })
        if (bodyFailed) bodyFailed(e)
        else reject(e)
      }

      /** Hands the response over at once, its body read from `stream` as the caller pulls. */
      function streamBody(
        res: http.IncomingMessage,
        stream: NodeJS.ReadableStream & { destroyed?: boolean },
        status: number,
        headers: Headers,
      ) {
        let size = 0
        let open = true
        let ctrl!: ReadableStreamDefaultController<Uint8Array>
        const end = (err?: unknown) => {
          if (!open) return
          open = false
          clearTimeout(timer)
          try {
            if (err === undefined) ctrl.close()
            else ctrl.error(err)
          } catch {
            /* the reader has gone */
          }
        }
        const body = new ReadableStream<Uint8Array>(
          {
            start: (c) => void (ctrl = c),
            pull: () => void stream.resume(),
            cancel: () => {
              end()
              req.destroy() // the rest of the body is unwanted: the connection is not reused
            },
          },
          { highWaterMark: 0 },
        )
        bodyFailed = end
        stream.on('data', (c: Buffer) => {
          if (!open) return
          size += c.length
          if (size > maxBytes) {
            if (o.truncateResponse) {
              ctrl.enqueue(new Uint8Array(c.subarray(0, c.length - (size - maxBytes))))
              end()
            } else {
              end(new TypeError('fetch failed', { cause: new Error(`response larger than ${maxBytes} bytes`) }))
            }
            return void req.destroy()
          }
          ctrl.enqueue(new Uint8Array(c))
          // Backpressure: nothing more is read from the socket until the caller pulls.
          if ((ctrl.desiredSize ?? 1) <= 0) stream.pause()
        })
        stream.on('end', () => end())
        stream.on('error', (err) => fail(err))
        res.on('error', (err) => fail(err))
        // A connection that closes before the body ended (the server died) ends it with an error.
        res.on('close', () => {
          if (open && !res.complete)
            fail(Object.assign(new Error('the connection closed before the response ended'), { code: 'ECONNRESET' }))
        })
        try {
          resolve(new Response(body, { status, statusText: res.statusMessage ?? '', headers }))
        } catch (err) {
          bodyFailed = null
          fail(err) // a status fetch cannot represent
          req.destroy()
        }
      }
      const req = (url.protocol === 'https:' ? https : http).request(
        url,
        {
          method,
          headers: Object.fromEntries(headers),
          agent: url.protocol === 'https:' ? agents.https : agents.http,
          ...(literal ? {} : { lookup: compiled.lookup }),
        },
        (res) => {
          const encoding = String(res.headers['content-encoding'] ?? '')
            .trim()
            .toLowerCase()
          const decoder =
            encoding === 'gzip' || encoding === 'x-gzip'
              ? zlib.createGunzip()
              : encoding === 'deflate'
                ? zlib.createInflate()
                : encoding === 'br'
                  ? zlib.createBrotliDecompress()
                  : null
          const stream = decoder ? res.pipe(decoder) : res
          const status = res.statusCode ?? 502
          const empty = NO_BODY.has(status) || method === 'HEAD'
          const headersOut = () => {
            const out = new Headers()
            for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
              const name = res.rawHeaders[i]!.toLowerCase()
              // The body is handed over decoded: its original length and encoding no longer apply.
              if (decoder && (name === 'content-encoding' || name === 'content-length')) continue
              try {
                out.append(name, res.rawHeaders[i + 1]!)
              } catch {
                /* a header fetch itself would not expose */
              }
            }
            return out
          }
          if (o.stream && !empty) return streamBody(res, stream, status, headersOut())
          const chunks: Buffer[] = []
          let size = 0
          let done = false
          stream.on('data', (c: Buffer) => {
            if (done) return
            size += c.length
            if (size <= maxBytes) return void chunks.push(c)
            if (o.truncateResponse) {
              chunks.push(c.subarray(0, c.length - (size - maxBytes)))
              finish()
            } else {
              fail(new Error(`response larger than ${maxBytes} bytes`))
            }
            req.destroy()
          })
          stream.on('error', (err) => {
            if (!done) fail(err)
          })
          res.on('error', (err) => {
            if (!done) fail(err)
          })
          stream.on('end', finish)
          function finish() {
            if (done) return
            done = true
            clearTimeout(timer)
            const payload = empty ? null : Buffer.concat(chunks)
            try {
              resolve(new Response(payload, { status, statusText: res.statusMessage ?? '', headers: headersOut() }))
            } catch (err) {
              fail(err) // a status fetch cannot represent
            }
          }
        },
      )
      // Settles first, then tears down: once a response has begun, destroy(err) would raise the
      // error on the response stream instead of the request.
      const timer = setTimeout(() => {
        fail(Object.assign(new Error(`no complete response within ${timeoutMs} ms`), { code: 'ETIMEDOUT' }))
        req.destroy()
      }, timeoutMs)
      req.on('error', fail)
      const signal = init.signal
      if (signal) {
        const abort = () => {
          clearTimeout(timer)
          // As fetch does: the AbortError or TimeoutError itself, from the call or from its body.
          if (bodyFailed) bodyFailed(signal.reason)
          else reject(signal.reason)
          req.destroy()
        }
        if (signal.aborted) return abort()
        signal.addEventListener('abort', abort, { once: true })
        req.on('close', () => signal.removeEventListener('abort', abort))
      }
      req.end(body ?? undefined)
    })
  }

  return Object.assign(fetchOutbound, {
    policy: compiled,
    /** Closes idle pooled connections. */
    close() {
      agents.http.destroy()
      agents.https.destroy()
    },
  })
}
export type OutboundFetch = ReturnType<typeof outboundFetch>

/**
 * An agent for a client library that makes its own requests (the S3 client of an export's
 * destination): every connection it opens goes only where the policy allows, judged at connect
 * time through its lookup. An IP literal is judged here, as net.connect does not look one up.
 */
export async function outboundAgent(policy: CompiledPolicy, url: URL): Promise<http.Agent> {
  await policy.resolveAllowed(url.hostname)
  const options = { keepAlive: true, lookup: policy.lookup as unknown as http.AgentOptions['lookup'] }
  return url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options)
}

/** Whether an error (or one of its causes) is the policy's refusal. */
export function refusalIn(err: unknown): OutboundRefused | null {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundRefused) return e
  }
  return null
}

/**
 * VALIDATION_ERROR on `field` unless the outbound policy lets the server connect to every address
 * the URL's host has now. Judged here for a clear answer; the connection is judged again, where it
 * counts (DNS can change).
 */
export async function outboundHostAllowed(field: string, url: URL, policy: CompiledPolicy): Promise<void> {
  try {
    await policy.resolveAllowed(url.hostname)
  } catch (err) {
    if (err instanceof OutboundRefused) {
      // An address given as such is shown as it was judged (2852039166 is 169.254.169.254); the
      // address a name resolved to is not (a tenant must not map the internal network through it).
      const literal = parseIp(url.hostname) ? err.address : null
      const bare = url.hostname.replace(/^\[(.*)\]$/, '$1')
      throw new AppError(
        'VALIDATION_ERROR',
        `${field}: ${url.hostname}${literal && literal !== bare ? ` (${literal})` : ''} may not be called: ${err.reason}`,
        {
          errors: [{ field, message: `may not be called: ${err.reason}` }],
          reason: 'outbound_refused',
          ...(literal ? { address: literal } : {}),
        },
      )
    }
    if ((err as NodeJS.ErrnoException).code === 'ENOTFOUND')
      throw invalid(field, `${url.hostname} does not resolve to an address`)
    // Another resolver failure (a DNS server that did not answer) proves nothing; the connection will tell.
  }
}
