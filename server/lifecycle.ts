// Graceful shutdown: readiness fails first, open connections are answered and closed one by one,
// then the listener closes, in-flight requests finish, and the pools close. main.ts calls this on
// SIGTERM; tests call it directly.
import type { Server } from 'node:net'
import type { FastifyInstance } from 'fastify'
import type { Platform } from './platform/index.js'

/**
 * `windowMs`: how long the server keeps answering on the connections clients hold open before it
 * closes them. Each answer while draining closes its connection (app.ts), so a client's pooled
 * sockets end as it uses them; closing an idle kept-alive socket at once instead races with the
 * client sending its next request on it, which fails ("other side closed": 2 of 3,036 requests
 * during a rolling upgrade under load, test/charts/cluster.test.ts). The listener stays open as long
 * as connections are (at most the window): a load balancer still using one gets answers, not
 * refusals. A long poll held open (agents' execute) keeps the window to its end.
 */
export async function drain(app: FastifyInstance, platform: Platform, windowMs = 0): Promise<void> {
  app.draining = true
  await connectionsEnded(app.server, windowMs)
  await app.close() // stops accepting, answers 503 on kept-alive sockets, waits for in-flight requests
  await platform.close()
}

/** Until the server has no open connection, or `ms` passed. */
async function connectionsEnded(server: Server, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    const open = await new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)))
    if (open === 0) return
    await new Promise((r) => setTimeout(r, 50))
  }
}
