// Generates assistant replies on the job runner (queue 'chat.reply'). The reply streams into the session's live event
// log as message.delta events (sent to the streams as they come, written every DELTA_FLUSH_MS behind them) and ends
// with message.completed, or with error when the provider fails; the text is saved with the final event, in one
// transaction. The client going away changes nothing: the reply is generated and saved, and a later stream or GET
// messages shows it. A reply whose worker died is not generated again (its deltas were already sent): it ends with an
// error, and the user sends the message again.
import { AppError } from '../../domain/errors.js'
import type { Cache } from '../../platform/cache.js'
import type { Db } from '../../platform/db.js'
import { eventLogWriter, LIVE_WINDOW } from '../../platform/event-log.js'
import { JobCancelled, type Job } from '../../platform/jobs.js'
import type { Llm, LlmMessage, LlmTarget } from '../../platform/llm.js'
import { messageView } from './service.js'
export { REPLY_QUEUE } from './service.js'
import * as store from './store.js'

/**
 * Deltas reach the streams at once and are written this often behind them (what a stream joining late waits for at
 * most).
 */
const DELTA_FLUSH_MS = 200
/** The history handed to the model: the newest messages that fit (characters, about 4 per token). */
export const CONTEXT_CHARS = 48_000
const CONTEXT_MESSAGES = 200

export const sessionChannel = (sessionId: string) => `atrium:chat-session:${sessionId}`

/** The newest history that fits the budget, oldest first; the message being answered always fits. */
export function trimHistory(
  newestFirst: { role: 'user' | 'assistant'; content: string }[],
  budget = CONTEXT_CHARS,
): LlmMessage[] {
  const kept: LlmMessage[] = []
  let used = 0
  for (const m of newestFirst) {
    if (kept.length && used + m.content.length > budget) break
    kept.push({ role: m.role, content: m.content })
    used += m.content.length
  }
  return kept.reverse()
}

export function replyGenerator(deps: {
  db: Db
  cache: Cache
  llm: Llm
  connection: (tenantId: string) => Promise<LlmTarget>
}) {
  const { db } = deps

  return async function handle(job: Job<{ sessionId: string; replyId: string }>): Promise<void> {
    const tenantId = job.tenantId!
    const { sessionId, replyId } = job.payload
    const start = await db.tenant(tenantId, async (sql) => {
      const [reply] = await store.selectMessage(sql, tenantId, replyId)
      if (!reply || reply.status !== 'generating') return null
      const [session] = await store.selectSession(sql, tenantId, sessionId)
      return session
        ? {
            session,
            agent: await store.agentPrompt(sql, tenantId, session.agent_id),
            history: await store.historyBefore(sql, tenantId, sessionId, replyId, CONTEXT_MESSAGES, CONTEXT_CHARS),
          }
        : null
    })
    if (!start) return
    // The text cannot be kept (the session was deleted, the database is away): stop the model at once rather than at
    // the end.
    const unkept = new AbortController()
    // This reply is the session's only writer while it generates (one reply at a time), so it numbers
    // the events and sends them live. Taking over from a worker that died, it starts beyond what that one may have
    // sent.
    const events = eventLogWriter<string>({
      db,
      cache: deps.cache,
      tenantId,
      channel: sessionChannel(sessionId),
      append: (sql, e) => store.appendChatEvents(sql, tenantId, sessionId, e),
      flushMs: DELTA_FLUSH_MS,
      live: { after: start.session.event_seq + (job.attempt > 1 ? LIVE_WINDOW : 0) },
      deltaEvent: (messageId, delta) => ({ type: 'message.delta', data: { messageId, delta } }),
      onWriteError: (err) => unkept.abort(err),
    })
    const finish = (end: {
      content: string
      error: { code: string; message: string } | null
      usage: { inputTokens: number; outputTokens: number } | null
    }) =>
      events.commit(async (sql) => {
        const [current] = await store.selectMessage(sql, tenantId, replyId, { lock: true })
        if (!current || current.status !== 'generating') return
        const saved = await store.finishReply(sql, tenantId, sessionId, replyId, {
          status: end.error ? 'failed' : 'completed',
          ...end,
        })
        if (end.error) events.push('error', { messageId: replyId, ...end.error })
        else events.push('message.completed', { message: messageView(saved) })
      })

    try {
      if (job.attempt > 1) {
        await finish({
          content: '',
          error: {
            code: 'RUN_INTERRUPTED',
            message: 'the reply was interrupted (its server stopped); send the message again',
          },
          usage: null,
        })
        return
      }
      let text = ''
      try {
        const target = await deps.connection(tenantId)
        deps.llm.checkConfigured(target, start.agent?.model ?? undefined)
        const response = await deps.llm.complete({
          tenantId,
          target,
          messages: [
            ...(start.agent?.prompt ? [{ role: 'system' as const, content: start.agent.prompt }] : []),
            ...trimHistory(start.history),
          ],
          ...(start.agent?.model ? { model: start.agent.model } : {}),
          signal: AbortSignal.any([job.signal, unkept.signal]),
          onDelta: (d) => {
            text += d
            events.delta(replyId, d)
          },
        })
        await finish({ content: response.text, error: null, usage: response.usage })
      } catch (err) {
        if (job.signal.aborted && !(job.signal.reason instanceof JobCancelled)) throw err // handed back by a stopping server: ends interrupted
        if (unkept.signal.aborted) throw unkept.signal.reason // the next attempt ends it, or finds it deleted
        if (err instanceof AppError && err.code !== 'SERVICE_UNAVAILABLE') {
          await finish({ content: text, error: { code: err.code, message: err.message }, usage: null })
          return
        }
        throw err
      }
    } finally {
      events.stop()
    }
  }
}
