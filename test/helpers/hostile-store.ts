// An S3 endpoint that turns hostile on demand, for what the server does with a store a tenant named
// (BYOS) or one that fails: 'forward' passes the bytes through to a real store (TCP, so its answers
// and signatures are the real ones); 'huge-error' says yes to every HEAD (the bucket exists) and
// answers anything else with an error whose body runs to `bytes` (written as the reader takes it,
// never held: the test process stays small);
// 'huge-object' answers with a 200 of that many bytes; 'stall-body' begins such an answer and stops
// after its first 64 KiB; 'silent' accepts and never answers.
import { createConnection, createServer, type Socket } from 'node:net'
import type { Test } from 'tap'

export type StoreMode = 'forward' | 'huge-error' | 'huge-object' | 'stall-body' | 'silent'

export interface HostileStore {
  readonly url: string
  mode: StoreMode
  /** Bytes of hostile bodies written so far (what the server took before it hung up). */
  readonly written: number
  readonly requests: number
}

export async function hostileStore(
  t: Test,
  o: { mode: StoreMode; bytes?: number; forwardTo?: string },
): Promise<HostileStore> {
  const size = o.bytes ?? 200 * 1024 * 1024
  const target = o.forwardTo ? new URL(o.forwardTo) : null
  const sockets = new Set<Socket>()
  const state = { mode: o.mode, written: 0, requests: 0 }
  const chunk = Buffer.alloc(64 * 1024, 'x')

  function answer(socket: Socket, status: number, method: string) {
    state.requests++
    const head =
      status === 200 ? '' : '<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidRequest</Code><Message>'
    // A HEAD (does the bucket or object exist?) is told yes: what follows reads bodies.
    if (method === 'HEAD') return void socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')
    socket.write(
      `HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Bad Request'}\r\nContent-Type: ${status === 200 ? 'application/octet-stream' : 'application/xml'}\r\nContent-Length: ${size}\r\n\r\n`,
    )
    if (state.mode === 'stall-body') {
      state.written += chunk.length
      return void socket.write(chunk) // and nothing more, the connection left open
    }
    socket.write(head)
    let left = size - head.length
    const pump = () => {
      while (left > 0 && !socket.destroyed) {
        const piece = left >= chunk.length ? chunk : chunk.subarray(0, left)
        left -= piece.length
        state.written += piece.length
        if (!socket.write(piece)) return void socket.once('drain', pump)
      }
    }
    pump()
  }

  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    if (state.mode === 'forward' && target) {
      const upstream = createConnection({ host: target.hostname, port: Number(target.port) })
      upstream.on('error', () => socket.destroy())
      socket.pipe(upstream).pipe(socket)
      return
    }
    let head = ''
    socket.on('data', (c: Buffer) => {
      if (state.mode === 'silent') return
      head += c.toString('latin1')
      // One answer per request head; a body the client sends is not waited for.
      while (head.includes('\r\n\r\n')) {
        const method = head.slice(0, head.indexOf(' '))
        head = head.slice(head.indexOf('\r\n\r\n') + 4)
        answer(socket, state.mode === 'huge-object' || state.mode === 'stall-body' ? 200 : 400, method)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  )
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    get mode() {
      return state.mode
    },
    /**
     * Takes effect at once: open connections (a client's pooled one) are closed, so the next request meets the new
     * mode.
     */
    set mode(m: StoreMode) {
      state.mode = m
      for (const s of sockets) s.destroy()
    },
    get written() {
      return state.written
    },
    get requests() {
      return state.requests
    },
  }
}
