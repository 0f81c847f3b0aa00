// Chat streams (GET /api/v1/chat/sessions/:id/stream) on the real server (PostgreSQL, Redis)
// against the suite's fake provider on loopback, which notes when it writes each text piece. Every
// piece of every reply is a marker of its own ("r12w7 "), so the client knows when the provider
// wrote each piece it reads; both times are performance.now() in this process (the server is a
// child process).
// - Added latency per delta: one session alone, then STREAMS at once, each with its client sending
//   messages one after the other (see `clients`); replies of PIECES pieces CHUNK_DELAY_MS apart. A
//   piece's latency is when the client read the delta holding it less when the provider wrote it
//   (a delta holding several pieces counts each). The same against the baseline, bench/chat-bare.ts:
//   a bare Fastify route that calls the provider itself and writes each chunk as an event. First
//   delta: from the request that starts a reply (Atrium: POST .../messages, its stream already
//   open; the baseline: its GET) to the reply's first delta, the provider's first CHUNK_DELAY_MS
//   included.
// - MANY concurrent streams on one replica: MANY sessions followed at once, then a message posted
//   to each (POSTS_AT_ONCE at a time); from the first post until every reply has arrived complete
//   (its deltas add up to the completed message), and the server's peak RSS.
// The server's environment beyond run.ts's: AGENT_RUNS_PER_REPLICA=1000 (replies generated at once)
// and RATE_LIMIT_MAX=1000000 (the one bench API key makes some 3,100 requests within the minute).
import { Agent, request } from 'node:http'
import { availableParallelism, loadavg } from 'node:os'
import type { Test } from 'tap'
import { fakeLlm } from '../test/helpers/fake-llm.js'
import { apiCaller, createTenant, peakRssMb, pool, printTable, quantile, start, stop, useFakeLlm } from './lib.js'
import { sseParser, type SseMessage } from '../test/helpers/sse.js'

const STREAMS = Number(process.env.BENCH_CHAT_STREAMS ?? 20)
const ROUNDS = Number(process.env.BENCH_CHAT_ROUNDS ?? 5)
const WARM_UP = 2
const PIECES = 80
const CHUNK_DELAY_MS = Number(process.env.BENCH_CHAT_DELAY_MS ?? 5)
const MANY = Number(process.env.BENCH_CHAT_MANY ?? 1000)
const POSTS_AT_ONCE = 100
const TIMEOUT_MS = 180_000
const BAR_P99_MS = 5
const BAR_RSS_MB = 1024

export interface ChatFigures {
  p50: number
  p99: number
  firstP50: number
  firstP99: number
  /** Pieces read, and delta events they came in. */
  pieces: number
  deltas: number
}

export interface ChatBench {
  /** One stream alone, then STREAMS at once. */
  latency: { streams: number; bare: ChatFigures; atrium: ChatFigures }[]
  /** The 1-minute load average when the latency runs ended: other work on the machine skews them. */
  loadAverage: number
  many: { streams: number; seconds: number; peakRssMb: number }
}

