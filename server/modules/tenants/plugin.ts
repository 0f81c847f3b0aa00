// 'atrium-tenants': the tenant, its plan limits and its LLM settings under /api/v1.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { tenantRoutes } from './routes.js'
import type { TenantsService } from './service.js'
import type { LlmSettingsService } from './settings.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The tenants' LLM settings: `connection(tenantId)` is the target of a model call (app.llm). */
    llmSettings: LlmSettingsService
  }
}

export const tenantsPlugin = fp(
  async (app, o: { tenants: TenantsService; llmSettings: LlmSettingsService }) => {
    app.decorate('llmSettings', o.llmSettings)
    await app.register(tenantRoutes, { prefix: API_PREFIX, tenants: o.tenants, llm: o.llmSettings })
  },
  { name: 'atrium-tenants', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
