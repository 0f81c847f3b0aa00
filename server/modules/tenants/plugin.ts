// 'atrium-tenants': the tenant, its plan limits and its LLM settings under /api/v1.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { tenantRoutes } from './routes.js'
import { tenantsService } from './service.js'
import { llmSettingsService } from './settings.js'

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
    await app.register(tenantRoutes, { prefix: API_PREFIX, tenants: tenantsService({ db }), llm })
  },
  { name: 'atrium-tenants', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
