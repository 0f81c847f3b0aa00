// Liveness, readiness, metrics and the API description: for orchestrators and operators, not tenants.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Registry } from 'prom-client'
import { ok } from '../../http/envelope.js'
import { Envelope } from '../../http/schemas.js'
import type { Platform } from '../../platform/index.js'
import { readinessMetrics, readinessService } from './service.js'

const Check = Type.Object({
  status: Type.Union([Type.Literal('pass'), Type.Literal('fail')]),
  mode: Type.String({ description: 'postgres or embedded, redis or in-process, s3 or local' }),
  latencyMs: Type.Number(),
  error: Type.Optional(Type.String()),
})
const SchemaCheck = Type.Object({
  status: Type.Union([Type.Literal('pass'), Type.Literal('fail')]),
  version: Type.Integer({ description: 'The newest migration this server needs' }),
  pending: Type.Array(Type.Integer(), {
    description: 'Migrations this server needs that the database lacks (run `migrate`)',
  }),
})
const Readiness = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('degraded')]),
  checks: Type.Object({ db: Check, schema: SchemaCheck, cache: Check, blobs: Check }),
})

export interface OpsOptions {
  platform: Platform
  registry: Registry
  isDraining: () => boolean
}

export const opsRoutes: FastifyPluginAsyncTypebox<OpsOptions> = async (app, { platform, registry, isDraining }) => {
  const tags = ['operations']
  const readiness = readinessService(platform, isDraining)
  readinessMetrics(registry, readiness, app.log)

  app.get(
    '/healthz',
    {
      schema: {
        tags,
        summary: 'Liveness: the process answers',
        response: { 200: Envelope(Type.Object({ status: Type.Literal('ok') })) },
      },
    },
    async (req) => ok(req, { status: 'ok' as const }),
  )

  app.get(
    '/readyz',
    {
      schema: {
        tags,
        summary:
          'Readiness: the database answers and has every migration this server needs (503 otherwise, or while draining); cache and blob storage are reported, and with ?strict=true also required',
        querystring: Type.Object({ strict: Type.Boolean({ default: false }) }),
        response: { 200: Envelope(Readiness), 503: Type.Ref('ErrorEnvelope') },
      },
    },
    async (req) => {
      const { checks, refusal } = await readiness(req.log)
      const failed = refusal(req.query.strict)
      if (failed) throw failed
      const degraded = Object.values(checks).some((c) => c.status === 'fail')
      return ok(req, { status: degraded ? ('degraded' as const) : ('ready' as const), checks })
    },
  )

  // With METRICS_PORT set, /metrics is served there only (http/metrics.ts listenMetrics).
  if (!app.platform.config.METRICS_PORT) {
    app.get(
      '/metrics',
      {
        schema: {
          tags,
          summary: 'Prometheus metrics (text exposition format)',
          produces: ['text/plain'],
          response: { 200: Type.String() },
        },
      },
      async (_req, reply) => {
        reply.type(registry.contentType)
        return registry.metrics()
      },
    )
  }

  app.get(
    '/openapi.json',
    {
      schema: {
        tags,
        summary: 'This API described as OpenAPI 3.1 (a document, so not enveloped)',
        response: { 200: Type.Object({}, { additionalProperties: true }) },
      },
    },
    async () => app.swagger(),
  )
}
