// The chat export on the real server (PostgreSQL, Redis): MESSAGES messages in SESSIONS sessions,
// written straight into the database with SQL (as the table owner, in the shape the app writes),
// then exported with metadata through POST /api/v1/chat/export and read as it streams: bytes and
// messages counted on the fly (the document is not held), the last bytes checked for the counts.
// Reported: messages, MB, seconds, and the server's peak RSS (target under 256 MB), next to a
// baseline: the same rows read by this process through a plain postgres.js cursor, each row's
// JSON written to a stream that discards it.
import { once } from 'node:events'
import { Writable } from 'node:stream'
import postgres from 'postgres'
import { DAY_MS } from '../server/domain/days.js'
import { createTenant, peakRssMb, start, stop } from './lib.js'

const MESSAGES = Number(process.env.BENCH_EXPORT_MESSAGES ?? 100_000)
const SESSIONS = Number(process.env.BENCH_EXPORT_SESSIONS ?? 1_000)

export interface ChatExportBench {
  messages: number
  sessions: number
  bytes: number
  seconds: number
  /** The server's peak RSS before the export (started, tenant made) and after it. */
  idleRssMb: number
  peakRssMb: number
  baseline: { rows: number; bytes: number; seconds: number }
}

/**
 * The rows, as the app would have written them: time-ordered (UUIDv7) ids from their created_at,
 * sessions bound to nothing, every message completed, assistant replies with their usage. Message
 * k is 20 s after message k-1, in session k mod SESSIONS: sessions run side by side, as they do.
 */
async function seed(sql: postgres.Sql, tenantId: string, since: number) {
  // A UUIDv7 of a time (ms) and a number: 48 bits of time, version 7, variant 10, the rest from md5.
  const v7 = (ms: string, n: string) =>
    `(lpad(to_hex(${ms}), 12, '0') || '7' || substr(md5(${n}::text), 1, 3) || '8' || substr(md5(${n}::text), 4, 15))::uuid`
  await sql.unsafe(
    `insert into chat_sessions (id, tenant_id, title, message_count, created_at, updated_at)
     select ${v7('$2::bigint + s', "'s' || s")}, $1, 'Session ' || s, 0, to_timestamp(($2::bigint + s) / 1000.0), now()
       from generate_series(0, $3::int - 1) s`,
    [tenantId, since, SESSIONS],
  )
  await sql.unsafe(
    `with sessions as (select id, row_number() over (order by id) - 1 as n from chat_sessions where tenant_id = $1)
     insert into chat_messages (id, tenant_id, session_id, role, content, status, usage, created_at, completed_at)
     select ${v7('m.ms', "'m' || k")}, $1, s.id,
            case when k % 2 = 0 then 'user' else 'assistant' end,
            left(repeat('The quick brown fox jumps over the lazy dog. ', 40), 100 + (k * 37) % 900),
            'completed',
            case when k % 2 = 1 then jsonb_build_object('inputTokens', 200 + k % 500, 'outputTokens', 50 + k % 300) end,
            to_timestamp(m.ms / 1000.0), to_timestamp(m.ms / 1000.0 + 2)
       from generate_series(0, $3::int - 1) k
       cross join lateral (select $2::bigint + 1000 + k::bigint * 20000 as ms) m
       join sessions s on s.n = k % $4::int`,
    [tenantId, since, MESSAGES, SESSIONS],
  )
  await sql`update chat_sessions s set message_count = c.n from (select session_id, count(*)::int as n from chat_messages where tenant_id = ${tenantId} group by session_id) c where s.id = c.session_id`
  await sql`analyze chat_messages`
  await sql`analyze chat_sessions`
}

/** Counts `needle` in a stream of text without holding it: each chunk is searched with the tail of the one before. */
function counter(needle: string) {
  let tail = ''
  let count = 0
  return {
    feed(text: string) {
      const hay = tail + text
      for (let i = hay.indexOf(needle); i >= 0; i = hay.indexOf(needle, i + needle.length)) count++
      // Keep what could start a match that the next chunk completes (never a whole match: it was counted).
      tail = hay.slice(Math.max(hay.length - needle.length + 1, 0))
    },
    get count() {
      return count
    },
  }
}

