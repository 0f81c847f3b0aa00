// Server-Sent Events read as their text arrives, for the suite's streams and the benchmarks' clients.

export interface SseMessage {
  id?: string
  event?: string
  data: string
}

/** Server-Sent Events as the text arrives: `onEvent` for each complete event with data (comments are skipped). */
export function sseParser(onEvent: (e: SseMessage) => void): (text: string) => void {
  let buffer = ''
  return (text) => {
    buffer += text
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const e: SseMessage = { data: '' }
      const data: string[] = []
      for (const line of buffer.slice(0, end).split('\n')) {
        const colon = line.indexOf(':')
        if (colon === 0) continue
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'data') data.push(value)
        else if (field === 'id' || field === 'event') e[field] = value
      }
      buffer = buffer.slice(end + 2)
      if (data.length) onEvent({ ...e, data: data.join('\n') })
    }
  }
}

/** The events of a whole stream's text, their data parsed as JSON and ids as numbers. */
export function parseSse(text: string): { id: number; event: string; data: Record<string, unknown> }[] {
  const events: { id: number; event: string; data: Record<string, unknown> }[] = []
  sseParser(
    (e) =>
      e.id !== undefined && events.push({ id: Number(e.id), event: e.event ?? 'message', data: JSON.parse(e.data) }),
  )(text)
  return events
}
