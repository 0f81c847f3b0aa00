// Agent and run SQL. Every query names its tenant even though row-level security would also confine it.
import { pageWithinBytes, tenantRows, type TxSql } from '../../platform/db.js'
import { appendLogEvents, logEventsAfter, type LogTables, type LoggedEvent } from '../../platform/event-log.js'

export type AutonomyLevel = 'low' | 'medium' | 'high'

export interface AgentConfig {
  autonomyLevel: AutonomyLevel
  model: string | null
  temperature: number | null
  maxSteps: number
  tools: string[]
}

export interface AgentRow {
  id: string
  name: string
  system_prompt: string
  config: AgentConfig
  created_at: Date
  updated_at: Date
}

export type RunStatus = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'

export interface RunUsage {
  inputTokens: number
  outputTokens: number
}

export interface RunRow {
  id: string
  tenant_id: string
  agent_id: string
  project_id: string
  goal: string
  status: RunStatus
  output: string | null
  error: { code: string; message: string } | null
  usage: RunUsage
  steps: unknown[]
  messages: unknown[]
  pending_files: unknown[]
  agent_snapshot: { name: string; systemPrompt: string; config: AgentConfig }
  started_by: { kind: 'api_key' | 'user'; id: string; userId: string | null }
  job_id: string | null
  event_seq: number
  project_version: number | null
  cancel_requested: boolean
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  updated_at: Date
}

/**
 * A run as the API and the end of a run read it: without the conversation and staged files, which only the runner
 * needs.
 */
export type RunRecord = Omit<RunRow, 'messages' | 'pending_files'>

/** The most of a run's steps a record read holds (JSON text); the newest steps that fit. */
export const STEPS_READ_MAX_BYTES = 2 * 1024 * 1024
/** The most a page of runs holds (their goals and outputs), and at least one run. */
export const RUNS_PAGE_MAX_BYTES = 4 * 1024 * 1024

export interface RunEventRow {
  seq: number
  type: string
  data: Record<string, unknown>
  created_at: Date
}

const AGENT = 'id, name, system_prompt, config, created_at, updated_at'

export const agents = tenantRows<AgentRow>('agents', AGENT)
export const selectAgent = agents.byId

export const insertAgent = (
  sql: TxSql,
  tenantId: string,
  a: { id: string; name: string; systemPrompt: string; config: AgentConfig },
): Promise<AgentRow> =>
  agents.insert(sql, tenantId, {
    id: a.id,
    name: a.name,
    system_prompt: a.systemPrompt,
    config: sql.json(a.config as never),
  })

export async function updateAgent(
  sql: TxSql,
  tenantId: string,
  id: string,
  a: { name: string; systemPrompt: string; config: AgentConfig },
): Promise<AgentRow> {
  const row = await agents.update(sql, tenantId, id, {
    name: a.name,
    system_prompt: a.systemPrompt,
    config: sql.json(a.config as never),
  })
  return row!
}

export function deleteAgent(sql: TxSql, tenantId: string, id: string) {
  return sql<AgentRow[]>`delete from agents where tenant_id = ${tenantId} and id = ${id} returning ${sql.unsafe(AGENT)}`
}

/** Agents that have run on a project (a project backup's agents.json), oldest first. */
export function projectAgents(sql: TxSql, tenantId: string, projectId: string) {
  return sql<AgentRow[]>`
    select ${sql.unsafe(AGENT)} from agents a
     where a.tenant_id = ${tenantId}
       and exists (select 1 from agent_runs r where r.tenant_id = ${tenantId} and r.agent_id = a.id and r.project_id = ${projectId})
     order by a.id`
}

