// Server-Sent Events over fetch, as an async iterator that reconnects. Every event of Atrium's
// streams has an id; after a drop the iterator reconnects with Last-Event-ID and the server sends
// exactly the events after it, so the caller sees each event once, in order, however often the
// connection breaks. Works wherever fetch streams a body (Node 18+, browsers).
import { AtriumError, AtriumNetworkError } from './errors.js'

export interface StreamEvent<T = unknown> {
  id: string
  event: string
  data: T
}

export interface StreamOptions {
  /** Resume after this event id (one the caller already holds). */
  lastEventId?: string
  /** Reconnect attempts in a row without an event between them (default 5). */
  maxReconnects?: number
  /** Stop: the iterator ends (a fetch in flight is aborted). */
  signal?: AbortSignal
  /** Called before each reconnect, with the id it resumes after (progress output, tests). */
  onReconnect?: (lastEventId: string | undefined, attempt: number) => void
}

/** One parsed event of the wire format (https://html.spec.whatwg.org/multipage/server-sent-events.html). */
interface Parsed {
  id: string | undefined
  event: string
  data: string
}

async function* parse(body: ReadableStream<Uint8Array>): AsyncGenerator<Parsed | { retry: number }> {
  const decoder = new TextDecoder()
  let buffer = ''
  let id: string | undefined
  let event = ''
  let data: string[] = []
  const reader = body.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      buffer += decoder.decode(value, { stream: true })
      let nl: number
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + (buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? 2 : 1))
        if (line === '') {
          if (data.length) yield { id, event: event || 'message', data: data.join('\n') }
          event = ''
          data = []
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'data') data.push(value)
        else if (field === 'event') event = value
        else if (field === 'id' && !value.includes('\0')) id = value
        else if (field === 'retry' && /^\d+$/.test(value)) yield { retry: Number(value) }
      }
    }
  } finally {
    reader.releaseLock()
    await body.cancel().catch(() => {})
  }
}

const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true })
  })

/**
 * The events of a stream that `open` opens (with the id to resume after), until `isLast` says an
 * event ends it, the server ends it cleanly after such an event, or the signal stops it. A drop
 * reconnects after the server's `retry:` (1 s by default); an error answer (404, 403, a 429 whose
 * wait is too long) ends the iterator with its AtriumError.
 */
export async function* eventStream<T>(
  open: (lastEventId: string | undefined, signal: AbortSignal) => Promise<Response>,
  isLast: (e: StreamEvent<T>) => boolean,
  o: StreamOptions = {},
): AsyncGenerator<StreamEvent<T>> {
  let lastEventId = o.lastEventId
  let retryMs = 1000
  let failures = 0
  const max = o.maxReconnects ?? 5
  const stop = new AbortController()
  o.signal?.addEventListener('abort', () => stop.abort(), { once: true })
  try {
    for (;;) {
      if (stop.signal.aborted) return
      let res: Response | null = null
      let reason = 'closed by the server'
      try {
        res = await open(lastEventId, stop.signal)
      } catch (err) {
        if (stop.signal.aborted) return
        if (err instanceof AtriumError) throw err
        if (!(err instanceof AtriumNetworkError) || ++failures > max) throw err
      }
      if (res?.body) {
        try {
          for await (const p of parse(res.body)) {
            if ('retry' in p) {
              retryMs = p.retry
              continue
            }
            if (p.id !== undefined) lastEventId = p.id
            failures = 0
            let data: unknown = p.data
            try {
              data = JSON.parse(p.data)
            } catch {
              // not JSON: the text as it came
            }
            const e = { id: p.id ?? '', event: p.event, data: data as T }
            yield e
            if (isLast(e)) return
          }
        } catch (err) {
          if (stop.signal.aborted) return
          reason = (err as Error).message
        }
      }
      if (stop.signal.aborted) return
      // A connection that ended before the stream's last event: a drop, whether clean or not.
      if (res && ++failures > max)
        throw new AtriumNetworkError(`the stream ended ${failures} times in a row without an event: ${reason}`)
      o.onReconnect?.(lastEventId, failures)
      await pause(retryMs, stop.signal)
    }
  } finally {
    stop.abort()
  }
}
