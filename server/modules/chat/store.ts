// Chat SQL. Every query names its tenant even though row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'

export interface SessionRow {
  id: string
  title: string
  agent_id: string | null
  project_id: string | null
  message_count: number
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

const SESSION = 'id, title, agent_id, project_id, message_count, created_at, updated_at'
const MESSAGE = 'id, session_id, role, content, status, error, usage, created_at, completed_at'

export function listSessions(sql: TxSql, tenantId: string, limit: number, before: string | null) {
  return sql<SessionRow[]>`
    select ${sql.unsafe(SESSION)} from chat_sessions
     where tenant_id = ${tenantId} ${before ? sql`and id < ${before}` : sql``}
     order by id desc limit ${limit}`
}

export function selectSession(sql: TxSql, tenantId: string, id: string, opts: { lock?: boolean } = {}) {
  return sql<SessionRow[]>`select ${sql.unsafe(SESSION)} from chat_sessions where tenant_id = ${tenantId} and id = ${id} ${opts.lock ? sql`for update` : sql``}`
}

export async function countSessions(sql: TxSql, tenantId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from chat_sessions where tenant_id = ${tenantId}`
  return row!.n
}

export async function insertSession(sql: TxSql, tenantId: string, s: { id: string; title: string; agentId: string | null; projectId: string | null }): Promise<SessionRow> {
  const [row] = await sql<SessionRow[]>`
    insert into chat_sessions (id, tenant_id, title, agent_id, project_id)
    values (${s.id}, ${tenantId}, ${s.title}, ${s.agentId}, ${s.projectId})
    returning ${sql.unsafe(SESSION)}`
  return row!
}

export async function retitleSession(sql: TxSql, tenantId: string, id: string, title: string): Promise<SessionRow | undefined> {
  const [row] = await sql<SessionRow[]>`
    update chat_sessions set title = ${title}, updated_at = now() where tenant_id = ${tenantId} and id = ${id}
    returning ${sql.unsafe(SESSION)}`
  return row
}

export function deleteSession(sql: TxSql, tenantId: string, id: string) {
  return sql<{ id: string }[]>`delete from chat_sessions where tenant_id = ${tenantId} and id = ${id} returning id`
}

/** A session's messages, oldest first, after `after` (an id: ids are time-ordered). */
export function listMessages(sql: TxSql, tenantId: string, sessionId: string, limit: number, after: string | null) {
  return sql<MessageRow[]>`
    select ${sql.unsafe(MESSAGE)} from chat_messages
     where tenant_id = ${tenantId} and session_id = ${sessionId} ${after ? sql`and id > ${after}` : sql``}
     order by id limit ${limit}`
}
