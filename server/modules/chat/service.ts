// Chat sessions: a conversation, optionally bound to an agent (whose system prompt its replies use)
// and a project. Messages and their streamed replies build on these.
import { newId } from '../../../common/ids.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, invalid, notFound } from '../../domain/errors.js'
import { decodeIdCursor, toBoundedPage } from '../../domain/pagination.js'
import { PLAN_TERMS } from '../../domain/plans.js'
import { planOf } from '../../domain/principal.js'
import { isForeignKeyViolation, tenantReads, type Db } from '../../platform/db.js'
import { enqueueJob } from '../../platform/jobs.js'
import type { Llm, LlmTarget } from '../../platform/llm.js'
import * as store from './store.js'
import type { MessageRow, SessionRow } from './store.js'

export const DEFAULT_TITLE = 'New chat'
export const REPLY_QUEUE = 'chat.reply'

/** A message as it is sent: its content; the session again and a project, as the specification names them. */
export interface MessageInput {
  content: string
  sessionId?: string
  projectId?: string | null
}

export interface PageRequest {
  limit: number
  cursor?: string
}

/** A session as the API shows it. */
export const sessionView = (s: SessionRow) => ({
  id: s.id,
  title: s.title,
  agentId: s.agent_id,
  projectId: s.project_id,
  messageCount: s.message_count,
  createdAt: s.created_at.toISOString(),
  updatedAt: s.updated_at.toISOString(),
})

/** A message as the API shows it. */
export const messageView = (m: MessageRow) => ({
  id: m.id,
  sessionId: m.session_id,
  role: m.role,
  content: m.content,
  status: m.status,
  error: m.error,
  usage: m.usage,
  createdAt: m.created_at.toISOString(),
  completedAt: m.completed_at?.toISOString() ?? null,
})

/** A bound agent or project that is not the tenant's: the composite foreign key refused it. */
function unknownBinding(err: unknown, input: { agentId?: string | null; projectId?: string | null }): AppError | null {
  if (input.agentId && isForeignKeyViolation(err, 'chat_sessions_tenant_id_agent_id_fkey'))
    return notFound('agent', input.agentId)
  if (input.projectId && isForeignKeyViolation(err, 'chat_sessions_tenant_id_project_id_fkey'))
    return notFound('project', input.projectId)
  return null
}

