// Liveness, readiness, metrics and the API description: for orchestrators and operators, not tenants.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyBaseLogger } from 'fastify'
import type { Registry } from 'prom-client'
import { AppError } from '../../domain/errors.js'
import { ok } from '../../http/envelope.js'
import { Envelope } from '../../http/schemas.js'
import type { Platform } from '../../platform/index.js'
import { loadMigrations, pendingMigrations } from '../../platform/migrate.js'

const CHECK_TIMEOUT_MS = 2000

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

const TIMED_OUT = `no answer in ${CHECK_TIMEOUT_MS} ms`

/** One dependency check. Why it failed goes to the log, not to anonymous callers (host names, users). */
async function probe(name: string, mode: string, fn: () => Promise<void>, log: FastifyBaseLogger) {
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(TIMED_OUT)), CHECK_TIMEOUT_MS)
      }),
    ])
    return { status: 'pass' as const, mode, latencyMs: Math.round(performance.now() - started) }
  } catch (err) {
    log.warn({ check: name, err }, 'readiness check failed')
    const error = (err as Error).message === TIMED_OUT ? TIMED_OUT : 'failed (the server log says why)'
    return { status: 'fail' as const, mode, latencyMs: Math.round(performance.now() - started), error }
  } finally {
    clearTimeout(timer)
  }
}

export interface OpsOptions {
  platform: Platform
  registry: Registry
  isDraining: () => boolean
}

export const opsRoutes: FastifyPluginAsyncTypebox<OpsOptions> = async (app, { platform, registry, isDraining }) => {
  const tags = ['operations']
  const migrations = loadMigrations()
  const version = migrations.at(-1)?.version ?? 0
  // Once the database has every migration this server needs it keeps them: asked again only after
  // a failure, so a ready server's probe costs no more than before.
  let schemaCurrent = false
  const schemaCheck = async () => {
    if (schemaCurrent) return { status: 'pass' as const, version, pending: [] }
    const pending = await pendingMigrations(platform.db.sql, migrations)
    schemaCurrent = pending.length === 0
    return { status: schemaCurrent ? ('pass' as const) : ('fail' as const), version, pending }
  }

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
      const [db, schema, cache, blobs] = await Promise.all([
        probe('db', platform.db.mode, () => platform.db.ping(), req.log),
        schemaCheck().catch((err: unknown) => {
          req.log.warn({ check: 'schema', err }, 'readiness check failed')
          return { status: 'fail' as const, version, pending: [] as number[] }
        }),
        probe('cache', platform.cache.redis ? 'redis' : 'in-process', () => platform.cache.ping(), req.log),
        // The platform's own store, not a tenant's (storage.forTenant): a customer's store being
        // away says nothing about whether this replica can serve.
        probe('blobs', platform.blobs.kind, () => platform.blobs.ping(), req.log),
      ])
      const checks = { db, schema, cache, blobs }
      const failing = Object.entries(checks)
        .filter(([, c]) => c.status === 'fail')
        .map(([name]) => name)
      if (isDraining()) throw new AppError('SERVICE_UNAVAILABLE', 'Shutting down', { draining: true, checks })
      if (schema.pending.length) {
        throw new AppError(
          'SERVICE_UNAVAILABLE',
          `Not ready: the database lacks migrations ${schema.pending.join(', ')}; run \`migrate\``,
          { checks },
        )
      }
      if (db.status === 'fail' || schema.status === 'fail' || (req.query.strict && failing.length)) {
        throw new AppError('SERVICE_UNAVAILABLE', `Not ready: ${failing.join(', ')} failing`, { checks })
      }
      return ok(req, { status: failing.length ? ('degraded' as const) : ('ready' as const), checks })
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
