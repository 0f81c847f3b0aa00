// 'atrium-agents': agents and their runs under /api/v1, the runs executing on the job runner
// (queue 'agents.run'), and the agents of a project for its backups (`app.projectAgents`, which
// the projects plugin hands to its backups).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { TxSql } from '../../platform/db.js'
import { outboundFetch } from '../../platform/outbound.js'
import { projectFilesService } from '../projects/files-service.js'
import { agentsRoutes } from './routes.js'
import { agentRunner, RUN_QUEUE } from './runner.js'
import { agentsService } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The agents that have run on a project, as a project backup's agents.json lists them. */
    projectAgents: (sql: TxSql, tenantId: string, projectId: string) => Promise<unknown[]>
  }
}

export interface AgentsOptions {
  /** Agent runs in flight at once on one replica (default AGENT_RUNS_PER_REPLICA). */
  agentRunConcurrency?: number
  /** How long a replica's claim on a run lasts without renewal: how soon another takes over a dead one (default 15 s). */
  agentRunLeaseMs?: number
}

export const agentsPlugin = fp(
  async (app, o: AgentsOptions) => {
    const {
      platform: { db, storage, cache, config, log },
      now,
      outbound: policy,
      llm,
      llmSettings,
    } = app
    const env = {
      airGapped: config.AIR_GAPPED,
      webSearchUrl: config.AIR_GAPPED ? '' : config.WEB_SEARCH_URL,
      fetch: outboundFetch(policy, { timeoutMs: 15_000, maxResponseBytes: 2 * 1024 * 1024 }),
    }
    app.addHook('onClose', async () => env.fetch.close())
    const files = projectFilesService({ db, storage, now, log: log.child({ module: 'agents' }) })
    const connection = (tenantId: string) => llmSettings.connection(tenantId)
    const agents = agentsService({
      db,
      llm,
      connection,
      env,
      publish: (channel, message) => cache.publish(channel, message),
    })
    const runner = agentRunner({ db, cache, llm, connection, files, env, now })
    app.jobs.define<{ runId: string }>({
      name: RUN_QUEUE,
      handler: (job) => runner.handle(job),
      concurrency: o.agentRunConcurrency ?? config.AGENT_RUNS_PER_REPLICA,
      leaseMs: o.agentRunLeaseMs ?? 15_000,
      // A step that failed for a fault of ours (the database away) is tried again soon: the run resumes.
      backoffMs: (attempt) => Math.min(1000 * 2 ** (attempt - 1), 30_000),
    })
    app.decorate('projectAgents', agents.projectAgents)
    await app.register(agentsRoutes, { prefix: API_PREFIX, agents, cache })
  },
  { name: 'atrium-agents', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license', 'atrium-llm', 'atrium-tenants'] },
)