export function chatService(deps: {
  db: Db
  llm: Pick<Llm, 'checkConfigured'>
  connection: (tenantId: string) => Promise<LlmTarget>
}) {
  const { db } = deps
  const found = (id: string, rows: readonly SessionRow[]) => {
    if (!rows[0]) throw notFound('session', id)
    return rows[0]
  }

  return {
    ...tenantReads(db, 'session', store.sessions),

    /** A new session, within the plan's number of sessions. */
    async create(
      a: Actor,
      input: { title?: string; agentId?: string | null; projectId?: string | null },
    ): Promise<SessionRow> {
      const limit = PLAN_TERMS[planOf(a.principal)].limits.chatSessions
      try {
        return await db.tenant(a.tenantId, async (sql) => {
          // Serialises a tenant's creations, so that the count holds under races.
          await sql`select pg_advisory_xact_lock(hashtextextended(${'atrium.chat-sessions:' + a.tenantId}, 0))`
          const count = await store.countSessions(sql, a.tenantId)
          if (count >= limit)
            throw new AppError(
              'QUOTA_EXCEEDED',
              `the ${planOf(a.principal)} plan keeps at most ${limit} chat sessions; delete some first`,
              { limit, used: count },
            )
          return store.insertSession(sql, a.tenantId, {
            id: newId(),
            title: input.title?.trim() || DEFAULT_TITLE,
            agentId: input.agentId ?? null,
            projectId: input.projectId ?? null,
          })
        })
      } catch (err) {
        throw unknownBinding(err, input) ?? err
      }
    },

    async retitle(tenantId: string, id: string, title: string): Promise<SessionRow> {
      const row = await db.tenant(tenantId, (sql) => store.retitleSession(sql, tenantId, id, title.trim()))
      if (!row) throw notFound('session', id)
      return row
    },

    async remove(tenantId: string, id: string): Promise<void> {
      const rows = await db.tenant(tenantId, (sql) => store.deleteSession(sql, tenantId, id))
      if (!rows.length) throw notFound('session', id)
    },

    /**
     * Saves the user's message and starts the reply (queued on the job runner). One reply at a
     * time per session: a message while one generates is a CONFLICT naming it. The body may name
     * the session again (`sessionId`, as the specification's message does) and a project: a
     * session without one is bound to it, in the transaction that saves the message.
     */
    async post(a: Actor, sessionId: string, input: MessageInput) {
      const { content, projectId } = input
      if (input.sessionId !== undefined && input.sessionId.toLowerCase() !== sessionId.toLowerCase())
        throw invalid('body.sessionId', `must be the session of the path (${sessionId}), or left out`)
      if (!content.trim()) throw invalid('content', 'must not be blank')
      const limit = PLAN_TERMS[planOf(a.principal)].limits.chatMessageChars
      if (content.length > limit)
        throw new AppError('PAYLOAD_TOO_LARGE', `a message may hold at most ${limit} characters on this plan`, {
          limit,
          length: content.length,
        })
      // Refused now rather than as a failed reply: settings that cannot call a model (the bound agent's model counts).
      const agent = await db.tenant(a.tenantId, async (sql) =>
        store.agentPrompt(
          sql,
          a.tenantId,
          found(sessionId, await store.selectSession(sql, a.tenantId, sessionId)).agent_id,
        ),
      )
      deps.llm.checkConfigured(await deps.connection(a.tenantId), agent?.model ?? undefined)
      return db
        .tenant(a.tenantId, async (sql) => {
          const current = found(sessionId, await store.selectSession(sql, a.tenantId, sessionId, { lock: true }))
          if (current.generating_id) {
            throw new AppError(
              'CONFLICT',
              'a reply is still being generated in this session; wait for it (or follow its stream)',
              { replyId: current.generating_id },
            )
          }
          if (projectId && current.project_id === null) {
            // The composite foreign key refuses another tenant's project (caught below as for a creation).
            await store.bindProject(sql, a.tenantId, sessionId, projectId)
          } else if (projectId && current.project_id !== projectId.toLowerCase()) {
            throw invalid(
              'body.projectId',
              `the session belongs to project ${current.project_id}; a message cannot move it to another (start a session for that project)`,
              { projectId: current.project_id },
            )
          }
          const [message, reply] = await store.insertExchange(sql, a.tenantId, sessionId, {
            userId: newId(),
            replyId: newId(),
            content,
          })
          // One attempt and one take-over: a reply whose server died ends with an error instead of repeating its deltas.
          await enqueueJob(
            sql,
            REPLY_QUEUE,
            { sessionId, replyId: reply!.id },
            { tenantId: a.tenantId, maxAttempts: 2 },
          )
          return { message: message!, replyId: reply!.id }
        })
        .catch((err: unknown) => {
          throw unknownBinding(err, { projectId }) ?? err
        })
    },

    /** A session's stream events after `after`. */
    events: (tenantId: string, sessionId: string, after: number, limit = 500) =>
      db.tenant(tenantId, async (sql) => {
        found(sessionId, await store.selectSession(sql, tenantId, sessionId))
        return store.chatEventsAfter(sql, tenantId, sessionId, after, limit)
      }),

    /** A page of a session's messages, oldest first. */
    async messages(tenantId: string, sessionId: string, page: PageRequest) {
      const after = decodeIdCursor(page.cursor)
      const rows = await db.tenant(tenantId, async (sql) => {
        found(sessionId, await store.selectSession(sql, tenantId, sessionId))
        return store.listMessages(sql, tenantId, sessionId, page.limit + 1, after)
      })
      return toBoundedPage(rows, page.limit, (m) => m.id)
    },
  }
}

export type ChatService = ReturnType<typeof chatService>
