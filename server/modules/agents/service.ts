// Agent rules: an agent is a system prompt and a configuration (autonomy level, model, temperature,
// steps, tools); a run executes it against a goal in a project, on the job runner. Starting a run
// checks everything that can be checked at once (the agent and project are the tenant's, the LLM
// settings are complete, the plan's limit on runs in progress), so a bad request is refused then
// rather than failing later.
import { newId } from '../../../common/ids.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, invalid, notFound } from '../../domain/errors.js'
import { decodeIdCursor, toBoundedPage } from '../../domain/pagination.js'
import { PLAN_TERMS } from '../../domain/plans.js'
import { planOf } from '../../domain/principal.js'
import { isForeignKeyViolation, tenantReads, type Db, type TxSql } from '../../platform/db.js'
import { cancelJob, enqueueJob } from '../../platform/jobs.js'
import type { Llm, LlmTarget } from '../../platform/llm.js'
import type { Cache } from '../../platform/cache.js'
import type { BaseLogger } from 'pino'
import { auditBy } from '../audit/service.js'
import { cancelledEvent, MAX_RESUMES, RUN_QUEUE, runChannel, TERMINAL } from './runner.js'
import { logEnd, writtenMessage } from '../../platform/event-log.js'
import * as store from './store.js'
import type { AgentConfig, AgentRow, AutonomyLevel, RunRecord, RunRow } from './store.js'
import { LEVEL_TOOLS, TOOL_NAMES, toolUnavailable, type ToolEnvironment, type ToolName } from './tools.js'

export const DEFAULT_MAX_STEPS = 10
export const MAX_STEPS = 50

export interface PageRequest {
  limit: number
  cursor?: string
}

export interface ConfigInput {
  autonomyLevel: AutonomyLevel
  model?: string | null
  temperature?: number | null
  maxSteps?: number
  tools?: string[]
}
export interface CreateInput {
  name: string
  systemPrompt: string
  config: ConfigInput
}
export interface PatchInput {
  name?: string
  systemPrompt?: string
  config?: Partial<ConfigInput>
}

/** An agent as the API (and a backup's agents.json) shows it. */
export const agentView = (a: AgentRow) => ({
  id: a.id,
  name: a.name,
  systemPrompt: a.system_prompt,
  config: a.config,
  createdAt: a.created_at.toISOString(),
  updatedAt: a.updated_at.toISOString(),
})

