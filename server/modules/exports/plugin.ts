// 'atrium-exports': a tenant's exports under /api/v1/platform/tenants/:tenantId/export, written on
// the job runner (queue 'exports.run'), their schedules (queue 'exports.scheduled'), and the plans'
// automatic backups with the retention of archives (queue 'exports.backups').
import fp from 'fastify-plugin'
import { VERSION } from '../../../common/version.js'
import { API_PREFIX } from '../../http/auth.js'
import { exportsRoutes } from './routes.js'
import { defineBackups } from './backups.js'
import { defineScheduledExports, schedulesService } from './schedules.js'
import { archiveLimits } from './limits.js'
import { defineExportJobs, exportsService } from './service.js'

export interface ExportsOptions {
  /** How long a replica's claim on an export lasts without renewal: how soon another takes over a dead one (default 15 s). */
  exportLeaseMs?: number
}

export const exportsPlugin = fp(
  async (app, o: ExportsOptions) => {
    const {
      platform: { db, storage, secrets, log, config },
      now,
      outbound: policy,
    } = app
    const exports = exportsService({ db, storage, secrets, policy, limits: archiveLimits(config), version: VERSION, now })
    const schedules = schedulesService({ db, policy, exports, now, deployment: { airGapped: config.AIR_GAPPED, webSearch: Boolean(config.WEB_SEARCH_URL) } })
    const lease = o.exportLeaseMs ? { leaseMs: o.exportLeaseMs } : {}
    defineExportJobs(app.jobs, exports, lease)
    defineScheduledExports(app.jobs, schedules, lease)
    defineBackups(app.jobs, { db, storage, exports, log: log.child({ module: 'exports' }), now })
    await app.register(exportsRoutes, { prefix: API_PREFIX, exports, schedules })
  },
  { name: 'atrium-exports', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
