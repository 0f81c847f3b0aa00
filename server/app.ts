// buildApp(platform): HTTP plugins, then modules. No I/O of its own: everything outside comes in
// through the platform, so a test builds the same app on real services or embedded defaults.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import cookie from '@fastify/cookie'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Registry } from 'prom-client'
import { installAuth } from './http/auth.js'
import { openCredentials } from './platform/credentials.js'
import { invalid } from './domain/errors.js'
import { installLicense } from './http/license.js'
import { clientErrorHandler, frameworkErrors, genReqId, installEnvelope } from './http/envelope.js'
import { createRegistry, installMetrics } from './http/metrics.js'
import { pageStyleRoutes } from './http/pages.js'
import { createRateLimiter } from './http/rate-limit.js'
import { signInGuard } from './http/signin-guard.js'
import { ErrorBody } from './http/schemas.js'
import { findUnstorableText, jsonBodyParser, validatorCompiler } from './http/validation.js'
import { redactUrl } from './logger.js'
import { apiKeysRoutes } from './modules/api-keys/routes.js'
import { apiKeyTags } from './modules/api-keys/keys.js'
import { legacyKeys } from './modules/api-keys/legacy.js'
import { apiKeyAuthenticator, apiKeysService } from './modules/api-keys/service.js'
import { auditRoutes } from './modules/audit/routes.js'
import { auditLogService, defineAuditJobs } from './modules/audit/service.js'
import { authRoutes } from './modules/auth/routes.js'
import { authService } from './modules/auth/service.js'
import { loginThrottle, type LoginLimits } from './modules/auth/throttle.js'
import { createTokenIssuer } from './modules/auth/tokens.js'
import { cliAuthRoutes } from './modules/cli-auth/routes.js'
import { cliAuthService } from './modules/cli-auth/service.js'
import { downloadsRoutes } from './modules/downloads/routes.js'
import { oauthRoutes } from './modules/oauth/routes.js'
import { opsRoutes } from './modules/ops/routes.js'
import { projectsRoutes } from './modules/projects/routes.js'
import { defineProjectJobs, projectsService } from './modules/projects/service.js'
import { invitationPageRoutes } from './modules/team/page.js'
import { teamRoutes } from './modules/team/routes.js'
import { teamService } from './modules/team/service.js'
import { tenantRoutes } from './modules/tenants/routes.js'
import { tenantsService } from './modules/tenants/service.js'
import { llmSettingsService } from './modules/tenants/settings.js'
import { webhooksRoutes } from './modules/webhooks/routes.js'
import { webhooksService } from './modules/webhooks/service.js'
import { defineWebhookJobs, startWebhookWorker, type Worker, type WorkerOptions } from './modules/webhooks/worker.js'
import type { LocalBlobs } from './platform/blobs.js'
import { openCounters } from './platform/counters.js'
import { createJobRunner, defineJobUpkeep, type JobRunnerOptions } from './platform/jobs.js'
import { compilePolicy, type Resolver } from './platform/outbound.js'
import type { Platform } from './platform/index.js'
import { VERSION } from '../common/version.js'

