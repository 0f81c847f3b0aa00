// 'atrium-agents': agents and their runs under /api/v1; the runs execute on the job runner (queue
// 'agents.run', server/jobs.ts), on the runner the composition root (services.ts) builds.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { Platform } from '../../platform/index.js'
import { agentsRoutes } from './routes.js'
import type { AgentsService } from './service.js'

export const agentsPlugin = fp(
  async (app, { agents, platform }: { agents: AgentsService; platform: Pick<Platform, 'cache'> }) => {
    await app.register(agentsRoutes, { prefix: API_PREFIX, agents, cache: platform.cache })
  },
  { name: 'atrium-agents', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
