// 'atrium-webhooks': endpoints and deliveries under /api/v1 (tenant and platform scopes). The
// delivery worker starts and stops with the app (services.ts); the events' retention sweep is queue
// 'webhooks.events-retention' (server/jobs.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { webhooksRoutes } from './routes.js'
import type { WebhooksService } from './service.js'

export const webhooksPlugin = fp(
  async (app, { webhooks }: { webhooks: WebhooksService }) => {
    await app.register(webhooksRoutes, { prefix: API_PREFIX, webhooks, scope: 'tenant' })
    await app.register(webhooksRoutes, { prefix: API_PREFIX, webhooks, scope: 'platform' })
  },
  { name: 'atrium-webhooks', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
