// 'atrium-restores': restoring a tenant archive under /api/v1/platform/tenants/:tenantId/restore,
// on the job runner (queue 'restores.run', server/jobs.ts). It reads the format of exports, within
// the limits an export writes within.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { ArchiveLimits } from '../exports/limits.js'
import { restoresRoutes } from './routes.js'
import type { RestoresService } from './service.js'

export const restoresPlugin = fp(
  async (app, o: { restores: RestoresService; archive: ArchiveLimits }) => {
    await app.register(restoresRoutes, {
      prefix: API_PREFIX,
      restores: o.restores,
      maxUploadBytes: o.archive.maxArchiveBytes,
    })
  },
  { name: 'atrium-restores', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
