// Preloaded into a child process (node --import) to watch its network: every connection attempt
// and every name lookup is appended to OUTBOUND_LOG, and any destination that is not loopback is
// refused before a packet leaves, as an air-gapped site's firewall would.
import dns from 'node:dns'
import { appendFileSync } from 'node:fs'
import net from 'node:net'

const log = process.env.OUTBOUND_LOG
const note = (kind, target) => {
  if (log) appendFileSync(log, `${kind} ${target}\n`)
}
const loopback = (host) => host === 'localhost' || /^127\./.test(host) || host === '::1' || host === '::ffff:127.0.0.1'
// Binding to every interface (the port check) looks up 0.0.0.0; that is not a destination.
const local = (host) => loopback(host) || host === '0.0.0.0' || host === '::'

const connect = net.Socket.prototype.connect
net.Socket.prototype.connect = function (...args) {
  // net.connect hands over its arguments already normalized, as [options, callback].
  const first = Array.isArray(args[0]) ? args[0][0] : args[0]
  const o = typeof first === 'object' && first !== null ? first : { port: first, host: args[1] }
  if (o.path) return connect.apply(this, args) // a Unix socket never leaves the machine
  const host = o.host ?? 'localhost'
  note('connect', `${host}:${o.port}`)
  if (!loopback(host)) {
    process.nextTick(() =>
      this.destroy(Object.assign(new Error(`outbound connection to ${host} refused`), { code: 'ECONNREFUSED' })),
    )
    return this
  }
  return connect.apply(this, args)
}

const lookup = dns.lookup
dns.lookup = function (hostname, ...rest) {
  if (!local(hostname)) note('lookup', hostname)
  return lookup.call(this, hostname, ...rest)
}
const promiseLookup = dns.promises.lookup
dns.promises.lookup = function (hostname, ...rest) {
  if (!local(hostname)) note('lookup', hostname)
  return promiseLookup.call(this, hostname, ...rest)
}