export async function benchChatExport(env: Record<string, string>): Promise<ChatExportBench> {
  const server = await start('server/main.ts', env)
  const owner = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  try {
    const { tenantId, apiKey } = await createTenant(env, ['--plan', 'enterprise'])
    const since = Date.now() - 30 * DAY_MS
    await seed(owner, tenantId, since)
    const idleRssMb = peakRssMb(server.child.pid!)

    const range = { start: new Date(since).toISOString().slice(0, 10), end: new Date().toISOString().slice(0, 10) }
    const t0 = performance.now()
    const res = await fetch(`${server.base}/api/v1/chat/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ dateRange: range, format: 'json', includeMetadata: true }),
    })
    if (res.status !== 200) throw new Error(`export: ${res.status} ${await res.text()}`)
    const messages = counter('"role":"')
    const decoder = new TextDecoder()
    let bytes = 0
    let last = ''
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.byteLength
      const text = decoder.decode(chunk, { stream: true })
      messages.feed(text)
      last = (last + text).slice(-200)
    }
    const seconds = (performance.now() - t0) / 1000
    // The document is the envelope's data; meta closes the envelope.
    const counts = /"counts":(\{[^}]*\})\},"meta":\{[^}]*\}\}\s*$/.exec(last)
    if (
      !counts ||
      JSON.stringify(JSON.parse(counts[1]!)) !== JSON.stringify({ sessions: SESSIONS, messages: MESSAGES }) ||
      messages.count !== MESSAGES
    ) {
      throw new Error(
        `export: expected ${MESSAGES} messages in ${SESSIONS} sessions, counted ${messages.count}; the document ends ${last}`,
      )
    }
    const peak = peakRssMb(server.child.pid!)

    // Baseline: the same rows, in the same order, through a plain cursor in this process.
    const sink = new Writable({
      highWaterMark: 64 * 1024,
      write: (_chunk, _encoding, done) => done(),
    })
    let rows = 0
    let baseBytes = 0
    const t1 = performance.now()
    await owner`
      select m.id, m.session_id, m.role, m.content, m.status, m.error, m.usage, m.created_at, m.completed_at, s.title
        from chat_messages m join chat_sessions s on s.id = m.session_id
       where m.tenant_id = ${tenantId} and m.created_at >= ${new Date(`${range.start}T00:00:00Z`)} and m.created_at < ${new Date(Date.parse(`${range.end}T00:00:00Z`) + DAY_MS)}
       order by m.session_id, m.id`.cursor(1000, async (page) => {
      let out = ''
      for (const r of page) out += JSON.stringify(r) + ',\n'
      rows += page.length
      baseBytes += Buffer.byteLength(out)
      if (!sink.write(out)) await once(sink, 'drain')
    })
    const baseSeconds = (performance.now() - t1) / 1000
    return {
      messages: messages.count,
      sessions: SESSIONS,
      bytes,
      seconds,
      idleRssMb,
      peakRssMb: peak,
      baseline: { rows, bytes: baseBytes, seconds: baseSeconds },
    }
  } finally {
    await owner.end()
    await stop(server)
  }
}

export function printChatExport(r: ChatExportBench): void {
  const mb = (b: number) => (b / 1024 / 1024).toFixed(1)
  console.log(
    `\nchat export: ${r.messages} messages in ${r.sessions} sessions, with metadata, read over HTTP as it streams`,
  )
  console.log(
    `  baseline, a plain postgres.js cursor (pages of 1,000) in this process, rows as JSON to a discarded stream: ${r.baseline.seconds.toFixed(2)} s, ${mb(r.baseline.bytes)} MB`,
  )
  console.log(
    `  Atrium, POST /api/v1/chat/export: ${r.seconds.toFixed(2)} s, ${mb(r.bytes)} MB, ${(r.messages / r.seconds).toFixed(0)} messages/s (${((r.baseline.seconds / r.seconds) * 100).toFixed(1)}% of the baseline's speed)`,
  )
  console.log(`  server peak RSS ${r.peakRssMb} MB (${r.idleRssMb} MB before the export; target under 256 MB)`)
}
