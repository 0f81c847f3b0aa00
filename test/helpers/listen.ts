// A test's own HTTP server on loopback: listening on a free port, and closed with its kept-alive connections when the
// test ends (server.close() alone waits for those).
import type { Server } from 'node:http'
import type { ChildProcess } from 'node:child_process'
import { connect, type AddressInfo } from 'node:net'
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

/**
 * Resolves once a process started by the test accepts connections on 127.0.0.1:`port`; rejects
 * if it exits first or is not listening within 5 s (a service of the test's own: PgBouncer, HAProxy).
 */
export async function accepting(child: ChildProcess, port: number, what: string): Promise<void> {
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)))
      s.on('error', () => resolve(false))
    })
    if (up) return
    if (child.exitCode !== null || i > 100) throw new Error(`${what} did not start (exit ${child.exitCode})`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
