// 'atrium-webhooks': endpoints and deliveries under /api/v1 (tenant and platform scopes), the
// delivery worker, started once the app is ready and stopped when it closes, and the events'
// retention sweep on the job runner.
import fp from 'fastify-plugin'
import { VERSION } from '../../../common/version.js'
import { API_PREFIX } from '../../http/auth.js'
import { webhooksRoutes } from './routes.js'
import { webhooksService } from './service.js'
import { defineWebhookJobs, startWebhookWorker, type Worker, type WorkerOptions } from './worker.js'

export interface WebhooksOptions {
  /**
   * The webhook delivery worker: started when WEBHOOK_DELIVERY_CONCURRENCY > 0 unless false; tests
   * shorten its retry schedule, poll and lease here.
   */
  webhookWorker?: false | Partial<Pick<WorkerOptions, 'schedule' | 'pollMs' | 'leaseMs' | 'concurrency' | 'attemptTimeoutMs'>>
}

export const webhooksPlugin = fp(
  async (app, o: WebhooksOptions) => {
    const {
      platform: { config, db, secrets, log },
      now,
      outbound: policy,
      registry,
    } = app
    defineWebhookJobs(app.jobs, { db, log: log.child({ module: 'webhooks' }), now })
    const workerOpts = o.webhookWorker === false ? null : { concurrency: config.WEBHOOK_DELIVERY_CONCURRENCY, ...o.webhookWorker }
    let worker: Worker | null = null
    const webhooks = webhooksService({ db, secrets, policy, allowHttp: config.WEBHOOK_ALLOW_HTTP, now, onDue: () => worker?.kick() })
    if (workerOpts && workerOpts.concurrency > 0) {
      // Started once the app is ready, stopped before the pools close (drain waits for attempts in flight).
      app.addHook('onReady', async () => {
        worker = startWebhookWorker({ db, secrets, policy, registry, log: log.child({ module: 'webhooks' }), userAgent: `Atrium-Webhooks/${VERSION}`, now, ...workerOpts })
      })
      app.addHook('onClose', async () => {
        await worker?.stop()
      })
    }
    await app.register(webhooksRoutes, { prefix: API_PREFIX, webhooks, scope: 'tenant' })
    await app.register(webhooksRoutes, { prefix: API_PREFIX, webhooks, scope: 'platform' })
  },
  { name: 'atrium-webhooks', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
