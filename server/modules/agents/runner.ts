// Executes agent runs on the job runner (queue 'agents.run'). A run is a loop of steps: the model is
// called with the conversation so far and the tools the agent's level allows; the tool calls it
// makes are run and their results handed back, until it answers without calling a tool. Every
// step ends with the run's state written (conversation, steps, usage, staged file changes) and its
// events appended, so:
// - a run whose replica died is taken again by another once the job's lease runs out, and resumes
//   from its last completed step (the interrupted step's deltas are superseded: 'run.resumed' says
//   so); after MAX_RESUMES such takeovers it fails with RUN_INTERRUPTED rather than loop forever;
// - a run never stays 'running': the job ends it completed, failed (with a reason from the error
//   catalog) or cancelled;
// - the state change and its webhook event (agent.started, agent.completed, agent.failed) commit
//   together, so each is announced exactly once.
import { Counter, type Registry } from 'prom-client'
import type { Clock } from '../../clock.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, type ErrorCode } from '../../domain/errors.js'
import { sliceText } from '../../domain/text.js'
import type { Plan } from '../../domain/plans.js'
import type { Cache } from '../../platform/cache.js'
import type { Db } from '../../platform/db.js'
import { eventLogWriter } from '../../platform/event-log.js'
import { named } from '../../platform/metrics.js'
import { JobCancelled, JobFailure, type Job } from '../../platform/jobs.js'
import type { Llm, LlmMessage, LlmTarget } from '../../platform/llm.js'
import { audit } from '../audit/service.js'
import { emitEvent } from '../outbox/service.js'
import { STAGE_HOLD_MS, type FileChange, type ProjectFilesService } from '../projects/files-service.js'
import * as store from './store.js'
import type { RunRecord, RunRow, RunUsage } from './store.js'
import {
  ARGUMENT_EXCERPT_CHARS,
  offeredTools,
  RESULT_EXCERPT_CHARS,
  runTool,
  Workspace,
  type ToolEnvironment,
} from './tools.js'

export const RUN_QUEUE = 'agents.run'
/** Takeovers after a lost worker before the run is failed: a run that kills its worker must not loop. */
export const MAX_RESUMES = 3
/** Wall-clock budget of a run, from its start. */
export const RUN_TIME_LIMIT_MS = 15 * 60_000
/** Tokens (input and output, every step) a run may use. */
export const RUN_TOKEN_LIMIT = 1_000_000
/** Steps the run record keeps (the newest); maxSteps is at most 50, so only a resumed run's trail is cut. */
const STEPS_KEPT = 100
/** The steps' record (JSON) is kept within this too, the newest steps first. */
export const STEPS_MAX_CHARS = 1024 * 1024
/**
 * Tool calls one step may make: a model that asks for more is broken or hostile, and the run fails
 * AGENT_TOOL_CALL_LIMIT.
 */
export const STEP_MAX_TOOL_CALLS = 64
/**
 * The conversation a run keeps and sends back to the model with every step (JSON characters).
 * Above any model's context window (a million tokens is some 4 million characters), so only a run
 * that can no longer be answered reaches it: it fails AGENT_MEMORY_LIMIT instead of holding more.
 */
export const RUN_MAX_CONVERSATION_CHARS = 4 * 1024 * 1024
/** What a stored run may hold, measured before it is read (a run written before these bounds may exceed it). */
const RUN_MAX_STORED_BYTES = 3 * (RUN_MAX_CONVERSATION_CHARS + STEPS_MAX_CHARS) + 1024 * 1024
/** A step's text in the record (the final answer is kept whole, as the run's output). */
const STEP_TEXT_MAX_CHARS = 16 * 1024
/** Output deltas are written together at most this often: one row per burst, not per token. */
const DELTA_FLUSH_MS = 100

export const runChannel = (runId: string) => `atrium:agent-run:${runId}`
export const TERMINAL = new Set(['completed', 'failed', 'cancelled'])
/** The events that end a run's log (run.completed, run.failed, run.cancelled): their message says so. */
export const RUN_END_EVENTS: ReadonlySet<string> = new Set([...TERMINAL].map((status) => `run.${status}`))

export interface StepRecord {
  step: number
  text: string
  toolCalls: {
    id: string
    name: string
    arguments: unknown
    result?: string
    error?: { code: string; message: string }
  }[]
  usage: RunUsage
}

