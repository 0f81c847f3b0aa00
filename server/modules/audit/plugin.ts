// 'atrium-audit': the tenant's audit log under /api/v1, and its retention sweep on the job runner.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { auditRoutes } from './routes.js'
import { auditLogService, defineAuditJobs } from './service.js'

export const auditPlugin = fp(
  async (app) => {
    const { db, log } = app.platform
    const auditLog = auditLogService({ db })
    defineAuditJobs(app.jobs, auditLog, log.child({ module: 'audit' }))
    await app.register(auditRoutes, { prefix: API_PREFIX, auditLog })
  },
  { name: 'atrium-audit', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
