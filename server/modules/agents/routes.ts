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
/** The longest a request may wait for its run, and how long it waits when it does not say. */
export const MAX_WAIT_SECONDS = 60
export const DEFAULT_WAIT_SECONDS = 30
const ExecuteQuery = Type.Object(
  {
    wait: Type.Integer({
      minimum: 0,
      maximum: MAX_WAIT_SECONDS,
      default: DEFAULT_WAIT_SECONDS,
      description: `Seconds to wait for the run to end before answering (0 to ${MAX_WAIT_SECONDS}, default ${DEFAULT_WAIT_SECONDS}): 200 with its output once it has, 202 at the bound; 0 answers 202 at once`,
    }),
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
  // A request waiting for its run answers 202 when the server starts closing: a drain waits for in-flight requests.
  const closing = new AbortController()
  app.addHook('preClose', (done) => {
    closing.abort()
    done()
  })

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
        summary: 'Run the agent against a goal in a project: the run with its output (200), or queued or running (202)',
        description: `The run is queued on the job runner, and the request waits for it to end, up to \`wait\` seconds (default ${DEFAULT_WAIT_SECONDS}). Ended in time: 200 with the run record, completed with its output, or failed with its error (or cancelled). Otherwise 202 with the record as it stands (queued or running): follow GET /agents/{id}/runs/{run_id} or its stream. \`wait=0\` answers 202 at once. A waiting request ends early with 202 when the server shuts down; it holds no database connection, and a tenant has at most its plan's runs in progress waiting.`,
        params: IdParams,
        querystring: ExecuteQuery,
        body: ExecuteBody,
        response: {
          200: { ...Envelope(Run), description: 'The run ended within the wait: completed, failed or cancelled' },
          202: {
            ...Envelope(Run),
            description: 'The wait ran out (or wait=0, or the server is closing): queued or running',
          },
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'LLM_NOT_CONFIGURED', 'RUN_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      // Stops waiting when the server closes or the client goes away (nobody to answer then). Listeners removed after,
      // not AbortSignal.any: on the server's long-lived signal it keeps an entry per request on some Node releases.
      const stop = new AbortController()
      const leave = () => stop.abort()
      reply.raw.once('close', leave)
      closing.signal.addEventListener('abort', leave, { once: true })
      try {
        const { run, ended } = await agents.execute(actorOf(req), req.params.id, req.body, {
          waitMs: req.query.wait * 1000,
          signal: stop.signal,
          log: req.log,
        })
        reply.code(ended ? 200 : 202)
        return ok(req, presentRun(run))
      } finally {
        reply.raw.off('close', leave)
        closing.signal.removeEventListener('abort', leave)
      }
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