/** A run's public shape in webhook payloads (no conversation, no staged files). */
export const runSummary = (r: RunRecord) => ({
  runId: r.id,
  agentId: r.agent_id,
  projectId: r.project_id,
  status: r.status,
  goal: r.goal,
  output: r.output,
  error: r.error,
  usage: r.usage,
  projectVersion: r.project_version,
  startedAt: r.started_at?.toISOString() ?? null,
  finishedAt: r.finished_at?.toISOString() ?? null,
})

/**
 * The event that ends a run cancelled before it started (by the cancel route, or found by the worker that claimed it).
 */
export const cancelledEvent = (r: Pick<RunRow, 'usage'>): [string, Record<string, unknown>] => [
  'run.cancelled',
  { status: 'cancelled', output: null, error: null, usage: r.usage, projectVersion: null },
]

/** The actor a run acts as when it writes files: whoever started it, from no address. */
export function runActor(r: Pick<RunRow, 'tenant_id' | 'started_by'>): Actor {
  const s = r.started_by as RunRow['started_by'] & { plan?: Plan }
  return {
    tenantId: r.tenant_id,
    principal: {
      kind: s.kind,
      id: s.id,
      tenantId: r.tenant_id,
      plan: s.plan ?? 'free',
      userId: s.userId,
      role: null,
      sessionId: null,
      permissions: new Set(),
    },
    origin: { ip: '', userAgent: 'atrium agent run' },
  }
}

export interface RunnerDeps {
  db: Db
  cache: Cache
  llm: Llm
  connection: (tenantId: string) => Promise<LlmTarget>
  files: ProjectFilesService
  env: ToolEnvironment
  now: Clock
  /** Where atrium_agent_runs_finished_total is counted (none: not counted). */
  registry?: Registry
}

/** A run's event log: state changes in their transactions, output deltas every DELTA_FLUSH_MS. */
const runEvents = (deps: RunnerDeps, run: Pick<RunRecord, 'id' | 'tenant_id'>) =>
  eventLogWriter<number>({
    db: deps.db,
    cache: deps.cache,
    tenantId: run.tenant_id,
    channel: runChannel(run.id),
    append: (sql, events) => store.appendRunEvents(sql, run.tenant_id, run.id, events),
    flushMs: DELTA_FLUSH_MS,
    deltaEvent: (step, text) => ({ type: 'output.delta', data: { step, delta: text } }),
    ends: RUN_END_EVENTS,
  })

const initialMessages = (r: RunRow): LlmMessage[] => [
  ...(r.agent_snapshot.systemPrompt ? [{ role: 'system' as const, content: r.agent_snapshot.systemPrompt }] : []),
  { role: 'user', content: r.goal },
]

const cut = (s: string, max: number) =>
  s.length > max ? `${sliceText(s, max)}… [${s.length - max} more characters]` : s
const excerpt = (v: unknown) => cut(typeof v === 'string' ? v : JSON.stringify(v), RESULT_EXCERPT_CHARS)

/**
 * A tool call's arguments as the record, the events and the conversation keep them: small ones
 * whole, long strings in them cut (a write_file's content is in the file, not in the run), and
 * anything still large as the start of its JSON.
 */
export function keptArguments(v: unknown): unknown {
  const json = JSON.stringify(v) ?? ''
  if (json.length <= ARGUMENT_EXCERPT_CHARS) return v
  const shortened = (x: unknown): unknown =>
    typeof x === 'string'
      ? cut(x, ARGUMENT_EXCERPT_CHARS / 2)
      : Array.isArray(x)
        ? x.map(shortened)
        : x && typeof x === 'object'
          ? Object.fromEntries(Object.entries(x).map(([k, y]) => [k, shortened(y)]))
          : x
  const kept = shortened(v)
  return (JSON.stringify(kept) ?? '').length <= 2 * ARGUMENT_EXCERPT_CHARS ? kept : cut(json, ARGUMENT_EXCERPT_CHARS)
}

/** The newest steps within STEPS_KEPT and STEPS_MAX_CHARS (the last one always). */
function keptSteps(steps: StepRecord[]): StepRecord[] {
  const kept = steps.slice(-STEPS_KEPT)
  let chars = kept.reduce((n, st) => n + JSON.stringify(st).length, 0)
  while (kept.length > 1 && chars > STEPS_MAX_CHARS) chars -= JSON.stringify(kept.shift()).length
  return kept
}

const sizeOf = (m: LlmMessage) => JSON.stringify(m).length

