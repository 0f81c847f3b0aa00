// Graceful shutdown: readiness fails first, the listener closes, in-flight requests finish, then
// the pools close. main.ts calls this on SIGTERM; tests call it directly.
import type { FastifyInstance } from 'fastify'
import type { Platform } from './platform/index.js'

export async function drain(app: FastifyInstance, platform: Platform): Promise<void> {
  app.draining = true
  await app.close() // stops accepting, answers 503 on kept-alive sockets, waits for in-flight requests
  await platform.close()
}
