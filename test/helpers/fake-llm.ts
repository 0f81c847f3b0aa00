// A model provider for the suite: a node:http server on 127.0.0.1 speaking the real wire protocols
// (OpenAI chat completions, streamed and not; Anthropic Messages, streamed), so the SDK's own
// parsers run against it. Each request is answered by the next pushed turn, else by `respond`, else
// with the text 'ok'. Error bodies are the providers' own shapes; like the real services, a 401
// echoes part of the key, so tests can prove that nothing of it travels further.
import http from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Test } from 'tap'

export interface FakeTurn {
  text?: string
  /** arguments: a value is sent as its JSON; a string is sent as it is (malformed JSON, for tests) */
  toolCalls?: { name: string; arguments: unknown; id?: string }[]
  usage?: { input: number; output: number }
  status?: number
  errorCode?: string
  retryAfterSeconds?: number
  /** Never answer. */
  hang?: boolean
  chunkDelayMs?: number
  /**
   * Awaited before the text's piece number `piece` (from 0) is sent: a test holds the reply at a point of its choosing.
   */
  hold?: (piece: number) => Promise<unknown> | undefined
}

export interface FakeRequest {
  path: string
  headers: http.IncomingHttpHeaders
  body: any // eslint-disable-line @typescript-eslint/no-explicit-any -- the JSON the SDK sent
}

export interface FakeLlm {
  /** base URL ending in /v1 */
  url: string
  requests: FakeRequest[]
  push(...turns: FakeTurn[]): void
  close(): Promise<void>
}

/** The text in a few pieces, so that a client sees several deltas. */
const pieces = (text: string) => text.match(/\S+\s*|\s+/g) ?? []
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const argText = (a: unknown) => (typeof a === 'string' ? a : JSON.stringify(a))

function openAiError(status: number, code: string | undefined, key: string) {
  const c =
    code ??
    (status === 401
      ? 'invalid_api_key'
      : status === 404
        ? 'model_not_found'
        : status === 429
          ? 'rate_limit_exceeded'
          : 'server_error')
  const message =
    c === 'invalid_api_key'
      ? `Incorrect API key provided: ${key.slice(0, 3)}***${key.slice(-4)}. You can find your API key at https://platform.openai.com/account/api-keys.`
      : c === 'context_length_exceeded'
        ? "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
        : `fake error ${c}`
  const type =
    status === 401
      ? 'invalid_request_error'
      : status === 429
        ? 'requests'
        : status >= 500
          ? 'server_error'
          : 'invalid_request_error'
  return { error: { message, type, param: null, code: c } }
}

function anthropicError(status: number, code: string | undefined, key: string) {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 403
        ? 'permission_error'
        : status === 404
          ? 'not_found_error'
          : status === 429
            ? 'rate_limit_error'
            : status === 529
              ? 'overloaded_error'
              : status >= 500
                ? 'api_error'
                : 'invalid_request_error'
  const message =
    type === 'authentication_error'
      ? `invalid x-api-key ${key.slice(-4)}`
      : code === 'context_length_exceeded'
        ? 'prompt is too long: 210000 tokens > 200000 maximum'
        : `fake ${type}`
  return { type: 'error', error: { type, message } }
}

export interface FakeLlmOptions {
  respond?: (req: FakeRequest) => FakeTurn | undefined
  /** Called as each streamed text piece is written, with performance.now() (the benchmarks time deltas by it). */
  onChunk?: (text: string, at: number) => void
}

