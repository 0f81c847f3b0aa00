// A live event log (a chat session's): text reaches the log's channel at once with its number,
// the rows follow behind with the same numbers, and no more than LIVE_WINDOW events are ever sent
// unwritten (a writer taking over starts that far on, past any number a dead one sent). A log's
// end (a run's) is said in the message that announces its rows, and logEnd wakes on that alone.
import t, { type Test } from 'tap'
import pino from 'pino'
import { openCache } from '../../../server/platform/cache.js'
import {
  eventLogWriter,
  LIVE_WINDOW,
  logEnd,
  parseLogMessage,
  writtenMessage,
  type LiveEvent,
  type LogMessage,
} from '../../../server/platform/event-log.js'
import { appendChatEvents, chatEventsAfter, selectSession } from '../../../server/modules/chat/store.js'
import { testApp } from '../../helpers/app.js'
import { services } from '../../helpers/platform.js'

const h = await testApp(t)
const { db, cache } = h.platform
const tick = () => new Promise((r) => setImmediate(r))

/** A chat session's log: live (numbered by the writer from `after`), or numbered as written, ended by `ends`. */
async function sessionLog(t: Test, o: { after: number } | { ends: ReadonlySet<string> }) {
  const { tenantId, call } = await h.tenant()
  const sessionId = (await call('POST', '/api/v1/chat/sessions', {})).body.data.id as string
  const channel = `test:event-log:${sessionId}`
  const heard: LogMessage[] = []
  const unsubscribe = await cache.subscribe(channel, (m) => heard.push(parseLogMessage(m)!))
  t.teardown(unsubscribe)
  const writer = eventLogWriter<string>({
    db,
    cache,
    tenantId,
    channel,
    append: (sql, events) => appendChatEvents(sql, tenantId, sessionId, events),
    flushMs: 60_000, // written only when told, so the test sees what is sent before
    ...('after' in o ? { live: { after: o.after } } : { ends: o.ends }),
    deltaEvent: (messageId, delta) => ({ type: 'message.delta', data: { messageId, delta } }),
  })
  t.teardown(writer.stop)
  const rows = () => db.tenant(tenantId, (sql) => chatEventsAfter(sql, tenantId, sessionId, 0, 5000))
  const seq = async () => (await db.tenant(tenantId, (sql) => selectSession(sql, tenantId, sessionId)))[0]!.event_seq
  // Redis delivers on its own connection: wait until `n` messages have come.
  const hear = async (n: number) => {
    for (let i = 0; i < 200 && heard.length < n; i++) await new Promise((r) => setTimeout(r, 10))
    return heard
  }
  return { writer, heard, hear, rows, seq, channel }
}

t.test(
  'text goes out live with its number before it is written, and the rows follow with the same numbers',
  async (t) => {
    const log = await sessionLog(t, { after: 7 })
    log.writer.delta('m1', 'Hel')
    log.writer.delta('m1', 'lo') // the same turn: one event
    await tick()
    log.writer.delta('m1', ' there')
    await tick()
    t.same(await log.hear(2), [
      { live: [{ id: 8, event: 'message.delta', data: { messageId: 'm1', delta: 'Hello' } }] },
      { live: [{ id: 9, event: 'message.delta', data: { messageId: 'm1', delta: ' there' } }] },
    ])
    t.same(await log.rows(), [], 'nothing written yet')

    await log.writer.flush()
    t.same(
      (await log.rows()).map((r) => [r.seq, r.data.delta]),
      [
        [8, 'Hello'],
        [9, ' there'],
      ],
    )
    t.equal(await log.seq(), 9, "the session's number moved to the last")
    t.same((await log.hear(3))[2], { written: 9 }, 'the streams are told the rows are there')

    // An event that is not text is sent once written, in the transaction of its state change.
    await log.writer.commit(async () => log.writer.push('message.completed', { message: { id: 'm1' } }))
    t.same((await log.hear(4))[3], { live: [{ id: 10, event: 'message.completed', data: { message: { id: 'm1' } } }] })
    t.equal(await log.seq(), 10)
  },
)