/** Serialises the starts of one tenant's runs, so that the limit on runs in progress holds under races. */
export async function lockTenantRuns(sql: TxSql, tenantId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${'atrium.agent-runs:' + tenantId}, 0))`
}

export async function countActiveRuns(sql: TxSql, tenantId: string): Promise<number> {
  const [row] = await sql<
    { n: number }[]
  >`select count(*)::int as n from agent_runs where tenant_id = ${tenantId} and status in ('queued', 'running')`
  return row!.n
}

export async function insertRun(
  sql: TxSql,
  r: {
    id: string
    tenantId: string
    agentId: string
    projectId: string
    goal: string
    snapshot: RunRow['agent_snapshot']
    startedBy: RunRow['started_by']
  },
): Promise<RunRow> {
  const [row] = await sql<RunRow[]>`
    insert into agent_runs (id, tenant_id, agent_id, project_id, goal, status, agent_snapshot, started_by)
    values (${r.id}, ${r.tenantId}, ${r.agentId}, ${r.projectId}, ${r.goal}, 'queued', ${sql.json(r.snapshot as never)}, ${sql.json(r.startedBy as never)})
    returning *`
  return row!
}

// A run's columns but the conversation, the staged files and the steps.
const RUN_BASE =
  'id, tenant_id, agent_id, project_id, goal, status, output, error, usage, agent_snapshot, started_by, job_id, event_seq, project_version, cancel_requested, created_at, started_at, finished_at, updated_at'
/**
 * The steps, bounded where they are read: whole when they fit STEPS_READ_MAX_BYTES (what a run
 * writes always does), else the newest that fit (a record written before the bound held arguments whole).
 */
const BOUNDED_STEPS = `case when octet_length(steps::text) <= ${STEPS_READ_MAX_BYTES} then steps else (
    select coalesce(jsonb_agg(s order by i), '[]'::jsonb)
      from (select s, i, sum(octet_length(s::text)) over (order by i desc) as tail from jsonb_array_elements(steps) with ordinality e(s, i)) kept
     where tail <= ${STEPS_READ_MAX_BYTES}) end as steps`

/** The whole run, conversation included: for the runner, which keeps it within RUN_MAX_CONVERSATION_CHARS. */
export function selectRun(sql: TxSql, tenantId: string, runId: string, opts: { lock?: boolean } = {}) {
  return sql<
    RunRow[]
  >`select * from agent_runs where tenant_id = ${tenantId} and id = ${runId} ${opts.lock ? sql`for update` : sql``}`
}

/** A run's record (steps bounded), without its conversation or staged files. */
export function selectRunRecord(sql: TxSql, tenantId: string, runId: string, opts: { lock?: boolean } = {}) {
  return sql<RunRecord[]>`
    select ${sql.unsafe(RUN_BASE)}, ${sql.unsafe(BOUNDED_STEPS)} from agent_runs
     where tenant_id = ${tenantId} and id = ${runId} ${opts.lock ? sql`for update` : sql``}`
}

/** How much a run keeps: its conversation and steps as JSON text, measured in the database before any of it is read. */
export async function runFootprint(sql: TxSql, tenantId: string, runId: string): Promise<number | null> {
  const [row] = await sql<{ bytes: number }[]>`
    select (octet_length(messages::text) + octet_length(steps::text) + octet_length(pending_files::text))::int as bytes
      from agent_runs where tenant_id = ${tenantId} and id = ${runId}`
  return row?.bytes ?? null
}

/**
 * A page of an agent's runs, newest first, without steps (the record has them): up to `limit` + 1
 * runs (the extra one says there is a next page), and only as many as fit RUNS_PAGE_MAX_BYTES (at
 * least one); `more` is true when the budget cut the page short. Sizes are measured in the
 * database: nothing beyond the budget is read.
 */
/** What a page of runs shows of each (not the agent's snapshot, whose system prompt runs to 100,000 characters). */
export type RunSummaryRow = Pick<
  RunRecord,
  | 'id'
  | 'agent_id'
  | 'project_id'
  | 'goal'
  | 'status'
  | 'output'
  | 'error'
  | 'usage'
  | 'project_version'
  | 'cancel_requested'
  | 'created_at'
  | 'started_at'
  | 'finished_at'
>
const RUN_SUMMARY =
  'id, agent_id, project_id, goal, status, output, error, usage, project_version, cancel_requested, created_at, started_at, finished_at'

export function listRuns(sql: TxSql, tenantId: string, agentId: string, limit: number, before: string | null) {
  return pageWithinBytes<RunSummaryRow>(sql, {
    table: 'agent_runs',
    columns: RUN_SUMMARY,
    where: sql`tenant_id = ${tenantId} and agent_id = ${agentId} ${before ? sql`and id < ${before}` : sql``}`,
    size: 'coalesce(octet_length(output), 0) + octet_length(goal) + coalesce(octet_length(error::text), 0) + 512',
    desc: true,
    limit,
    budget: RUNS_PAGE_MAX_BYTES,
  })
}

/** Active runs of an agent (to cancel their jobs when the agent is deleted). */
export function activeRunJobs(sql: TxSql, tenantId: string, agentId: string) {
  return sql<{ id: string; job_id: string | null }[]>`
    select id, job_id from agent_runs where tenant_id = ${tenantId} and agent_id = ${agentId} and status in ('queued', 'running')`
}

/** Writes the given columns of a run. */
export async function patchRun(
  sql: TxSql,
  tenantId: string,
  runId: string,
  p: Partial<
    Pick<
      RunRow,
      | 'status'
      | 'output'
      | 'error'
      | 'usage'
      | 'steps'
      | 'messages'
      | 'pending_files'
      | 'job_id'
      | 'project_version'
      | 'cancel_requested'
      | 'started_at'
      | 'finished_at'
    >
  >,
): Promise<RunRecord> {
  const json = (v: unknown) => sql.json(v as never)
  const set = {
    ...p,
    ...(p.error !== undefined ? { error: p.error === null ? null : json(p.error) } : {}),
    ...(p.usage ? { usage: json(p.usage) } : {}),
    ...(p.steps ? { steps: json(p.steps) } : {}),
    ...(p.messages ? { messages: json(p.messages) } : {}),
    ...(p.pending_files ? { pending_files: json(p.pending_files) } : {}),
  }
  // The record back, not the conversation it may just have written (megabytes, which no caller needs again).
  const [row] = await sql<RunRecord[]>`
    update agent_runs set ${sql(set as Record<string, unknown>)}, updated_at = now()
     where tenant_id = ${tenantId} and id = ${runId}
    returning ${sql.unsafe(RUN_BASE)}, ${sql.unsafe(BOUNDED_STEPS)}`
  return row!
}

const LOG: LogTables = { owner: 'agent_runs', events: 'agent_run_events', key: 'run_id' }

/** Appends events to a run's stream (numbered from its event_seq); the last number written. */
export const appendRunEvents = (sql: TxSql, tenantId: string, runId: string, events: LoggedEvent[]) =>
  appendLogEvents(sql, LOG, tenantId, runId, events)

export const runEventsAfter = (
  sql: TxSql,
  tenantId: string,
  runId: string,
  after: number,
  limit: number,
): Promise<RunEventRow[]> => logEventsAfter(sql, LOG, tenantId, runId, after, limit)
