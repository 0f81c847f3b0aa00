// 'atrium-exports': a tenant's exports under /api/v1/platform/tenants/:tenantId/export and their
// schedules. They are written on the job runner (queues 'exports.run' and 'exports.scheduled'), and
// the plans' automatic backups with the retention of archives are queue 'exports.backups' (server/jobs.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { exportsRoutes } from './routes.js'
import type { SchedulesService } from './schedules.js'
import type { ExportsService } from './service.js'

export const exportsPlugin = fp(
  async (app, { exports, schedules }: { exports: ExportsService; schedules: SchedulesService }) => {
    await app.register(exportsRoutes, { prefix: API_PREFIX, exports, schedules })
  },
  { name: 'atrium-exports', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