/** Rejects with `what` unless `p` settles within TIMEOUT_MS. */
async function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>(
    (_, reject) =>
      (timer = setTimeout(() => reject(new Error(`${what}: not done within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS)),
  )
  try {
    return await Promise.race([p, late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * One SSE response followed: `onEvent` with the time its bytes were read; `opened` at the first byte, `ended` when it
 * ends.
 */
function follow(
  url: string,
  headers: Record<string, string>,
  agent: Agent,
  onEvent: (e: SseMessage, at: number) => void,
) {
  let opened!: () => void
  let ended!: () => void
  let failed!: (err: Error) => void
  const opening = new Promise<void>((resolve, reject) => ((opened = resolve), (failed = reject)))
  const ending = new Promise<void>((resolve, reject) => ((ended = resolve), opening.catch(reject)))
  ending.catch(() => {}) // awaited by some callers only
  const req = request(url, { agent, headers }, (res) => {
    if (res.statusCode !== 200)
      return void res.resume().on('end', () => failed(new Error(`GET ${url}: ${res.statusCode}`)))
    res.setEncoding('utf8')
    let at = 0
    const parse = sseParser((e) => onEvent(e, at))
    res.on('data', (text: string) => {
      at = performance.now()
      opened()
      parse(text)
    })
    res.on('end', ended)
  })
  req.on('error', failed)
  req.end()
  return { opened: opening, ended: ending, close: () => req.destroy() }
}

/** A reply as its client read it: each piece's latency, when its first delta came, and in how many deltas. */
interface ReplySeen {
  latencies: number[]
  firstMs: number
  deltas: number
}

/** The replies the clients are reading, by message id. */
function tracker(sentAt: Map<string, number>) {
  interface Reading extends ReplySeen {
    text: string
    firstAt: number
    done: Promise<string>
    settle: { resolve: (content: string) => void; reject: (err: Error) => void }
  }
  const reading = new Map<string, Reading>()
  const entry = (id: string) => {
    let r = reading.get(id)
    if (!r) {
      let settle!: Reading['settle']
      const done = new Promise<string>((resolve, reject) => (settle = { resolve, reject }))
      done.catch(() => {}) // awaited by `completed`; failing before that is no crash
      reading.set(id, (r = { text: '', firstAt: 0, latencies: [], firstMs: 0, deltas: 0, done, settle }))
    }
    return r
  }
  return {
    onEvent(e: SseMessage, at: number) {
      const data = JSON.parse(e.data) as {
        messageId: string
        delta: string
        message: { id: string; content: string }
        code: string
      }
      if (e.event === 'message.delta') {
        const r = entry(data.messageId)
        if (!r.text) r.firstAt = at
        r.text += data.delta
        r.deltas++
        for (const marker of data.delta.split(' ')) {
          if (!marker) continue
          r.latencies.push(at - sentAt.get(marker)!)
          sentAt.delete(marker)
        }
      } else if (e.event === 'message.completed') entry(data.message.id).settle.resolve(data.message.content)
      else if (e.event === 'error')
        entry(data.messageId).settle.reject(new Error(`reply ${data.messageId}: ${data.code}`))
    },
    /** Reply `id`, started at `startedAt`, once completed and checked whole. */
    async completed(id: string, startedAt: number): Promise<ReplySeen> {
      const r = entry(id)
      const content = await r.done
      reading.delete(id)
      if (r.text !== content || content.split(' ').length !== PIECES + 1)
        throw new Error(`reply ${id} arrived incomplete: ${JSON.stringify(r.text.slice(0, 80))}`)
      return { latencies: r.latencies, firstMs: r.firstAt - startedAt, deltas: r.deltas }
    },
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * `n` clients, each sending WARM_UP + ROUNDS + 1 messages one after the other (the `i`th's by
 * `reply(i)`), their first spread over one reply's time, so that about `n` replies stream at any
 * moment rather than all starting at once. The figures of the ROUNDS in the middle.
 */
async function clients(n: number, reply: (i: number) => Promise<ReplySeen>): Promise<ChatFigures> {
  const measured: ReplySeen[] = []
  const client = async (i: number) => {
    await sleep((i * PIECES * CHUNK_DELAY_MS) / n)
    for (let k = 0; k < WARM_UP + ROUNDS + 1; k++) {
      const seen = await reply(i)
      if (k >= WARM_UP && k < WARM_UP + ROUNDS) measured.push(seen)
    }
  }
  await within(Promise.all(Array.from({ length: n }, (_, i) => client(i))), `${n} streams`)
  const latencies = measured.flatMap((m) => m.latencies)
  const firsts = measured.map((m) => m.firstMs)
  return {
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    firstP50: quantile(firsts, 0.5),
    firstP99: quantile(firsts, 0.99),
    pieces: latencies.length,
    deltas: measured.reduce((sum, m) => sum + m.deltas, 0),
  }
}

export async function benchChat(env: Record<string, string>): Promise<ChatBench> {
  const sentAt = new Map<string, number>()
  let replies = 0
  const teardowns: (() => unknown)[] = []
  const llm = await fakeLlm({ teardown: (fn: () => unknown) => teardowns.push(fn) } as unknown as Test, {
    respond: () => {
      const r = ++replies
      return { text: Array.from({ length: PIECES }, (_, i) => `r${r}w${i} `).join(''), chunkDelayMs: CHUNK_DELAY_MS }
    },
    onChunk: (text, at) => sentAt.set(text.trim(), at),
  })
  const agent = new Agent({ keepAlive: true })
  const streams: ReturnType<typeof follow>[] = []
  try {
    // The baseline.
    const bareServer = await start('bench/chat-bare.ts', { LLM_URL: llm.url })
    const bare: ChatFigures[] = []
    const bareSeen = tracker(sentAt)
    try {
      for (const n of [1, STREAMS]) {
        bare.push(
          await clients(n, async () => {
            const startedAt = performance.now()
            let id = ''
            const s = follow(`${bareServer.base}/stream`, {}, agent, (e, at) => {
              id ||= (JSON.parse(e.data) as { messageId: string }).messageId
              bareSeen.onEvent(e, at)
            })
            await s.ended
            return bareSeen.completed(id, startedAt)
          }),
        )
      }
    } finally {
      await stop(bareServer)
    }

    // Atrium.
    const server = await start('server/main.ts', { ...env, AGENT_RUNS_PER_REPLICA: '1000', RATE_LIMIT_MAX: '1000000' })
    try {
      const { apiKey } = await createTenant(env, ['--plan', 'enterprise'])
      const call = apiCaller(server.base, apiKey)
      await useFakeLlm(call, llm.url)
      const seen = tracker(sentAt)
      const sessions: string[] = []
      const open = async (n: number) => {
        const from = sessions.length
        await pool(
          n,
          16,
          async () => void sessions.push((await call('POST', '/api/v1/chat/sessions', { title: 'bench' })).id),
        )
        const opened = sessions
          .slice(from)
          .map((id) =>
            follow(
              `${server.base}/api/v1/chat/sessions/${id}/stream`,
              { authorization: `Bearer ${apiKey}` },
              agent,
              seen.onEvent,
            ),
          )
        streams.push(...opened)
        await within(Promise.all(opened.map((s) => s.opened)), `opening ${n} streams`)
        return sessions.slice(from)
      }
      const post = async (sessionId: string) => {
        const startedAt = performance.now()
        const { replyId } = await call<{ replyId: string }>('POST', `/api/v1/chat/sessions/${sessionId}/messages`, {
          content: 'Say something.',
        })
        return { replyId, startedAt }
      }

      const few = await open(STREAMS)
      const latency = []
      for (const [k, n] of [1, STREAMS].entries()) {
        const atrium = await clients(n, async (i) => {
          const { replyId, startedAt } = await post(few[i]!)
          return seen.completed(replyId, startedAt)
        })
        latency.push({ streams: n, bare: bare[k]!, atrium })
      }

      const loadAverage = loadavg()[0]!

      // MANY streams at once; the ones above are closed first.
      for (const s of streams.splice(0)) s.close()
      const many = await open(MANY)
      const done: Promise<ReplySeen>[] = []
      const t0 = performance.now()
      await pool(MANY, POSTS_AT_ONCE, async (i) => {
        const { replyId, startedAt } = await post(many[i]!)
        done.push(seen.completed(replyId, startedAt))
      })
      await within(Promise.all(done), `${MANY} replies`)
      const seconds = (performance.now() - t0) / 1000
      return { latency, loadAverage, many: { streams: MANY, seconds, peakRssMb: peakRssMb(server.child.pid!) } }
    } finally {
      for (const s of streams) s.close()
      await stop(server)
    }
  } finally {
    agent.destroy()
    for (const fn of teardowns) await fn()
  }
}

export function printChat(r: ChatBench): void {
  const ms = (n: number) => n.toFixed(2)
  const row = (target: string, streams: number, f: ChatFigures) => [
    target,
    String(streams),
    ms(f.p50),
    ms(f.p99),
    ms(f.firstP50),
    ms(f.firstP99),
    (f.pieces / f.deltas).toFixed(1),
  ]
  console.log(
    `\nchat streams: replies of ${PIECES} pieces ${CHUNK_DELAY_MS} ms apart from the fake provider on loopback; ${ROUNDS} replies per stream after ${WARM_UP} to warm up, the streams' starts spread; delta: provider wrote a piece -> client read it`,
  )
  printTable([
    [
      'target',
      'streams',
      'delta p50 ms',
      'delta p99 ms',
      'first delta p50 ms',
      'first delta p99 ms',
      'pieces per delta',
    ],
    ...r.latency.flatMap((l) => [
      row('bare Fastify SSE route, fetch to the provider (baseline)', l.streams, l.bare),
      row('GET /api/v1/chat/sessions/:id/stream', l.streams, l.atrium),
    ]),
  ])
  // The bar is the latency Atrium's path adds to a delta: one stream, the machine otherwise idle.
  // With STREAMS at once the same figure mostly measures a queue for the CPU (2 cores here, shared
  // with PostgreSQL, Redis and this process): it is printed beside it, not judged.
  const [one, loaded] = [r.latency[0]!, r.latency.at(-1)!]
  console.log(
    `latency per delta, one stream: p99 ${ms(one.atrium.p99)} ms (bar under ${BAR_P99_MS} ms: ${one.atrium.p99 < BAR_P99_MS ? 'met' : 'missed'}), the baseline's ${ms(one.bare.p99)} ms; with ${loaded.streams} streams at once: p50 ${ms(loaded.atrium.p50)} ms, p99 ${ms(loaded.atrium.p99)} ms, the baseline's ${ms(loaded.bare.p50)} and ${ms(loaded.bare.p99)} ms`,
  )
  console.log(
    `machine: ${availableParallelism()} CPUs, load average ${r.loadAverage.toFixed(1)} over the minute the latency runs ended`,
  )
  console.log(
    `first delta: from the request that starts a reply (Atrium: POST .../messages, its stream open; baseline: its GET), the provider's first ${CHUNK_DELAY_MS} ms included`,
  )
  console.log(
    `${r.many.streams} concurrent streams on one replica, a message posted to each (${POSTS_AT_ONCE} at a time): all replies complete in ${r.many.seconds.toFixed(1)} s (one alone takes ${((PIECES * CHUNK_DELAY_MS) / 1000).toFixed(1)} s at the provider); peak RSS ${r.many.peakRssMb} MB (bar under ${BAR_RSS_MB} MB: ${r.many.peakRssMb < BAR_RSS_MB ? 'met' : 'missed'})`,
  )
}