t.test('no more than LIVE_WINDOW events are sent unwritten: the rest go out once written', async (t) => {
  const log = await sessionLog(t, { after: 0 })
  for (let i = 0; i < LIVE_WINDOW + 3; i++) log.writer.delta(`k${i}`, 'x') // another key closes the event before
  await tick()
  const sent = await log.hear(LIVE_WINDOW)
  t.equal(sent.length, LIVE_WINDOW)
  t.same(sent.at(-1), {
    live: [{ id: LIVE_WINDOW, event: 'message.delta', data: { messageId: `k${LIVE_WINDOW - 1}`, delta: 'x' } }],
  })
  await log.writer.flush()
  const after = await log.hear(LIVE_WINDOW + 1)
  t.same(
    (after.at(-1) as { live: LiveEvent[] }).live.map((e) => e.id),
    [LIVE_WINDOW + 1, LIVE_WINDOW + 2, LIVE_WINDOW + 3],
    'the held ones, with their rows',
  )
  t.equal((await log.rows()).length, LIVE_WINDOW + 3)
})

t.test(
  'live text stays in this process while no other replica listens; one that starts listening is told the numbers to read, then sent the text',
  { skip: !services.redisUrl && 'TEST_REDIS_URL is not set: replicas share Redis' },
  async (t) => {
    const log = await sessionLog(t, { after: 0 })
    // A publish's answer (whether another process listens) comes back from Redis on its own time.
    const settle = () => new Promise((r) => setTimeout(r, 100))
    const delta = (id: number, text: string) => ({
      live: [{ id, event: 'message.delta', data: { messageId: 'm1', delta: text } }],
    })
    log.writer.delta('m1', 'a') // through Redis: nobody else there
    await tick()
    await settle()
    log.writer.delta('m1', 'b')
    await tick()
    t.same(await log.hear(2), [delta(1, 'a'), delta(2, 'b')], 'this process hears each at once')

    const other = await openCache({ redisUrl: services.redisUrl, log: pino({ level: 'silent' }) })
    t.teardown(() => other.close())
    const elsewhere: LogMessage[] = []
    await other.subscribe(log.channel, (m) => elsewhere.push(parseLogMessage(m)!))
    for (let i = 0; i < 100 && ((await cache.redis!.pubsub('NUMSUB', log.channel)) as [string, number])[1] < 2; i++)
      await settle()

    log.writer.delta('m1', 'c')
    await tick()
    await settle()
    t.same(elsewhere, [], 'the writer has not learnt of it yet: the text stays here')
    await log.writer.commit(async () => log.writer.push('message.completed', { message: { id: 'm1' } }))
    await settle()
    t.same(
      elsewhere,
      [{ live: [{ id: 4, event: 'message.completed', data: { message: { id: 'm1' } } }] }, { written: 4 }],
      'the event sent once written, and the number that has a stream there read the rows it lacks',
    )
    t.same(
      (await log.rows()).map((r) => r.seq),
      [1, 2, 3, 4],
    )
    log.writer.delta('m1', 'd')
    await tick()
    await settle()
    t.same(elsewhere.at(-1), delta(5, 'd'), 'told by that answer, the writer sends the text there too')
  },
)

t.test("a log's end is in the message that announces its rows, and logEnd wakes on that message alone", async (t) => {
  const { writer, hear, channel } = await sessionLog(t, { ends: new Set(['closed']) })
  const end = await logEnd(cache, channel)
  t.teardown(end.close)
  let woke: boolean | null = null
  const waited = end.until(600_000).then((ended) => (woke = ended))

  await writer.commit(async () => writer.push('step', { n: 1 }))
  t.same(await hear(1), [{ written: 1 }], 'an event that does not end the log: a plain number')
  await tick()
  t.equal(woke, null, 'the waiter still waits')

  await writer.commit(async () => writer.push('closed', {}))
  t.equal(await waited, true, 'woken by the end, long before its bound')
  t.same(await hear(2), [{ written: 1 }, { written: 2, ended: true }])
  t.equal(await end.until(600_000), true, 'heard already: at once')

  // A server of an older release reads any message it does not know as "read the rows".
  t.ok(Number.isNaN(Number(writtenMessage(2, true))), 'not a number to it')
  t.same(parseLogMessage(writtenMessage(2)), { written: 2 })

  const other = await logEnd(cache, `${channel}:other`)
  t.teardown(other.close)
  const stop = new AbortController()
  const stopped = other.until(600_000, stop.signal)
  stop.abort()
  t.equal(await stopped, false, 'a signal ends the wait, without the end')
  t.equal(await other.until(1), false, 'as does the bound')
})
