// 'atrium-ops': health, readiness, metrics and the OpenAPI document, at the root.
import fp from 'fastify-plugin'
import { opsRoutes } from './routes.js'

export const opsPlugin = fp(
  async (app) => {
    await app.register(opsRoutes, { platform: app.platform, registry: app.registry, isDraining: () => app.draining })
  },
  { name: 'atrium-ops', dependencies: ['atrium-platform', 'atrium-openapi'], decorators: { fastify: ['draining'] } },
)
