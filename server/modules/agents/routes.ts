import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope, IdParams, NonBlankName } from '../../http/schemas.js'
import { byIdSchema, created, deleted, deleteSchema, listSchema, pageOf } from '../../http/route-schemas.js'
import { followEvents, lastEventId, sseRoute } from '../../http/sse.js'
import type { Cache } from '../../platform/cache.js'
import { runChannel } from './runner.js'
import { agentView, DEFAULT_MAX_STEPS, MAX_STEPS, type AgentsService } from './service.js'
import type { RunRecord, RunSummaryRow } from './store.js'
import { TOOL_NAMES } from './tools.js'

const Level = Type.Union([Type.Literal('low'), Type.Literal('medium'), Type.Literal('high')], {
  description:
    'low: answers once, no tools; medium: may read the project (list_files, read_file) and search the web where enabled; high: may also write and delete files',
})
const Tool = Type.Union(
  TOOL_NAMES.map((t) => Type.Literal(t)),
  { description: 'A tool the agent may use; it must be allowed by the autonomy level' },
)
const ConfigFields = {
  autonomyLevel: Level,
  model: Type.Optional(
    Type.Union([Type.String({ maxLength: 200 }), Type.Null()], {
      description: "The model; null or absent: the tenant's LLM settings' model",
    }),
  ),
  temperature: Type.Optional(
    Type.Union([Type.Number({ minimum: 0, maximum: 2 }), Type.Null()], {
      description: "Sampling temperature; null: the provider's default",
    }),
  ),
  maxSteps: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_STEPS,
      description: `Model calls a run may make (default ${DEFAULT_MAX_STEPS})`,
    }),
  ),
  tools: Type.Optional(
    Type.Array(Tool, {
      maxItems: TOOL_NAMES.length,
      uniqueItems: true,
      description: "The tools offered; absent: all of the level's that this deployment has",
    }),
  ),
}
const ConfigBody = Type.Object(ConfigFields, { additionalProperties: false })
const ConfigPatch = Type.Partial(Type.Object(ConfigFields), { additionalProperties: false })
const Config = Type.Object({
  autonomyLevel: Level,
  model: Type.Union([Type.String(), Type.Null()]),
  temperature: Type.Union([Type.Number(), Type.Null()]),
  maxSteps: Type.Integer(),
  tools: Type.Array(Type.String()),
})

const Name = NonBlankName(200)
const SystemPrompt = Type.String({ maxLength: 100_000 })

const Agent = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  systemPrompt: Type.String(),
  config: Config,
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
})

const Usage = Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer() })
const RunError = Type.Union([
  Type.Object({ code: Type.String({ description: 'A code of the error catalog' }), message: Type.String() }),
  Type.Null(),
])
const Step = Type.Object({
  step: Type.Integer(),
  text: Type.String({ description: 'What the model said at this step' }),
  toolCalls: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      arguments: Type.Unknown(),
      result: Type.Optional(Type.String({ description: 'The result, cut to 2,048 characters' })),
      error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
    }),
  ),
  usage: Usage,
})
const RunFields = {
  id: Type.String({ format: 'uuid', description: 'run_id' }),
  agentId: Type.String({ format: 'uuid' }),
  projectId: Type.String({ format: 'uuid' }),
  goal: Type.String(),
  status: Type.Union([
    Type.Literal('queued'),
    Type.Literal('running'),
    Type.Literal('completed'),
    Type.Literal('failed'),
    Type.Literal('cancelled'),
  ]),
  output: Type.Union([Type.String(), Type.Null()], { description: 'The final answer, once completed' }),
  usage: Usage,
  error: RunError,
  projectVersion: Type.Union([Type.Integer(), Type.Null()], {
    description: 'The project version holding the files the run changed; null when it changed none',
  }),
  cancelRequested: Type.Boolean(),
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
}
const Run = Type.Object({
  ...RunFields,
  steps: Type.Array(Step, {
    description:
      'Tool calls with their arguments and results, step by step (the newest 100, up to 1 MiB; long arguments and results cut to 2,048 characters)',
  }),
})
/** A run in a list: its steps are in its record (GET the run), so a page stays small. */
const RunSummary = Type.Object(RunFields)

const presentRunSummary = (r: RunSummaryRow) => ({
  id: r.id,
  agentId: r.agent_id,
  projectId: r.project_id,
  goal: r.goal,
  status: r.status,
  output: r.output,
  usage: r.usage,
  error: r.error,
  projectVersion: r.project_version,
  cancelRequested: r.cancel_requested,
  createdAt: r.created_at.toISOString(),
  startedAt: r.started_at?.toISOString() ?? null,
  finishedAt: r.finished_at?.toISOString() ?? null,
})
const presentRun = (r: RunRecord) => ({ ...presentRunSummary(r), steps: r.steps as never })

const CreateBody = Type.Object(
  { name: Name, systemPrompt: SystemPrompt, config: ConfigBody },
  { additionalProperties: false },
)
const PatchBody = Type.Object(
  { name: Type.Optional(Name), systemPrompt: Type.Optional(SystemPrompt), config: Type.Optional(ConfigPatch) },
  { additionalProperties: false, minProperties: 1 },
)
const ExecuteBody = Type.Object(
  {
    goal: Type.String({ minLength: 1, maxLength: 20_000, pattern: '\\S', description: 'What the agent is to achieve' }),
    projectId: Type.String({ format: 'uuid', description: 'The project whose files it works on' }),
  },
  { additionalProperties: false },
)
const RunParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Agent identifier' }),
  run_id: Type.String({ format: 'uuid' }),
})

