// A server that accepts connections and never answers: what a firewall that swallows packets after
// the handshake, a stuck proxy or a hung service looks like to a client.
import { createServer, type AddressInfo, type Socket } from 'node:net'
import type { Test } from 'tap'

export interface SilentServer {
  readonly port: number
  readonly url: (scheme: string) => string
  /** Connections the clients have not closed yet. */
  open(): number
  /** Resolves once every client has closed its connections (false if some are still open after `ms`). */
  allClosed(ms?: number): Promise<boolean>
}

export async function silentServer(t: Test): Promise<SilentServer> {
  const sockets = new Set<Socket>()
  const server = createServer((s) => {
    sockets.add(s)
    s.on('error', () => {})
    s.on('close', () => sockets.delete(s))
    s.resume() // read and drop whatever comes
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    return new Promise<void>((r) => server.close(() => r()))
  })
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: (scheme) => `${scheme}://127.0.0.1:${port}`,
    open: () => sockets.size,
    async allClosed(ms = 2000) {
      for (const until = Date.now() + ms; sockets.size && Date.now() < until;)
        await new Promise((r) => setTimeout(r, 20))
      return sockets.size === 0
    },
  }
}