export interface AppOptions {
  /** Separate registries let tests build several apps in one process. */
  registry?: Registry
  /** Rate-limit keys are prefixed so tests sharing one Redis do not share counters by accident. */
  rateLimitPrefix?: string
  /** The clock of every expiry rule (tokens, sessions, device logins); tests move it forward. */
  now?: () => number
  /**
   * The webhook delivery worker: started when WEBHOOK_DELIVERY_CONCURRENCY > 0 unless false; tests
   * shorten its retry schedule, poll and lease here, or pass their own name resolver.
   */
  webhookWorker?: false | Partial<Pick<WorkerOptions, 'schedule' | 'pollMs' | 'leaseMs' | 'concurrency' | 'attemptTimeoutMs'>>
  /** The job runner: started with the app unless false; tests shorten its poll and schedule tick. */
  jobs?: false | Partial<Pick<JobRunnerOptions, 'pollMs' | 'scheduleTickMs'>>
  /** How outbound calls resolve names (tests); the system resolver otherwise. */
  resolver?: Resolver
  /** Password sign-in limits (tests lower them); LOGIN_LIMITS otherwise. */
  loginLimits?: Partial<LoginLimits>
  /** Failed sign-in steps (session, invitation and device-login tokens) per address and window. */
  signInFailures?: { max?: number; windowSeconds?: number }
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
    // Refusals before routing (a URL that does not decode, a parameter too long) and of Node's parser
    // (headers too large, a malformed request) are answered in the envelope too.
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('draining', false)
  app.setValidatorCompiler(validatorCompiler())
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser(app.getDefaultJsonParser('error', 'error')))
  app.addSchema(ErrorBody)

  // A POST without a body is an empty object: optional flags default, required fields are named.
  // Text the database cannot store (NUL, unpaired surrogates) is refused here, before it can reach
  // the database and fail there.
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.routeOptions.schema?.body) request.body = {}
    const bad = findUnstorableText(request.body)
    if (bad) throw invalid(bad.field, bad.message)
  })
  // One line per request, after it is answered.
  app.addHook('onResponse', async (request, reply) => {
    if (!log.isLevelEnabled('info')) return
    request.log.info({ method: request.method, url: redactUrl(request.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request')
  })

  installEnvelope(app)
  installMetrics(app, registry)
  if (!config.TRUSTED_PROXIES.length) warnOfUntrustedProxy(app, log)

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

  const counters = openCounters({ redis: platform.cache.redis, log, registry })
  const limiter = createRateLimiter({ counters, max: config.RATE_LIMIT_MAX, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS, keyPrefix: opts.rateLimitPrefix })
  await app.register(cookie)
  const now = opts.now ?? Date.now
  const credentials = await openCredentials(platform.cache, log)
  app.addHook('onClose', () => credentials.close())
  const tokens = await createTokenIssuer({ secrets: platform.secrets, issuer: config.PUBLIC_URL, ttlSeconds: config.ACCESS_TOKEN_TTL_SECONDS, now })
  const limitPrefix = opts.rateLimitPrefix ?? 'atrium:rl'
  const throttle = loginThrottle({ counters, keyPrefix: limitPrefix, limits: opts.loginLimits })
  const guard = signInGuard(counters, { keyPrefix: limitPrefix, ...opts.signInFailures })
  const auth = authService({ db: platform.db, tokens, credentials, secrets: platform.secrets, throttle, log, sessionTtlSeconds: config.SESSION_TTL_HOURS * 3600, now })
  const keyTags = apiKeyTags(platform.secrets)
  const legacy = legacyKeys(platform.db, log)
  app.addHook('onReady', () => legacy.start())
  app.addHook('onClose', async () => legacy.close())
  installAuth(app, { authenticators: [apiKeyAuthenticator({ db: platform.db, tags: keyTags, legacy, cache: credentials.cache }), auth.authenticator()], limiter })
  installLicense(app, platform.license)

  await app.register(opsRoutes, { platform, registry, isDraining: () => app.draining })
  // Links of the platform's local store are verified with its own key: the platform store directly,
  // not a tenant's (a tenant's objects are reached through platform.storage.forTenant).
  if (platform.blobs.kind === 'local') await app.register(downloadsRoutes, { blobs: platform.blobs as LocalBlobs })
  // Device login lives at the root (DESIGN.md), outside the /api/v1 credential hooks.
  await app.register(cliAuthRoutes, {
    cli: cliAuthService({ db: platform.db, secrets: platform.secrets, auth, tokens, publicUrl: config.PUBLIC_URL, now }),
    guard,
    auth,
    publicUrl: config.PUBLIC_URL,
    rateLimit: { counters, keyPrefix: opts.rateLimitPrefix },
  })
  await app.register(oauthRoutes, { db: platform.db, config, auth, log, now })
  await app.register(pageStyleRoutes)
  await app.register(invitationPageRoutes)

  // The one job runner: modules define their queues and schedules on it below; it starts once the
  // app is ready and drains on close (running handlers finish or are handed back).
  const jobs = createJobRunner({ db: platform.db, log: log.child({ module: 'jobs' }), registry, now, ...(opts.jobs || {}) })
  defineJobUpkeep(jobs, platform.db, now)
  defineAuditJobs(jobs, auditLogService({ db: platform.db }), log.child({ module: 'audit' }))
  defineProjectJobs(jobs, { db: platform.db, storage: platform.storage, log: log.child({ module: 'projects' }), now })
  defineWebhookJobs(jobs, { db: platform.db, log: log.child({ module: 'webhooks' }), now })
  if (opts.jobs !== false) {
    app.addHook('onReady', () => jobs.start())
    app.addHook('onClose', () => jobs.stop({ graceMs: Math.max(1000, (config.SHUTDOWN_TIMEOUT_SECONDS * 1000) / 2) }))
  }
  const projects = projectsService({ db: platform.db, storage: platform.storage, version: VERSION, now })
  // One outbound policy for every call out: webhook URLs and LLM base URLs when they are set, and
  // the connections of the webhook worker and of model calls.
  const policy = compilePolicy({ allowedCidrs: config.OUTBOUND_ALLOWED_NETWORKS, airGapped: config.AIR_GAPPED }, opts.resolver)
  const workerOpts = opts.webhookWorker === false ? null : { concurrency: config.WEBHOOK_DELIVERY_CONCURRENCY, ...opts.webhookWorker }
  let worker: Worker | null = null
  const webhooks = webhooksService({
    db: platform.db,
    secrets: platform.secrets,
    policy,
    allowHttp: config.WEBHOOK_ALLOW_HTTP,
    now,
    onDue: () => worker?.kick(),
  })
  if (workerOpts && workerOpts.concurrency > 0) {
    // Started once the app is ready, stopped before the pools close (drain waits for attempts in flight).
    app.addHook('onReady', async () => {
      worker = startWebhookWorker({
        db: platform.db,
        secrets: platform.secrets,
        policy,
        registry,
        log: log.child({ module: 'webhooks' }),
        userAgent: `Atrium-Webhooks/${VERSION}`,
        now,
        ...workerOpts,
      })
    })
    app.addHook('onClose', async () => {
      await worker?.stop()
    })
  }
  await app.register(
    async (api) => {
      await api.register(authRoutes, { auth, tokens, publicUrl: config.PUBLIC_URL, guard })
      await api.register(projectsRoutes, { projects })
      await api.register(apiKeysRoutes, { keys: apiKeysService({ db: platform.db, tags: keyTags, credentials, now }) })
      await api.register(auditRoutes, { auditLog: auditLogService({ db: platform.db }) })
      await api.register(tenantRoutes, { tenants: tenantsService({ db: platform.db }), llm: llmSettingsService({ db: platform.db, secrets: platform.secrets, policy, now }) })
      await api.register(teamRoutes, { team: teamService({ db: platform.db, secrets: platform.secrets, auth, credentials, publicUrl: config.PUBLIC_URL, now }), guard })
      await api.register(webhooksRoutes, { webhooks, scope: 'tenant' })
      await api.register(webhooksRoutes, { webhooks, scope: 'platform' })
    },
    { prefix: '/api/v1' },
  )
  return app
}

/**
 * Limits by address see the proxy's address when the proxy is not trusted: every client behind it
 * shares them. Said once per process, on the first request that shows a proxy on its way.
 */
function warnOfUntrustedProxy(app: FastifyInstance, log: Platform['log']) {
  let warned = false
  app.addHook('onRequest', async (request) => {
    if (warned || request.headers['x-forwarded-for'] === undefined) return
    warned = true
    log.warn(
      { proxy: request.socket.remoteAddress },
      "requests arrive through a proxy (X-Forwarded-For) but TRUSTED_PROXIES is empty: limits by address see the proxy's address, so all clients behind it share them; set TRUSTED_PROXIES to its address (docs/operations.md)",
    )
  })
}