const tags = ['agents']
const read: FastifyContextConfig = { permission: 'agents:read' }
const write: FastifyContextConfig = { permission: 'agents:write' }
const run: FastifyContextConfig = { permission: 'agents:run' }

export const agentsRoutes: FastifyPluginAsyncTypebox<{ agents: AgentsService; cache: Cache }> = async (
  app,
  { agents, cache },
) => {
  app.get(
    '/agents',
    { config: read, schema: listSchema(tags, 'List agents, newest first', Agent, 'FORBIDDEN') },
    async (req) => pageOf(req, await agents.list(actorOf(req).tenantId, req.query), agentView),
  )

  app.post(
    '/agents',
    {
      config: write,
      schema: {
        tags,
        summary: 'Create an agent',
        body: CreateBody,
        response: { 201: Envelope(Agent), ...apiErrors('FORBIDDEN', 'FEATURE_DISABLED') },
      },
    },
    async (req, reply) => created(req, reply, agentView(await agents.create(actorOf(req), req.body))),
  )

  app.get(
    '/agents/:id',
    { config: read, schema: byIdSchema(tags, 'Get an agent', Agent, 'FORBIDDEN', 'RESOURCE_NOT_FOUND') },
    async (req) => ok(req, agentView(await agents.get(actorOf(req).tenantId, req.params.id))),
  )

  app.patch(
    '/agents/:id',
    {
      config: write,
      schema: {
        tags,
        summary: 'Change some fields of an agent (runs in progress keep the agent as it was)',
        params: IdParams,
        body: PatchBody,
        response: { 200: Envelope(Agent), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'FEATURE_DISABLED') },
      },
    },
    async (req) => ok(req, agentView(await agents.update(actorOf(req), req.params.id, req.body))),
  )

  app.delete(
    '/agents/:id',
    { config: write, schema: deleteSchema(tags, 'Delete an agent and its runs (runs in progress are cancelled)') },
    async (req) => {
      await agents.remove(actorOf(req), req.params.id)
      return deleted(req, req.params.id)
    },
  )

  app.post(
    '/agents/:id/execute',
    {
      config: run,
      schema: {
        tags,
        summary: 'Run the agent against a goal in a project (queued; 202 with the run record)',
        params: IdParams,
        body: ExecuteBody,
        response: {
          202: Envelope(Run),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'LLM_NOT_CONFIGURED', 'RUN_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      reply.code(202)
      return ok(req, presentRun(await agents.execute(actorOf(req), req.params.id, req.body)))
    },
  )

  app.get(
    '/agents/:id/runs',
    {
      config: read,
      schema: {
        ...listSchema(tags, "List an agent's runs, newest first", RunSummary, 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        description:
          'Runs without their steps (GET a run for them). A page ends early, with a nextCursor, once its goals and outputs reach 4 MiB.',
        params: IdParams,
      },
    },
    async (req) => pageOf(req, await agents.runs(actorOf(req).tenantId, req.params.id, req.query), presentRunSummary),
  )

  app.get(
    '/agents/:id/runs/:run_id',
    {
      config: read,
      schema: {
        tags,
        summary: 'Get a run record',
        params: RunParams,
        response: { 200: Envelope(Run), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, presentRun(await agents.getRun(actorOf(req).tenantId, req.params.id, req.params.run_id))),
  )

  app.post(
    '/agents/:id/runs/:run_id/cancel',
    {
      config: run,
      schema: {
        tags,
        summary:
          'Cancel a run: a queued one at once, a running one at its next moment (202; the record shows cancelRequested)',
        params: RunParams,
        response: { 202: Envelope(Run), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'CONFLICT') },
      },
    },
    async (req, reply) => {
      reply.code(202)
      return ok(req, presentRun(await agents.cancel(actorOf(req), req.params.id, req.params.run_id)))
    },
  )

  app.get(
    '/agents/:id/runs/:run_id/stream',
    {
      config: read,
      schema: {
        tags,
        summary: "Follow a run's events (Server-Sent Events; resumable with Last-Event-ID)",
        description:
          'Events: run.queued, run.started, run.resumed, step.started, output.delta {step, delta}, tool.call {step, id, name, arguments}, tool.result {step, id, name, result | error}, run.completed, run.failed, run.cancelled. Each has an id (its number in the run); a reconnect with Last-Event-ID gets exactly the events after it. The stream ends after the run ends; a comment is sent every 15 s.',
        params: RunParams,
        ...sseRoute,
      },
    },
    async (req, reply) => {
      const { tenantId } = actorOf(req)
      const { id, run_id: runId } = req.params
      const limit = 500
      return followEvents(req, reply, {
        cache,
        channel: runChannel(runId),
        after: lastEventId(req, req.query.lastEventId),
        read: async (after) => {
          const r = await agents.events(tenantId, id, runId, after, limit)
          // Ended once the run has and this read reached its last event (a read may stop short of `limit`, at its byte
          // budget).
          return {
            events: r.events.map((e) => ({ id: e.seq, event: e.type, data: { runId, ...e.data } })),
            ended: r.ended && (r.events.at(-1)?.seq ?? after) >= r.lastSeq,
          }
        },
        onError: (err) => req.log.warn({ err }, 'run stream could not read its events; trying again'),
      })
    },
  )
}