export function agentsService(deps: {
  db: Db
  llm: Llm
  connection: (tenantId: string) => Promise<LlmTarget>
  env: Pick<ToolEnvironment, 'airGapped' | 'webSearchUrl'>
  /** Tells the run's streams on every replica that it has new events. */
  publish: (channel: string, message: string) => Promise<unknown>
  /** Hears those messages: a request waiting for a run's end listens for it. */
  subscribe: Cache['subscribe']
}) {
  const { db } = deps

  const found = <T>(what: string, id: string, rows: readonly T[]) => {
    if (!rows[0]) throw notFound(what, id)
    return rows[0]
  }

  /** The configuration as stored: defaults filled in, tools within the level and available here. */
  function checkConfig(c: ConfigInput): AgentConfig {
    const allowed = LEVEL_TOOLS[c.autonomyLevel]
    const tools = c.tools ?? allowed.filter((t) => !toolUnavailable(t, deps.env))
    for (const t of tools) {
      if (!(TOOL_NAMES as readonly string[]).includes(t))
        throw invalid('config.tools', `${t} is not a tool; the tools are ${TOOL_NAMES.join(', ')}`)
      if (!allowed.includes(t as ToolName))
        throw invalid(
          'config.tools',
          `${t} needs a higher autonomy level than ${c.autonomyLevel} (${c.autonomyLevel} allows ${allowed.join(', ') || 'no tools'})`,
        )
      const off = toolUnavailable(t as ToolName, deps.env)
      if (off) {
        throw new AppError('FEATURE_DISABLED', `${t} is turned off on this deployment (${off.setting})`, {
          feature: t,
          reason: off.reason,
          setting: off.setting,
          field: 'config.tools',
        })
      }
    }
    return {
      autonomyLevel: c.autonomyLevel,
      model: c.model?.trim() || null,
      temperature: c.temperature ?? null,
      maxSteps: c.maxSteps ?? DEFAULT_MAX_STEPS,
      tools: [...new Set(tools)],
    }
  }

  const loadRun = async (sql: TxSql, tenantId: string, agentId: string, runId: string, lock = false) => {
    const run = found('run', runId, await store.selectRunRecord(sql, tenantId, runId, { lock }))
    if (run.agent_id !== agentId) throw notFound('run', runId)
    return run
  }

  /** Queues run `id`, within the plan's runs in progress: its record, queued. */
  async function queueRun(
    a: Actor,
    agentId: string,
    input: { goal: string; projectId: string },
    agent: AgentRow,
    id: string,
  ): Promise<RunRecord> {
    const { goal } = input
    const limit = PLAN_TERMS[planOf(a.principal)].limits.concurrentRuns
    try {
      return await db.tenant(a.tenantId, async (sql) => {
        await store.lockTenantRuns(sql, a.tenantId)
        const active = await store.countActiveRuns(sql, a.tenantId)
        if (active >= limit) {
          throw new AppError(
            'RUN_LIMIT_EXCEEDED',
            `the ${planOf(a.principal)} plan allows ${limit} agent runs in progress at once; wait for one to finish`,
            { limit, active },
          )
        }
        const run = await store.insertRun(sql, {
          id,
          tenantId: a.tenantId,
          agentId,
          projectId: input.projectId,
          goal,
          snapshot: { name: agent.name, systemPrompt: agent.system_prompt, config: agent.config },
          startedBy: {
            kind: a.principal.kind,
            id: a.principal.id,
            userId: a.principal.userId,
            plan: planOf(a.principal),
          } as RunRow['started_by'],
        })
        // Attempts beyond the takeovers let the handler itself fail a run that keeps losing its worker.
        const jobId = await enqueueJob(
          sql,
          RUN_QUEUE,
          { runId: run.id },
          { tenantId: a.tenantId, maxAttempts: MAX_RESUMES + 2 },
        )
        await store.appendRunEvents(sql, a.tenantId, run.id, [
          { type: 'run.queued', data: { status: 'queued', goal, projectId: input.projectId } },
        ])
        await auditBy(sql, a, {
          action: 'agent.run_started',
          target: { type: 'agent_run', id: run.id },
          details: { agentId, projectId: input.projectId },
        })
        return store.patchRun(sql, a.tenantId, run.id, { job_id: jobId })
      })
    } catch (err) {
      // The composite keys: a project that is not the tenant's, or the agent deleted meanwhile.
      if (isForeignKeyViolation(err, 'agent_runs_tenant_id_project_id_fkey')) throw notFound('project', input.projectId)
      if (isForeignKeyViolation(err, 'agent_runs_tenant_id_agent_id_fkey')) throw notFound('agent', agentId)
      throw err
    }
  }

  return {
    ...tenantReads(db, 'agent', store.agents),

    create: (a: Actor, input: CreateInput) => {
      const config = checkConfig(input.config)
      return db.tenant(a.tenantId, async (sql) => {
        const agent = await store.insertAgent(sql, a.tenantId, {
          id: newId(),
          name: input.name.trim(),
          systemPrompt: input.systemPrompt,
          config,
        })
        await auditBy(sql, a, {
          action: 'agent.created',
          target: { type: 'agent', id: agent.id },
          details: { name: agent.name, autonomyLevel: config.autonomyLevel, tools: config.tools },
        })
        return agent
      })
    },

    update: (a: Actor, id: string, patch: PatchInput) =>
      db.tenant(a.tenantId, async (sql) => {
        const current = found('agent', id, await store.selectAgent(sql, a.tenantId, id, { lock: true }))
        // A new level without a tool list takes that level's tools; tools within the old level stay otherwise.
        const levelChanged =
          patch.config?.autonomyLevel !== undefined && patch.config.autonomyLevel !== current.config.autonomyLevel
        const config = checkConfig({
          ...current.config,
          ...(levelChanged && patch.config?.tools === undefined ? { tools: undefined } : {}),
          ...patch.config,
        } as ConfigInput)
        const next = {
          name: patch.name?.trim() ?? current.name,
          systemPrompt: patch.systemPrompt ?? current.system_prompt,
          config,
        }
        const changed = [
          ...(next.name !== current.name ? ['name'] : []),
          ...(next.systemPrompt !== current.system_prompt ? ['systemPrompt'] : []),
          ...(Object.keys(config) as (keyof AgentConfig)[])
            .filter((k) => JSON.stringify(config[k]) !== JSON.stringify(current.config[k]))
            .map((k) => `config.${k}`),
        ]
        if (!changed.length) return current
        const agent = await store.updateAgent(sql, a.tenantId, id, next)
        await auditBy(sql, a, { action: 'agent.updated', target: { type: 'agent', id }, details: { fields: changed } })
        return agent
      }),

    /** Deletes the agent and its runs; runs in progress are cancelled first. */
    remove: (a: Actor, id: string) =>
      db.tenant(a.tenantId, async (sql) => {
        found('agent', id, await store.selectAgent(sql, a.tenantId, id, { lock: true }))
        for (const r of await store.activeRunJobs(sql, a.tenantId, id)) if (r.job_id) await cancelJob(sql, r.job_id)
        await store.deleteAgent(sql, a.tenantId, id)
        await auditBy(sql, a, { action: 'agent.deleted', target: { type: 'agent', id } })
      }),

    /**
     * Queues a run, then waits up to `o.waitMs` for it to end: `ended` says whether it did (the
     * record then has its output, or its error). The wait listens for the run's end on the channel
     * of its event log, subscribed before the run is queued, and reads the run once: when the end
     * is heard, at the bound, or when `o.signal` aborts (the server draining, the client gone). It
     * holds no database connection meanwhile.
     */
    async execute(
      a: Actor,
      agentId: string,
      input: { goal: string; projectId: string },
      o: { waitMs?: number; signal?: AbortSignal; log?: Pick<BaseLogger, 'warn'> } = {},
    ): Promise<{ run: RunRecord; ended: boolean }> {
      const goal = input.goal.trim()
      if (!goal) throw invalid('goal', 'must not be blank')
      // Outside the transaction: the settings are read (and the key unsealed) in one of their own.
      const agent = await this.get(a.tenantId, agentId)
      deps.llm.checkConfigured(await deps.connection(a.tenantId), agent.config.model ?? undefined)
      const id = newId()
      const end = o.waitMs ? await logEnd({ subscribe: deps.subscribe }, runChannel(id)) : null
      try {
        const run = await queueRun(a, agentId, { ...input, goal }, agent, id)
        if (!end) return { run, ended: false }
        await end.until(o.waitMs!, o.signal)
        try {
          const now = await this.getRun(a.tenantId, agentId, id)
          return { run: now, ended: TERMINAL.has(now.status) }
        } catch (err) {
          // The run is queued whatever this read met (the database away, the agent deleted meanwhile): its record as
          // queued names what to follow, where an error would have the client start another.
          o.log?.warn({ err, runId: id }, 'the run could not be read at the end of its wait; answered as queued')
          return { run, ended: false }
        }
      } finally {
        await end?.close()
      }
    },

    getRun: async (tenantId: string, agentId: string, runId: string) =>
      db.tenant(tenantId, (sql) => loadRun(sql, tenantId, agentId, runId)),

    async runs(tenantId: string, agentId: string, page: PageRequest) {
      const before = decodeIdCursor(page.cursor)
      const fetched = await db.tenant(tenantId, async (sql) => {
        found('agent', agentId, await store.selectAgent(sql, tenantId, agentId))
        return store.listRuns(sql, tenantId, agentId, page.limit + 1, before)
      })
      return toBoundedPage(fetched, page.limit, (r) => r.id)
    },

    /**
     * Cancels a run: a queued one at once; a running one is asked to stop (its model call is
     * aborted, and it ends cancelled with nothing of its staged changes applied). A finished run is
     * a CONFLICT.
     */
    cancel: async (a: Actor, agentId: string, runId: string) => {
      const { run, written } = await db.tenant(a.tenantId, async (sql) => {
        const run = await loadRun(sql, a.tenantId, agentId, runId, true)
        if (TERMINAL.has(run.status))
          throw new AppError('CONFLICT', `run ${runId} has already ended (${run.status})`, { status: run.status })
        const outcome = run.job_id ? await cancelJob(sql, run.job_id) : 'cancelled'
        await auditBy(sql, a, {
          action: 'agent.run_cancelled',
          target: { type: 'agent_run', id: runId },
          details: { agentId, status: run.status },
        })
        if (outcome === 'requested' || (outcome === null && run.status === 'running'))
          return { run: await store.patchRun(sql, a.tenantId, runId, { cancel_requested: true }), written: null }
        // Never started: it ends here, with nothing to announce to webhooks.
        const saved = await store.patchRun(sql, a.tenantId, runId, {
          status: 'cancelled',
          cancel_requested: true,
          finished_at: new Date(),
        })
        const [type, data] = cancelledEvent(saved)
        return { run: saved, written: await store.appendRunEvents(sql, a.tenantId, runId, [{ type, data }]) }
      })
      // The number of the event just written, the run's end: a stream that has everything before it reads it now, not
      // at its next poll, and a request waiting for the end answers.
      if (written !== null) await deps.publish(runChannel(runId), writtenMessage(written, true))
      return run
    },

    /** A run's events after `after` (the stream's backlog and each catch-up), and whether the run has ended. */
    events: (tenantId: string, agentId: string, runId: string, after: number, limit = 500) =>
      db.tenant(tenantId, async (sql) => {
        const run = await loadRun(sql, tenantId, agentId, runId)
        return {
          events: await store.runEventsAfter(sql, tenantId, runId, after, limit),
          ended: TERMINAL.has(run.status),
          lastSeq: run.event_seq,
        }
      }),

    /** The agents that have run on a project, for its backup's agents.json. */
    projectAgents: async (sql: TxSql, tenantId: string, projectId: string) =>
      (await store.projectAgents(sql, tenantId, projectId)).map(agentView),
  }
}

export type AgentsService = ReturnType<typeof agentsService>
