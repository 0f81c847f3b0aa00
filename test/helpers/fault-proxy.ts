// A TCP proxy between the server and a dependency (PostgreSQL, Redis) that a test can cut and
// restore, as a failing network or a restarting database would: cut() resets every open
// connection and every new one until restore().
import { createConnection, createServer, type Socket } from 'node:net'
import type { Test } from 'tap'

export interface FaultProxy {
  readonly port: number
  /** The same URL with the proxy's address in place of the dependency's. */
  via(url: string): string
  cut(): void
  restore(): void
  /**
   * Stops passing bytes either way (connections stay open, as a stalled network or store leaves them) until release().
   */
  hold(): void
  release(): void
  /** Connections reset since the proxy started (open ones at a cut, refused ones while cut). */
  readonly resets: number
}

/**
 * `target`: host and port, or the dependency's URL (its host and port are taken). `listen`: the
 * address it listens on (loopback unless a container must reach it: the engine's bridge).
 */
export async function faultProxy(
  t: Test,
  to: { host: string; port: number } | string,
  listen = '127.0.0.1',
): Promise<FaultProxy> {
  const target = typeof to === 'string' ? { host: new URL(to).hostname, port: Number(new URL(to).port) } : to
  const pairs = new Set<[Socket, Socket]>()
  let down = false
  let held = false
  let resets = 0
  const reset = (s: Socket) => (s.destroyed ? undefined : s.resetAndDestroy())

  const server = createServer((client) => {
    if (down) {
      resets++
      reset(client)
      return
    }
    const upstream = createConnection(target)
    const pair: [Socket, Socket] = [client, upstream]
    pairs.add(pair)
    const drop = () => {
      pairs.delete(pair)
      reset(client)
      reset(upstream)
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    if (!held) link(pair)
  })
  // Held, the two sides are unpiped and paused (a pipe would resume a paused side when the other drains).
  const link = ([a, b]: [Socket, Socket]) => {
    a.pipe(b)
    b.pipe(a)
  }
  const unlink = ([a, b]: [Socket, Socket]) => {
    a.unpipe(b)
    b.unpipe(a)
    a.pause()
    b.pause()
  }
  await new Promise<void>((r) => server.listen(0, listen, r))
  const port = (server.address() as { port: number }).port
  t.teardown(() => {
    for (const [a, b] of pairs) {
      reset(a)
      reset(b)
    }
    return new Promise<void>((r) => server.close(() => r()))
  })

  return {
    port,
    via(url) {
      const u = new URL(url)
      u.hostname = listen
      u.port = String(port)
      return u.toString()
    },
    cut() {
      down = true
      for (const pair of [...pairs]) {
        resets++
        pairs.delete(pair)
        pair.forEach(reset)
      }
    },
    restore() {
      down = false
    },
    hold() {
      held = true
      pairs.forEach(unlink)
    },
    release() {
      held = false
      pairs.forEach(link)
    },
    get resets() {
      return resets
    },
  }
}
