// A chat stream followed as a browser or an SDK would: a real EventSource client (the `eventsource`
// package) that reconnects by itself with Last-Event-ID, each event noted with the connection it
// came on. For tests of streams that outlive a cut connection, a replica or a Redis failover.
import { ErrorEvent, EventSource } from 'eventsource'
import type { Test } from 'tap'

export function gate() {
  let open!: () => void
  const opened = new Promise<void>((r) => (open = r))
  return { opened, open }
}

export interface Received {
  id: number
  event: string
  data: any // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON from the API
  /** The connection it came on: 1 for the first, 2 after the first reconnect, ... */
  connection: number
}

export interface Followed {
  /** Resolves with every event received once `until` says so; rejects when the client gives up. */
  events: Promise<Received[]>
  /** Last-Event-ID of each request the client made (undefined: none sent). */
  requests: (string | undefined)[]
  /** Connection failures the client saw (it reconnects after each, unless it gave up). */
  failures: { message: string | undefined; lastId: number }[]
}

/**
 * Follows a stream with the `eventsource` client, its Authorization added by its fetch hook (the
 * client's only way to send headers); `lastEventId` is sent with the first request, as a client
 * that saw that event before would (the library sends its own on every reconnect).
 */
export function follow(
  url: string,
  apiKey: string,
  o: {
    until: (e: Received) => boolean
    onEvent?: (e: Received) => void
    onOpen?: (n: number) => void
    lastEventId?: number
  },
): Followed {
  const requests: (string | undefined)[] = []
  const failures: Followed['failures'] = []
  const received: Received[] = []
  let connection = 0
  const es = new EventSource(url, {
    fetch: (input, init) => {
      requests.push(init.headers['Last-Event-ID'])
      const lastEventId =
        init.headers['Last-Event-ID'] ?? (o.lastEventId === undefined ? undefined : String(o.lastEventId))
      return fetch(input, {
        ...init,
        headers: {
          ...init.headers,
          authorization: `Bearer ${apiKey}`,
          ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
        },
      })
    },
  })
  const events = new Promise<Received[]>((resolve, reject) => {
    es.addEventListener('open', () => o.onOpen?.(++connection))
    const onEvent = (ev: MessageEvent) => {
      const e = { id: Number(ev.lastEventId), event: ev.type, data: JSON.parse(ev.data as string), connection }
      received.push(e)
      o.onEvent?.(e)
      if (o.until(e)) {
        es.close()
        resolve(received)
      }
    }
    es.addEventListener('message.delta', onEvent)
    es.addEventListener('message.completed', onEvent)
    es.addEventListener('error', (ev) => {
      if (!(ev instanceof ErrorEvent)) return onEvent(ev as MessageEvent) // the stream's own `error` event
      failures.push({ message: ev.message, lastId: received.at(-1)?.id ?? 0 })
      if (es.readyState === es.CLOSED) reject(new Error(`the client gave up: ${ev.code ?? ''} ${ev.message ?? ''}`))
    })
  })
  events.catch(() => es.close())
  return { events, requests, failures }
}

/**
 * A followed reply came whole: each event once, in order, numbered from 1 without gaps (across
 * reconnects), its deltas the reply's text exactly, the last event message.completed.
 */
export function assertWholeReply(t: Test, events: Received[], text: string) {
  const ids = events.map((e) => e.id)
  t.same(
    ids,
    ids.map((_, i) => i + 1),
    'ids strictly increasing from 1, none repeated, none missing',
  )
  const deltas = events.filter((e) => e.event === 'message.delta')
  t.equal(deltas.map((e) => e.data.delta).join(''), text, "the deltas make up the model's text")
  t.equal(events.at(-1)?.event, 'message.completed', 'the last event completes the reply')
  return deltas
}
