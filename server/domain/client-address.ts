// The key a limit counts a client address under. One IPv6 host commonly holds a whole /64 (2^64
// addresses) and can pick a new one per request, so IPv6 addresses count by their /64; an
// IPv4-mapped IPv6 address (::ffff:192.0.2.1, as a dual-stack socket reports IPv4 clients) counts as
// the IPv4 address it is.
import ipaddr from 'ipaddr.js'

export function addressKey(ip: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  try {
    parsed = ipaddr.parse(ip)
  } catch {
    return ip // not an address (a unix socket's peer, a test's label): itself
  }
  if (parsed.kind() === 'ipv4') return parsed.toString()
  const v6 = parsed as ipaddr.IPv6
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString()
  return `${v6.parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`
}
