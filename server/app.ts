// buildApp(platform): HTTP plugins, then modules. No I/O of its own: everything outside comes in
// through the platform, so a test builds the same app on real services or embedded defaults.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Registry } from 'prom-client'
import { installAuth } from './http/auth.js'
import { invalid } from './http/errors.js'
import { genReqId, installEnvelope } from './http/envelope.js'
import { createRegistry, installMetrics } from './http/metrics.js'
import { createRateLimiter } from './http/rate-limit.js'
import { ErrorBody } from './http/schemas.js'
import { emptyTolerantJson, findNul, validatorCompiler } from './http/validation.js'
import { redactUrl } from './logger.js'
import { apiKeyAuthenticator } from './modules/api-keys/service.js'
import { downloadsRoutes } from './modules/downloads/routes.js'
import { opsRoutes } from './modules/ops/routes.js'
import { projectsRoutes } from './modules/projects/routes.js'
import { projectsService } from './modules/projects/service.js'
import type { LocalBlobs } from './platform/blobs.js'
import type { Platform } from './platform/index.js'
import { VERSION } from './version.js'

export interface AppOptions {
  /** Separate registries let tests build several apps in one process. */
  registry?: Registry
  /** Rate-limit keys are prefixed so tests sharing one Redis do not share counters by accident. */
  rateLimitPrefix?: string
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set on SIGTERM: readiness fails so the load balancer stops sending traffic. */
    draining: boolean
  }
}

export async function buildApp(platform: Platform, opts: AppOptions = {}): Promise<FastifyInstance> {
  const { config, log } = platform
  const registry = opts.registry ?? createRegistry()
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    genReqId,
    requestIdHeader: false,
    // Fastify's two lines per request are replaced by the one written in onResponse below.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    bodyLimit: config.MAX_REQUEST_BODY_BYTES,
    trustProxy: config.TRUSTED_PROXIES.length ? config.TRUSTED_PROXIES : false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('draining', false)
  app.setValidatorCompiler(validatorCompiler())
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, emptyTolerantJson(app.getDefaultJsonParser('error', 'error')))
  app.addSchema(ErrorBody)

  // A POST without a body is an empty object: optional flags default, required fields are named.
  // Text with a NUL character is refused here, before it can reach the database and fail there.
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.routeOptions.schema?.body) request.body = {}
    const nul = findNul(request.body)
    if (nul) throw invalid(nul, 'must not contain NUL (\\u0000) characters')
  })
  // One line per request, after it is answered.
  app.addHook('onResponse', async (request, reply) => {
    if (!log.isLevelEnabled('info')) return
    request.log.info({ method: request.method, url: redactUrl(request.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request')
  })

  installEnvelope(app)
  installMetrics(app, registry)

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Atrium API', version: VERSION, description: 'Multi-tenant AI application platform, on-premise distribution.' },
      servers: [{ url: config.PUBLIC_URL }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key (svc_sdk_..., svc_ci_..., svc_admin_...) or a JWT access token' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
  })
  // The docs UI ships inside the package: it works offline.
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: '/openapi.json' }, logLevel: 'warn' })

  const limiter = createRateLimiter({
    max: config.RATE_LIMIT_MAX,
    windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
    redis: platform.cache.redis,
    log,
    registry,
    keyPrefix: opts.rateLimitPrefix,
  })
  installAuth(app, { authenticators: [apiKeyAuthenticator(platform.db)], limiter })

  await app.register(opsRoutes, { platform, registry, isDraining: () => app.draining })
  if (platform.blobs.kind === 'local') await app.register(downloadsRoutes, { blobs: platform.blobs as LocalBlobs })

  const projects = projectsService({ db: platform.db, blobs: platform.blobs, version: VERSION })
  await app.register(
    async (api) => {
      await api.register(projectsRoutes, { projects })
    },
    { prefix: '/api/v1' },
  )
  return app
}
