// A test's own HTTP server on loopback: listening on a free port, and closed with its kept-alive connections when the
// test ends (server.close() alone waits for those).
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

/** Starts `server` on 127.0.0.1 and returns its port; closed when the test ends. */
export async function listenLoopback(t: Test, server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return (server.address() as AddressInfo).port
}