export function agentRunner(deps: RunnerDeps) {
  const { db } = deps
  const finishedRuns = new Counter({
    ...named('atrium_agent_runs_finished_total', deps.registry),
    help: 'Agent runs this replica ended, by status (completed, failed, cancelled)',
    labelNames: ['status'] as const,
  })

  /**
   * Ends a run in one transaction with its events, its webhook event and its audit entry: the status it ended with, or
   * null when it had already ended.
   */
  async function finish(
    run: RunRecord,
    events: ReturnType<typeof runEvents>,
    end: {
      status: 'completed' | 'failed' | 'cancelled'
      output?: string | null
      error?: { code: string; message: string } | null
      steps?: StepRecord[]
      usage?: RunUsage
      changes?: FileChange[]
    },
  ): Promise<RunRecord['status'] | null> {
    const done = await events.commit(async (sql) => {
      const [current] = await store.selectRunRecord(sql, run.tenant_id, run.id, { lock: true })
      if (!current || TERMINAL.has(current.status)) return null
      // A cancel asked for while the last step ran wins over its outcome.
      const status = end.status === 'completed' && current.cancel_requested ? 'cancelled' : end.status
      let projectVersion: number | null = null
      if (status === 'completed' && end.changes?.length)
        projectVersion = (await deps.files.apply(sql, runActor(current), current.project_id, end.changes)).version
      const saved = await store.patchRun(sql, run.tenant_id, run.id, {
        status,
        output: status === 'completed' ? (end.output ?? '') : null,
        error: status === 'failed' ? (end.error ?? null) : null,
        ...(end.steps ? { steps: keptSteps(end.steps) } : {}),
        ...(end.usage ? { usage: end.usage } : {}),
        pending_files: [],
        project_version: projectVersion,
        finished_at: new Date(deps.now()),
      })
      events.push(`run.${status}`, {
        status,
        output: saved.output,
        error: saved.error,
        usage: saved.usage,
        projectVersion,
      })
      // A run that never started announces nothing; one that did ends with completed or failed (a cancel is a failure
      // with that reason).
      if (current.status === 'running') {
        await emitEvent(sql, {
          tenantId: run.tenant_id,
          type: status === 'completed' ? 'agent.completed' : 'agent.failed',
          data: { ...runSummary(saved), ...(status === 'cancelled' ? { reason: 'cancelled' } : {}) },
        })
      }
      await audit(sql, {
        tenantId: run.tenant_id,
        actor: { type: 'system', id: null },
        action: 'agent.run_finished',
        target: { type: 'agent_run', id: run.id },
        details: {
          agentId: run.agent_id,
          projectId: run.project_id,
          status,
          ...(saved.error ? { code: saved.error.code } : {}),
          projectVersion,
        },
      })
      return saved
    })
    if (done) finishedRuns.inc({ status: done.status })
    return done?.status ?? null
  }

  const failWith = (code: ErrorCode, message: string) => ({ status: 'failed' as const, error: { code, message } })

  async function handle(job: Job<{ runId: string }>): Promise<void> {
    const tenantId = job.tenantId!
    const runId = job.payload.runId
    const [record, footprint] = await db.tenant(
      tenantId,
      async (sql) =>
        [
          (await store.selectRunRecord(sql, tenantId, runId))[0],
          await store.runFootprint(sql, tenantId, runId),
        ] as const,
    )
    if (!record || TERMINAL.has(record.status)) return
    const events = runEvents(deps, record)
    try {
      // Measured before it is read: a run stored larger than a run may keep (written before these
      // bounds) ends here rather than be loaded, over and over, by every worker that takes it.
      if (footprint !== null && footprint > RUN_MAX_STORED_BYTES) {
        await finish(
          record,
          events,
          failWith(
            'AGENT_MEMORY_LIMIT',
            `the run's stored state is ${footprint} bytes; a run may keep ${RUN_MAX_STORED_BYTES}`,
          ),
        )
        return
      }
      await execute(job, record, events)
    } finally {
      events.stop()
    }
  }

  async function execute(
    job: Job<{ runId: string }>,
    loaded: RunRecord,
    events: ReturnType<typeof runEvents>,
  ): Promise<void> {
    const tenantId = loaded.tenant_id
    if (job.attempt > MAX_RESUMES + 1) {
      await finish(
        loaded,
        events,
        failWith(
          'RUN_INTERRUPTED',
          `the run was interrupted ${job.attempt - 1} times (its worker stopped) and is not tried again`,
        ),
      )
      return
    }

    // Start, or take over from a worker that stopped.
    const run = await events.commit(async (sql): Promise<RunRow | null> => {
      const [r] = await store.selectRun(sql, tenantId, loaded.id, { lock: true })
      if (!r || TERMINAL.has(r.status)) return null
      if (r.status === 'queued' && r.cancel_requested) {
        // Cancelled while this worker was claiming it: it ends without having started.
        const saved = await store.patchRun(sql, tenantId, r.id, {
          status: 'cancelled',
          finished_at: new Date(deps.now()),
        })
        events.push(...cancelledEvent(saved))
        return null
      }
      if (r.status === 'queued') {
        const started = await store.patchRun(sql, tenantId, r.id, {
          status: 'running',
          started_at: new Date(deps.now()),
        })
        events.push('run.started', { status: 'running' })
        await emitEvent(sql, { tenantId, type: 'agent.started', data: runSummary(started) })
        return { ...r, ...started }
      }
      events.push('run.resumed', { attempt: job.attempt, step: r.steps.length + 1 })
      return r
    })
    if (!run) return

    const snapshot = run.agent_snapshot
    const messages: LlmMessage[] = run.messages.length ? (run.messages as LlmMessage[]) : initialMessages(run)
    /** The conversation's size, kept up to date as it grows. */
    let conversation = messages.reduce((n, m) => n + sizeOf(m), 0)
    const overBudget = () =>
      failWith(
        'AGENT_MEMORY_LIMIT',
        `the run's conversation reached ${conversation} characters; a run may keep ${RUN_MAX_CONVERSATION_CHARS} (fewer or smaller tool results help)`,
      )
    const steps = [...(run.steps as StepRecord[])]
    const usage: RunUsage = { ...run.usage }
    // What it stages is kept for as long as the run may last, and a while after (a worker that dies mid-run).
    const workspace = new Workspace(
      deps.files,
      runActor(run),
      run.project_id,
      run.pending_files as FileChange[],
      RUN_TIME_LIMIT_MS + STAGE_HOLD_MS,
    )
    /**
     * Ends the run; what it staged goes unless its changes were applied (a run that did not complete changes nothing).
     */
    const end = async (e: Parameters<typeof finish>[2]) => {
      const status = await finish(run, events, e)
      if (status === 'completed') await workspace.releaseSuperseded()
      else if (status) await workspace.discard()
    }
    const deadline = (run.started_at ?? new Date(deps.now())).getTime() + RUN_TIME_LIMIT_MS

    let target: LlmTarget
    try {
      target = await deps.connection(tenantId)
      deps.llm.checkConfigured(target, snapshot.config.model ?? undefined)
    } catch (err) {
      if (err instanceof AppError && err.status < 500) return void (await end(failWith(err.code, err.message)))
      throw err
    }
    const tools = offeredTools(snapshot.config.autonomyLevel, snapshot.config.tools, deps.env)
    if (conversation > RUN_MAX_CONVERSATION_CHARS) return void (await end({ ...overBudget(), steps, usage }))

    for (;;) {
      if (steps.length >= snapshot.config.maxSteps) {
        await end({
          ...failWith(
            'AGENT_STEP_LIMIT',
            `the run used all ${snapshot.config.maxSteps} of its steps without a final answer`,
          ),
          steps,
          usage,
        })
        return
      }
      if (usage.inputTokens + usage.outputTokens >= RUN_TOKEN_LIMIT) {
        await end({
          ...failWith(
            'AGENT_TOKEN_LIMIT',
            `the run used ${usage.inputTokens + usage.outputTokens} tokens; the limit is ${RUN_TOKEN_LIMIT}`,
          ),
          steps,
          usage,
        })
        return
      }
      const left = deadline - deps.now()
      if (left <= 0) {
        await end({
          ...failWith('AGENT_TIME_LIMIT', `the run took longer than ${RUN_TIME_LIMIT_MS / 60_000} minutes`),
          steps,
          usage,
        })
        return
      }

      const step = steps.length + 1
      events.push('step.started', { step })
      const timeUp = AbortSignal.timeout(left)
      let response: Awaited<ReturnType<Llm['complete']>>
      try {
        response = await deps.llm.complete({
          tenantId,
          target,
          messages,
          tools,
          ...(snapshot.config.model ? { model: snapshot.config.model } : {}),
          ...(snapshot.config.temperature !== null ? { temperature: snapshot.config.temperature } : {}),
          signal: AbortSignal.any([job.signal, timeUp]),
          onDelta: (text) => events.delta(step, text),
          maxToolCalls: STEP_MAX_TOOL_CALLS,
        })
      } catch (err) {
        if (job.signal.aborted) {
          if (job.signal.reason instanceof JobCancelled) return void (await end({ status: 'cancelled', steps, usage }))
          throw err // the replica is stopping or lost the lease: the job is handed back and resumed
        }
        if (timeUp.aborted)
          return void (await end({
            ...failWith('AGENT_TIME_LIMIT', `the run took longer than ${RUN_TIME_LIMIT_MS / 60_000} minutes`),
            steps,
            usage,
          }))
        if (err instanceof AppError && err.code === 'LLM_RESPONSE_TOO_LARGE' && err.details.limit === 'toolCalls') {
          return void (await end({
            ...failWith(
              'AGENT_TOOL_CALL_LIMIT',
              `the model asked for more than ${STEP_MAX_TOOL_CALLS} tool calls in one step`,
            ),
            steps,
            usage,
          }))
        }
        // The provider's answer, mapped to the catalog by the LLM layer (after its own retries).
        if (err instanceof AppError && err.code !== 'SERVICE_UNAVAILABLE')
          return void (await end({ ...failWith(err.code, err.message), steps, usage }))
        throw err
      }
      usage.inputTokens += response.usage.inputTokens
      usage.outputTokens += response.usage.outputTokens
      const record: StepRecord = {
        step,
        text: cut(response.text, STEP_TEXT_MAX_CHARS),
        toolCalls: [],
        usage: response.usage,
      }

      if (!response.toolCalls.length) {
        steps.push(record)
        try {
          await end({ status: 'completed', output: response.text, steps, usage, changes: workspace.changes() })
        } catch (err) {
          // The changes cannot become a version (the project's quota, a file deleted meanwhile): the run fails saying
          // why.
          if (!(err instanceof AppError) || err.status >= 500) throw err
          await end({
            ...failWith(err.code, `the run's file changes could not be saved: ${err.message}`),
            steps,
            usage,
          })
        }
        return
      }

      // The calls as the run keeps them (long arguments cut); each runs with its arguments whole.
      const kept = response.toolCalls.map((c) => ({ ...c, arguments: keptArguments(c.arguments) }))
      const said: LlmMessage = { role: 'assistant', content: response.text, toolCalls: kept }
      conversation += sizeOf(said)
      if (conversation > RUN_MAX_CONVERSATION_CHARS) return void (await end({ ...overBudget(), steps, usage }))
      messages.push(said)
      for (const [i, call] of response.toolCalls.entries()) {
        if (job.signal.aborted) break
        const args = kept[i]!.arguments
        events.push('tool.call', { step, id: call.id, name: call.name, arguments: args })
        const result = await runTool(call, { allowed: tools, workspace, env: deps.env, signal: job.signal })
        const outcome = result.ok ? { result: excerpt(result.value) } : { error: result.error }
        events.push('tool.result', { step, id: call.id, name: call.name, ...outcome })
        const answer: LlmMessage = {
          role: 'tool',
          toolCallId: call.id,
          toolName: call.name,
          content: JSON.stringify(result.ok ? result.value : { error: result.error }),
        }
        conversation += sizeOf(answer)
        // Over the budget: the step is not kept, so the run ends as of its last completed one.
        if (conversation > RUN_MAX_CONVERSATION_CHARS) return void (await end({ ...overBudget(), steps, usage }))
        messages.push(answer)
        record.toolCalls.push({ id: call.id, name: call.name, arguments: args, ...outcome })
      }
      if (job.signal.aborted) {
        if (job.signal.reason instanceof JobCancelled) return void (await end({ status: 'cancelled', steps, usage }))
        throw new JobFailure('the run was interrupted between tool calls; it resumes from its last completed step')
      }
      steps.push(record)

      // The step is done: its state and events commit together; a takeover resumes after it.
      const still = await events.commit(async (sql) => {
        const [current] = await store.selectRunRecord(sql, tenantId, run.id, { lock: true })
        if (!current || TERMINAL.has(current.status)) return false
        await store.patchRun(sql, tenantId, run.id, {
          messages,
          steps: keptSteps(steps),
          usage,
          pending_files: workspace.changes(),
        })
        return true
      })
      if (!still) return // cancelled while queued-to-cancel, or deleted
      // Saved: what the step wrote over or deleted of the run's own staged files can go now.
      await workspace.releaseSuperseded()
    }
  }

  return { handle }
}
