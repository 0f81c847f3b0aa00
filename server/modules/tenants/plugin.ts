// 'atrium-tenants': the tenant, its plan limits and its LLM settings under /api/v1.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { tenantRoutes } from './routes.js'
import { tenantsService } from './service.js'
import { llmSettingsService, type LlmSettingsService } from './settings.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The tenants' LLM settings: `connection(tenantId)` is the target of a model call (app.llm). */
    llmSettings: LlmSettingsService
  }
}

export const tenantsPlugin = fp(
  async (app) => {
    const {
      platform: { db, secrets },
      now,
      outbound: policy,
    } = app
    // The plugin that opens the LLM settings' connections closes them.
    const llm = llmSettingsService({ db, secrets, policy, now })
    app.addHook('onClose', async () => llm.close())
    app.decorate('llmSettings', llm)
    await app.register(tenantRoutes, { prefix: API_PREFIX, tenants: tenantsService({ db, now }), llm })
  },
  { name: 'atrium-tenants', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
