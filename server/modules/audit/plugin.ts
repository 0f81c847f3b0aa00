// 'atrium-audit': the tenant's audit log under /api/v1; its retention sweep is queue 'audit.retention'
// (server/jobs.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { auditRoutes } from './routes.js'
import type { AuditLogService } from './service.js'

export const auditPlugin = fp(
  async (app, { auditLog }: { auditLog: AuditLogService }) => {
    await app.register(auditRoutes, { prefix: API_PREFIX, auditLog })
  },
  { name: 'atrium-audit', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
