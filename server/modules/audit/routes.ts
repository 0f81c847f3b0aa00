// The audit log for tenant admins (docs/identity.md, "Audit log"). Its retention sweep is a job
// (service.ts auditRetention, queue 'audit.retention' in server/jobs.ts).
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { PLAN_TERMS, PLANS } from '../../domain/plans.js'
import { actorOf } from '../../http/actor.js'
import { pageOf } from '../../http/route-schemas.js'
import { apiErrors, PageEnvelope } from '../../http/schemas.js'
import type { AuditLogService } from './service.js'
import type { AuditRow } from './store.js'

const tags = ['audit']

const retention = PLANS.filter((p) => PLAN_TERMS[p].auditRetention)
  .map((p) => `${PLAN_TERMS[p].title} ${PLAN_TERMS[p].auditRetention}`)
  .join(', ')
const keepsNone = PLANS.filter((p) => !PLAN_TERMS[p].auditRetention)
  .map((p) => `The ${PLAN_TERMS[p].title} plan keeps no audit log`)
  .join('; ')

const AuditEvent = Type.Object({
  id: Type.String({ format: 'uuid' }),
  action: Type.String({ description: 'What happened, e.g. auth.login, auth.login_failed, key.created, key.revoked' }),
  actor: Type.Object({
    type: Type.Union([
      Type.Literal('user'),
      Type.Literal('api_key'),
      Type.Literal('system'),
      Type.Literal('anonymous'),
    ]),
    id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
      description: 'User or key id; null for anonymous and system actors',
    }),
  }),
  target: Type.Union([Type.Object({ type: Type.String(), id: Type.String() }), Type.Null()], {
    description: 'What the action was done to; null when nothing in particular',
  }),
  ip: Type.Union([Type.String(), Type.Null()], {
    description: 'Client address of the request; null when the action came from no request',
  }),
  userAgent: Type.Union([Type.String(), Type.Null()]),
  details: Type.Object({}, { additionalProperties: true }),
  createdAt: Type.String({ format: 'date-time' }),
})

const AuditQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Items per page (1 to 200)' }),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'meta.nextCursor of the previous page' })),
    action: Type.Optional(
      Type.String({
        maxLength: 100,
        pattern: '^[a-z][a-z0-9_]*(\\.[a-z0-9_]+)*(\\.\\*)?$',
        description: 'An action (key.created), or every action under a prefix (key.*)',
      }),
    ),
    actorId: Type.Optional(Type.String({ format: 'uuid', description: 'Events done by this user or API key' })),
    since: Type.Optional(Type.String({ format: 'date-time', description: 'Events at or after this time' })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'Events before this time' })),
  },
  { additionalProperties: false },
)

const present = (e: AuditRow) => ({
  id: e.id,
  action: e.action,
  actor: { type: e.actor_type, id: e.actor_id },
  target: e.target_type ? { type: e.target_type, id: e.target_id } : null,
  ip: e.ip || null,
  userAgent: e.user_agent || null,
  details: e.details,
  createdAt: e.created_at.toISOString(),
})

export const auditRoutes: FastifyPluginAsyncTypebox<{ auditLog: AuditLogService }> = async (app, { auditLog }) => {
  app.get(
    '/audit-log',
    {
      config: { permission: 'audit:read' },
      schema: {
        tags,
        summary: 'Security-relevant actions in the tenant, newest first',
        description: `Only events inside the retention of the tenant's plan are kept and shown: ${retention}. ${keepsNone}: FORBIDDEN with details {plan, requiredPlan}.`,
        querystring: AuditQuery,
        response: { 200: PageEnvelope(AuditEvent), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req) => {
      const { tenantId, principal } = actorOf(req)
      const r = await auditLog.list({ tenantId, plan: principal.plan }, req.query)
      return pageOf(req, r, present)
    },
  )
}
