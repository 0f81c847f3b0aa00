// Chat SQL. Every query names its tenant even though row-level security would also confine it.
import { pageWithinBytes, tenantRows, type TxSql } from '../../platform/db.js'
import { appendLogEvents, logEventsAfter, type LogTables, type LoggedEvent } from '../../platform/event-log.js'

export interface SessionRow {
  id: string
  title: string
  agent_id: string | null
  project_id: string | null
  message_count: number
  generating_id: string | null
  event_seq: number
  created_at: Date
  updated_at: Date
}

export interface MessageRow {
  id: string
  session_id: string
  role: 'user' | 'assistant'
  content: string
  status: 'generating' | 'completed' | 'failed'
  error: { code: string; message: string } | null
  usage: { inputTokens: number; outputTokens: number } | null
  created_at: Date
  completed_at: Date | null
}

const SESSION = 'id, title, agent_id, project_id, message_count, generating_id, event_seq, created_at, updated_at'
const MESSAGE = 'id, session_id, role, content, status, error, usage, created_at, completed_at'

export const sessions = tenantRows<SessionRow>('chat_sessions', SESSION)
export const selectSession = sessions.byId

export async function countSessions(sql: TxSql, tenantId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from chat_sessions where tenant_id = ${tenantId}`
  return row!.n
}

export const insertSession = (
  sql: TxSql,
  tenantId: string,
  s: { id: string; title: string; agentId: string | null; projectId: string | null },
): Promise<SessionRow> =>
  sessions.insert(sql, tenantId, { id: s.id, title: s.title, agent_id: s.agentId, project_id: s.projectId })

/** Binds a session that has no project to `projectId` (the composite foreign key checks it is the tenant's). */
export function bindProject(sql: TxSql, tenantId: string, id: string, projectId: string) {
  return sql`update chat_sessions set project_id = ${projectId} where tenant_id = ${tenantId} and id = ${id} and project_id is null`
}

export const retitleSession = (sql: TxSql, tenantId: string, id: string, title: string) =>
  sessions.update(sql, tenantId, id, { title })

export function deleteSession(sql: TxSql, tenantId: string, id: string) {
  return sql<{ id: string }[]>`delete from chat_sessions where tenant_id = ${tenantId} and id = ${id} returning id`
}

/** A session's messages, oldest first, after `after` (an id: ids are time-ordered). */
/** The most a page of messages holds (their text), and at least one message: replies run to megabytes. */
export const MESSAGES_PAGE_MAX_BYTES = 4 * 1024 * 1024

/** A page of a session's messages, oldest first, within MESSAGES_PAGE_MAX_BYTES (measured in the database). */
export function listMessages(sql: TxSql, tenantId: string, sessionId: string, limit: number, after: string | null) {
  return pageWithinBytes<MessageRow>(sql, {
    table: 'chat_messages',
    columns: MESSAGE,
    where: sql`tenant_id = ${tenantId} and session_id = ${sessionId} ${after ? sql`and id > ${after}` : sql``}`,
    size: 'octet_length(content) + coalesce(octet_length(error::text), 0) + 256',
    desc: false,
    limit,
    budget: MESSAGES_PAGE_MAX_BYTES,
  })
}

/** A user's message and the empty reply now generating, in one statement; the session moves on. */
export async function insertExchange(
  sql: TxSql,
  tenantId: string,
  sessionId: string,
  m: { userId: string; replyId: string; content: string },
): Promise<MessageRow[]> {
  const rows = await sql<MessageRow[]>`
    insert into chat_messages (id, tenant_id, session_id, role, content, status, completed_at)
    values (${m.userId}, ${tenantId}, ${sessionId}, 'user', ${m.content}, 'completed', now()),
           (${m.replyId}, ${tenantId}, ${sessionId}, 'assistant', '', 'generating', null)
    returning ${sql.unsafe(MESSAGE)}`
  await sql`
    update chat_sessions set message_count = message_count + 2, generating_id = ${m.replyId}, updated_at = now()
     where tenant_id = ${tenantId} and id = ${sessionId}`
  return rows.sort((a, b) => (a.id < b.id ? -1 : 1))
}

export function selectMessage(sql: TxSql, tenantId: string, id: string, opts: { lock?: boolean } = {}) {
  return sql<
    MessageRow[]
  >`select ${sql.unsafe(MESSAGE)} from chat_messages where tenant_id = ${tenantId} and id = ${id} ${opts.lock ? sql`for update` : sql``}`
}

/** The newest completed messages before a reply, newest first (the caller keeps what fits its budget). */
/**
 * The history before a reply, newest first: up to `limit` messages, the newest always, then only
 * those that fit `chars` together (measured in the database: a session of long replies is not read
 * whole to keep its last few).
 */
export function historyBefore(
  sql: TxSql,
  tenantId: string,
  sessionId: string,
  beforeId: string,
  limit: number,
  chars: number,
) {
  return sql<Pick<MessageRow, 'role' | 'content'>[]>`
    select role, content from (
      select id, role, content, char_length(content) as len, sum(char_length(content)) over (order by id desc) as upto
        from chat_messages
       where tenant_id = ${tenantId} and session_id = ${sessionId} and id < ${beforeId} and status = 'completed' and content <> ''
       order by id desc limit ${limit}) h
     where upto <= ${chars} or upto = len
     order by id desc`
}

/** The system prompt of the session's agent, if it has one. */
export async function agentPrompt(
  sql: TxSql,
  tenantId: string,
  agentId: string | null,
): Promise<{ prompt: string; model: string | null } | null> {
  if (!agentId) return null
  const [row] = await sql<{ system_prompt: string; model: string | null }[]>`
    select system_prompt, config->>'model' as model from agents where tenant_id = ${tenantId} and id = ${agentId}`
  return row ? { prompt: row.system_prompt, model: row.model } : null
}

/** Ends a reply (completed with its text, or failed with its error) and frees the session for the next. */
export async function finishReply(
  sql: TxSql,
  tenantId: string,
  sessionId: string,
  replyId: string,
  end: { status: 'completed' | 'failed'; content: string; error: MessageRow['error']; usage: MessageRow['usage'] },
): Promise<MessageRow> {
  const [row] = await sql<MessageRow[]>`
    update chat_messages set status = ${end.status}, content = ${end.content}, error = ${end.error === null ? null : sql.json(end.error as never)},
           usage = ${end.usage === null ? null : sql.json(end.usage as never)}, completed_at = now()
     where tenant_id = ${tenantId} and id = ${replyId}
    returning ${sql.unsafe(MESSAGE)}`
  await sql`update chat_sessions set generating_id = null, updated_at = now() where tenant_id = ${tenantId} and id = ${sessionId} and generating_id = ${replyId}`
  return row!
}

const LOG: LogTables = { owner: 'chat_sessions', events: 'chat_events', key: 'session_id' }

/** Appends events to a session's stream; the number of the last. */
export const appendChatEvents = (sql: TxSql, tenantId: string, sessionId: string, events: LoggedEvent[]) =>
  appendLogEvents(sql, LOG, tenantId, sessionId, events)

export const chatEventsAfter = (sql: TxSql, tenantId: string, sessionId: string, after: number, limit: number) =>
  logEventsAfter(sql, LOG, tenantId, sessionId, after, limit)