export async function fakeLlm(t: Test, o: FakeLlmOptions = {}): Promise<FakeLlm> {
  const queue: FakeTurn[] = []
  const requests: FakeRequest[] = []
  const sockets = new Set<Socket>()
  let ids = 0

  const server = http.createServer((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (raw += c))
    req.on('end', () => {
      let body: unknown = null
      try {
        body = raw ? JSON.parse(raw) : null
      } catch {
        body = raw
      }
      const request: FakeRequest = { path: req.url ?? '', headers: req.headers, body }
      requests.push(request)
      const turn = queue.shift() ?? o.respond?.(request) ?? { text: 'ok' }
      const key = String(req.headers['x-api-key'] ?? req.headers['api-key'] ?? req.headers.authorization ?? '').replace(
        /^Bearer /,
        '',
      )
      const path = (req.url ?? '').split('?')[0]!
      if (turn.hang) return // the socket stays open until the client gives up or the server closes
      const protocol = path.endsWith('/messages') ? 'anthropic' : path.endsWith('/chat/completions') ? 'openai' : null
      if (!protocol || req.method !== 'POST')
        return void res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify(openAiError(404, 'unknown_url', key)))
      if (turn.status && turn.status >= 400) {
        const headers: Record<string, string> = { 'content-type': 'application/json' }
        if (turn.retryAfterSeconds !== undefined) headers['retry-after'] = String(turn.retryAfterSeconds)
        const errBody =
          protocol === 'anthropic'
            ? anthropicError(turn.status, turn.errorCode, key)
            : openAiError(turn.status, turn.errorCode, key)
        return void res.writeHead(turn.status, headers).end(JSON.stringify(errBody))
      }
      const b = (body ?? {}) as { model?: string; stream?: boolean; stream_options?: { include_usage?: boolean } }
      const model = b.model ?? 'fake-model'
      const text = turn.text ?? (turn.toolCalls?.length ? '' : 'ok')
      const chunks = pieces(text)
      const calls = (turn.toolCalls ?? []).map((c) => ({ ...c, id: c.id ?? `call_${++ids}` }))
      const usage = turn.usage ?? { input: 10, output: Math.max(1, chunks.length + calls.length) }
      const id = `fake-${++ids}`
      void (protocol === 'anthropic' ? anthropic() : b.stream ? openAiStream() : openAiJson()).catch(() =>
        res.destroy(),
      )

      /** `piece`: the text piece this data carries, for `onChunk`. */
      async function write(data: string, piece?: string) {
        if (res.destroyed) throw new Error('client gone')
        res.write(data)
        if (piece !== undefined) o.onChunk?.(piece, performance.now())
        if (turn.chunkDelayMs) await sleep(turn.chunkDelayMs)
      }

      async function openAiStream() {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
        const chunk = (delta: unknown, finish: string | null = null) =>
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1700000000, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
        await write(chunk({ role: 'assistant', content: '' }))
        for (const [i, c] of chunks.entries()) {
          await turn.hold?.(i)
          await write(chunk({ content: c }), c)
        }
        for (const [index, call] of calls.entries()) {
          await write(
            chunk({
              tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }],
            }),
          )
          const args = argText(call.arguments)
          const half = Math.ceil(args.length / 2)
          for (const part of [args.slice(0, half), args.slice(half)])
            if (part) await write(chunk({ tool_calls: [{ index, function: { arguments: part } }] }))
        }
        await write(chunk({}, calls.length ? 'tool_calls' : 'stop'))
        if (b.stream_options?.include_usage) {
          await write(
            `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1700000000, model, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })}\n\n`,
          )
        }
        res.end('data: [DONE]\n\n')
      }

      async function openAiJson() {
        const message = {
          role: 'assistant',
          content: text || null,
          ...(calls.length
            ? {
                tool_calls: calls.map((c) => ({
                  id: c.id,
                  type: 'function',
                  function: { name: c.name, arguments: argText(c.arguments) },
                })),
              }
            : {}),
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            created: 1700000000,
            model,
            choices: [{ index: 0, message, finish_reason: calls.length ? 'tool_calls' : 'stop' }],
            usage: {
              prompt_tokens: usage.input,
              completion_tokens: usage.output,
              total_tokens: usage.input + usage.output,
            },
          }),
        )
      }

      async function anthropic() {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
        const event = (type: string, data: Record<string, unknown>, piece?: string) =>
          write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`, piece)
        await event('message_start', {
          message: {
            id,
            type: 'message',
            role: 'assistant',
            content: [],
            model,
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: usage.input, output_tokens: 1 },
          },
        })
        let index = 0
        if (chunks.length) {
          await event('content_block_start', { index, content_block: { type: 'text', text: '' } })
          for (const [i, c] of chunks.entries()) {
            await turn.hold?.(i)
            await event('content_block_delta', { index, delta: { type: 'text_delta', text: c } }, c)
          }
          await event('content_block_stop', { index })
          index++
        }
        for (const call of calls) {
          await event('content_block_start', {
            index,
            content_block: { type: 'tool_use', id: call.id, name: call.name, input: {} },
          })
          const args = argText(call.arguments)
          const half = Math.ceil(args.length / 2)
          for (const part of [args.slice(0, half), args.slice(half)])
            if (part)
              await event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: part } })
          await event('content_block_stop', { index })
          index++
        }
        await event('message_delta', {
          delta: { stop_reason: calls.length ? 'tool_use' : 'end_turn', stop_sequence: null },
          usage: { output_tokens: usage.output },
        })
        await event('message_stop', {})
        res.end()
      }
    })
  })
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  let closed = false
  const close = () =>
    new Promise<void>((resolve) => {
      if (closed) return resolve()
      closed = true
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  t.teardown(close)
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    push: (...turns) => void queue.push(...turns),
    close,
  }
}
