// The composition root: buildServices(platform) builds, once and in the order the data flows, every
// adapter the app adds to the platform (metrics registry, outbound policy, counters, credential
// cache, job runner, model calls) and every module's service, each given what it uses as its
// factory's arguments, and returns them as one typed object. Nothing here speaks HTTP: app.ts hands
// the parts to the plugins that serve them (modules/<area>/plugin.ts) and the job registry (jobs.ts)
// the handlers its queues take from them, and starts and stops the background work with the app
// (start, close).
import type { Registry } from 'prom-client'
import { VERSION } from '../common/version.js'
import { createRegistry } from './http/metrics.js'
import { signInGuard, type SignInGuard } from './http/signin-guard.js'
import { agentRunner } from './modules/agents/runner.js'
import { agentsService } from './modules/agents/service.js'
import { apiKeyTags } from './modules/api-keys/keys.js'
import { legacyKeys } from './modules/api-keys/legacy.js'
import { apiKeyAuthenticator, apiKeysService } from './modules/api-keys/service.js'
import { auditLogService } from './modules/audit/service.js'
import { authService } from './modules/sign-in/service.js'
import { loginThrottle, type LoginLimits } from './modules/sign-in/throttle.js'
import { createTokenIssuer } from './modules/sign-in/tokens.js'
import { chatExportService } from './modules/chat/export-service.js'
import { chatService } from './modules/chat/service.js'
import { cliAuthService } from './modules/cli-auth/service.js'
import { restoreIdKey } from './modules/exports/format.js'
import { archiveLimits } from './modules/exports/limits.js'
import { schedulesService } from './modules/exports/schedules.js'
import { exportsService } from './modules/exports/service.js'
import { gdprService } from './modules/gdpr/service.js'
import { openProviders } from './modules/oauth/providers.js'
import { oauthService } from './modules/oauth/service.js'
import { projectFilesService } from './modules/projects/files-service.js'
import { projectsService } from './modules/projects/service.js'
import { regionsService } from './modules/regions/service.js'
import { restoresService } from './modules/restores/service.js'
import { teamService } from './modules/team/service.js'
import { tenantsService } from './modules/tenants/service.js'
import { llmSettingsService } from './modules/tenants/settings.js'
import { webhooksService } from './modules/webhooks/service.js'
import { startWebhookWorker, type Worker, type WorkerOptions } from './modules/webhooks/worker.js'
import { INVALIDATE_CHANNEL, openCredentials } from './platform/credentials.js'
import { openCounters, RATE_LIMIT_PREFIX, type Counters } from './platform/counters.js'
import type { Platform } from './platform/index.js'
import { createJobRunner, type JobRunnerOptions } from './platform/jobs.js'
import { createLlm } from './platform/llm.js'
import { compilePolicy, outboundFetch, outboundPolicyOf, type Resolver } from './platform/outbound.js'

/** What a caller (tests) may change; the configuration decides the rest. */
export interface ServicesOptions {
  /** Separate registries let tests build several apps in one process. */
  registry?: Registry
  /** The clock of every expiry rule (tokens, sessions, device logins) and of the job runner; tests move it forward. */
  now?: () => number
  /** How outbound calls resolve names (tests); the system resolver otherwise. */
  resolver?: Resolver
  /** Rate-limit keys are prefixed so tests sharing one Redis do not share counters by accident. */
  rateLimitPrefix?: string
  /** Failed sign-in steps (session, invitation and device-login tokens) per address and window. */
  signInFailures?: { max?: number; windowSeconds?: number }
  /** Password sign-in limits (tests lower them); LOGIN_LIMITS otherwise. */
  loginLimits?: Partial<LoginLimits>
  /** The job runner: started with the app unless false; tests shorten its poll and schedule tick. */
  jobs?: false | Partial<Pick<JobRunnerOptions, 'pollMs' | 'scheduleTickMs'>>
  /**
   * The webhook delivery worker: started when WEBHOOK_DELIVERY_CONCURRENCY > 0 unless false; tests
   * shorten its retry schedule, poll and lease here.
   */
  webhookWorker?:
    false | Partial<Pick<WorkerOptions, 'schedule' | 'pollMs' | 'leaseMs' | 'concurrency' | 'attemptTimeoutMs'>>
  /** Messages per page the chat export reads (default EXPORT_PAGE_ROWS; tests make it small). */
  chatExportPageRows?: number
}

/**
 * The counters every limit of the app counts in, under one key prefix, and the sign-in guard that several modules'
 * sign-in steps share.
 */
