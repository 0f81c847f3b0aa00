// 'atrium-restores': restoring a tenant archive under /api/v1/platform/tenants/:tenantId/restore,
// on the job runner (queue 'restores.run'). Reads the format of 'atrium-exports'; restored LLM
// settings pass the checks of 'atrium-tenants'.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { restoreIdKey } from '../exports/format.js'
import { archiveLimits } from '../exports/limits.js'
import { projectFilesService } from '../projects/files-service.js'
import { restoresRoutes } from './routes.js'
import { defineRestoreJobs, restoresService } from './service.js'

export interface RestoresOptions {
  /** How long a replica's claim on a restore lasts without renewal: how soon another takes over a dead one (default 15 s). */
  restoreLeaseMs?: number
}

export const restoresPlugin = fp(
  async (app, o: RestoresOptions) => {
    const {
      platform: { db, storage, config, secrets, log },
      now,
    } = app
    // The same limits an export writes within: what Atrium exports it can restore.
    const limits = archiveLimits(config)
    const files = projectFilesService({ db, storage, now, log: log.child({ module: 'restores' }) })
    const restores = restoresService({ db, storage, now, limits, llmSettings: app.llmSettings, idKey: restoreIdKey(secrets), files })
    defineRestoreJobs(app.jobs, restores, { ...(o.restoreLeaseMs ? { leaseMs: o.restoreLeaseMs } : {}) })
    await app.register(restoresRoutes, { prefix: API_PREFIX, restores, maxUploadBytes: limits.maxArchiveBytes })
  },
  { name: 'atrium-restores', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license', 'atrium-exports', 'atrium-tenants'] },
)
