// The chat stream's baseline: a bare Fastify route that, per request, calls the model provider at
// LLM_URL (OpenAI chat completions, streamed) with fetch, parses its chunks and writes each as a
// message.delta event, then message.completed. No auth, no database, no pub/sub, no job.
import { randomUUID } from 'node:crypto'
import { PassThrough } from 'node:stream'
import Fastify from 'fastify'
import { formatEvent, SSE_HEADERS } from '../server/http/sse.js'
import { sseParser } from '../test/helpers/sse.js'

const app = Fastify()
app.get('/stream', async (_req, reply) => {
  const res = await fetch(`${process.env.LLM_URL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer sk-bench-0000000000', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'Say something.' }] }),
  })
  const out = new PassThrough()
  const messageId = randomUUID()
  let id = 0
  let content = ''
  const parse = sseParser((e) => {
    if (e.data === '[DONE]') return
    const delta = (JSON.parse(e.data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content
    if (!delta) return
    content += delta
    out.write(formatEvent({ id: ++id, event: 'message.delta', data: { messageId, delta } }))
  })
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of res.body!) parse(decoder.decode(chunk, { stream: true }))
    out.end(
      formatEvent({
        id: ++id,
        event: 'message.completed',
        data: { message: { id: messageId, role: 'assistant', content, status: 'completed' } },
      }),
    )
  })().catch((err: Error) => out.destroy(err))
  return reply.headers(SSE_HEADERS).send(out)
})
const address = await app.listen({ port: 0, host: '127.0.0.1' })
process.stderr.write(`listening on ${address}\n`)
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)))
