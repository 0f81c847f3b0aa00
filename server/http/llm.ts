// 'atrium-llm': the one model-call adapter (platform/llm.ts) for every module, with its metrics in
// the app's registry. The target of a call (provider, key, guarded fetch) comes from the tenant's
// settings (`app.llmSettings.connection(tenantId)`), so this plugin holds no connection of its own.
import fp from 'fastify-plugin'
import { createLlm, type Llm } from '../platform/llm.js'

declare module 'fastify' {
  interface FastifyInstance {
    llm: Llm
  }
}

export const llmPlugin = fp(
  async (app) => {
    const { platform, now, registry } = app
    app.decorate('llm', createLlm({ db: platform.db, log: platform.log.child({ module: 'llm' }), registry, now }))
  },
  { name: 'atrium-llm', dependencies: ['atrium-platform'] },
)