export interface Limits {
  counters: Counters
  /** Every limit's keys start with it; each limit adds its own part. */
  keyPrefix: string
  /** Failed sign-in steps (session, invitation and device-login tokens) per address. */
  signIn: SignInGuard
}

export type Services = Awaited<ReturnType<typeof buildServices>>

export async function buildServices(platform: Platform, o: ServicesOptions = {}) {
  const { config, db, cache, storage, secrets, log } = platform
  const now = o.now ?? Date.now
  const registry = o.registry ?? createRegistry()
  // The platform's policy, unless a test resolves names its own way.
  const outbound = o.resolver ? compilePolicy(outboundPolicyOf(config), o.resolver) : platform.outbound
  // Said at start-up, not first at a refused delivery: a site upgraded from before the setting existed refuses every
  // name.
  if (config.AIR_GAPPED && !config.OUTBOUND_ALLOWED_DOMAINS.length) {
    log.warn(
      'AIR_GAPPED=true and OUTBOUND_ALLOWED_DOMAINS is empty: webhooks, model servers and identity providers can only be given as addresses (docs/air-gap.md)',
    )
  }
  const moduleLog = (module: string) => log.child({ module })
  // First, before anything is opened: a provider the outbound policy forbids (air-gapped: outside
  // OUTBOUND_ALLOWED_NETWORKS) stops the start.
  const providers = await openProviders({
    providers: config.OIDC_PROVIDERS,
    publicUrl: config.PUBLIC_URL,
    policy: outbound,
    log,
    now,
  })

  // Adapters.
  const credentials = await openCredentials(cache, log)
  // Every replica listens for credential invalidations: their number is how many share the limits.
  const counters = openCounters({
    redis: cache.redis,
    log,
    registry,
    replicas: () => cache.listeners(INVALIDATE_CHANNEL),
  })
  const keyPrefix = o.rateLimitPrefix ?? RATE_LIMIT_PREFIX
  const limits: Limits = { counters, keyPrefix, signIn: signInGuard(counters, { keyPrefix, ...o.signInFailures }) }
  const { tracing } = platform
  const jobs = createJobRunner({ db, log: moduleLog('jobs'), registry, now, tracing, ...(o.jobs || {}) })
  const llm = createLlm({
    db,
    log: moduleLog('llm'),
    registry,
    now,
    tracing,
    tenantLabel: config.METRICS_TENANT_LABEL,
  })

  // Sign-in: sessions and access tokens, which oauth, cli-auth and team start sessions through.
  const tokens = await createTokenIssuer({
    secrets,
    issuer: config.PUBLIC_URL,
    ttlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
    now,
  })
  const throttle = loginThrottle({ counters, keyPrefix, limits: o.loginLimits })
  const signIn = authService({
    db,
    tokens,
    credentials,
    secrets,
    throttle,
    log,
    sessionTtlSeconds: config.SESSION_TTL_HOURS * 3600,
    now,
  })
  const oauth = oauthService({ db, auth: signIn, providers, log, now })
  const cliAuth = cliAuthService({ db, secrets, auth: signIn, tokens, publicUrl: config.PUBLIC_URL, now })
  const team = teamService({ db, secrets, auth: signIn, credentials, publicUrl: config.PUBLIC_URL, now })

  // API keys.
  const tags = apiKeyTags(secrets)
  const legacy = legacyKeys(db, log)
  const apiKeys = apiKeysService({ db, tags, credentials, now })
  const apiKeyAuth = apiKeyAuthenticator({ db, tags, legacy, cache: credentials.cache })

  // Tenants, and their LLM settings: the target of every model call.
  const tenants = tenantsService({ db, now })
  const llmSettings = llmSettingsService({ db, secrets, policy: outbound, now })
  const connection = (tenantId: string) => llmSettings.connection(tenantId)

  // Project files: one service, for the projects' routes, the agents' tools and restores.
  const files = projectFilesService({ db, storage, now, log: moduleLog('projects') })
  const agentEnv = {
    airGapped: config.AIR_GAPPED,
    webSearchUrl: config.AIR_GAPPED ? '' : config.WEB_SEARCH_URL,
    fetch: outboundFetch(outbound, { timeoutMs: 15_000, maxResponseBytes: 2 * 1024 * 1024 }),
  }
  const agents = agentsService({
    db,
    llm,
    connection,
    env: agentEnv,
    publish: (channel, message) => cache.publish(channel, message),
    subscribe: (channel, handler) => cache.subscribe(channel, handler),
  })
  const runs = agentRunner({ db, cache, llm, connection, files, env: agentEnv, now, registry })
  // A project backup lists the agents that have run on the project.
  const projects = projectsService({ db, storage, version: VERSION, now, projectAgents: agents.projectAgents })
  const chat = chatService({ db, llm, connection })
  const chatExport = chatExportService({ db, now, ...(o.chatExportPageRows ? { pageRows: o.chatExportPageRows } : {}) })

  const auditLog = auditLogService({ db })
  const gdpr = gdprService({ db, now })

  // Webhooks: the delivery worker starts with the app (start).
  let worker: Worker | null = null
  const webhooks = webhooksService({
    db,
    secrets,
    policy: outbound,
    allowHttp: config.WEBHOOK_ALLOW_HTTP,
    now,
    onDue: () => worker?.kick(),
  })

  // Exports, and restores, which read what an export writes within the same limits.
  const archive = archiveLimits(config)
  const deployment = { airGapped: config.AIR_GAPPED, webSearch: Boolean(config.WEB_SEARCH_URL) }
  const exports = exportsService({ db, storage, secrets, policy: outbound, limits: archive, version: VERSION, now })
  const schedules = schedulesService({ db, exports, now, deployment })
  const restores = restoresService({
    db,
    storage,
    now,
    limits: archive,
    llmSettings,
    idKey: restoreIdKey(secrets),
    files,
  })
  const regions = regionsService({
    db,
    storage,
    secrets,
    policy: outbound,
    ...regionsOf(platform),
    ...deployment,
    version: VERSION,
    now,
  })

  const workerOpts =
    o.webhookWorker === false ? null : { concurrency: config.WEBHOOK_DELIVERY_CONCURRENCY, ...o.webhookWorker }
  return {
    platform,
    now,
    registry,
    outbound,
    credentials,
    limits,
    jobs,
    llm,
    signIn,
    tokens,
    oauth,
    cliAuth,
    team,
    apiKeys,
    apiKeyAuth,
    tenants,
    llmSettings,
    files,
    agents,
    runs,
    projects,
    chat,
    chatExport,
    auditLog,
    gdpr,
    webhooks,
    exports,
    schedules,
    restores,
    regions,
    archive,

    /**
     * Background work, once the app is ready: the job runner (unless `jobs: false`), the legacy keys' watch and the
     * webhook worker.
     */
    async start(): Promise<void> {
      if (o.jobs !== false) await jobs.start()
      await legacy.start()
      if (workerOpts && workerOpts.concurrency > 0) {
        worker = startWebhookWorker({
          db,
          secrets,
          policy: outbound,
          registry,
          log: moduleLog('webhooks'),
          userAgent: `Atrium-Webhooks/${VERSION}`,
          now,
          ...workerOpts,
        })
      }
    },

    /**
     * Stops what start started and closes what was opened, before the platform's pools close: the
     * webhook worker drains its attempts in flight, and the job runner its handlers within half the
     * shutdown budget, so the pools still have time to close after it.
     */
    async close(): Promise<void> {
      await worker?.stop()
      legacy.close()
      if (o.jobs !== false) await jobs.stop({ graceMs: Math.max(1000, (config.SHUTDOWN_TIMEOUT_SECONDS * 1000) / 2) })
      // After the job runner's grace, not before it: closing them cuts the model calls and tool
      // fetches of the runs and replies still finishing, which then failed instead of ending.
      agentEnv.fetch.close()
      llmSettings.close()
      await credentials.close()
      providers.close()
    },
  }
}

/** Where the regions' data lives, as GET /regions/routing says it (no credential). */
function regionsOf({ config }: Platform) {
  const database = config.DATABASE_URL ? new URL(config.DATABASE_URL) : null
  const stores: Record<string, { kind: 's3' | 'local'; endpoint: string | null; bucket: string | null }> = {
    [config.DEFAULT_REGION]: config.R2_ENDPOINT
      ? { kind: 's3', endpoint: config.R2_ENDPOINT, bucket: config.R2_BUCKET }
      : { kind: 'local', endpoint: null, bucket: null },
  }
  for (const [code, r] of Object.entries(config.REGION_STORES))
    stores[code] = { kind: 's3', endpoint: r.endpoint, bucket: r.bucket }
  return {
    defaultRegion: config.DEFAULT_REGION,
    regionStores: Object.keys(config.REGION_STORES),
    where: {
      stores,
      database: database
        ? { kind: 'postgres' as const, host: database.host, name: database.pathname.slice(1) || null }
        : { kind: 'embedded' as const, host: null, name: null },
    },
  }
}
