// buildApp(platform): HTTP plugins, then modules. No I/O of its own: everything outside comes in
// through the platform, so a test builds the same app on real services or embedded defaults.
//
// Every plugin is named (fastify-plugin) and lists in `dependencies` the plugins it needs, so
// Fastify refuses to start when one is missing or registered after it. What plugins share reaches
// them one way: as a decoration of the root instance, declared (module augmentation) in the file of
// the plugin that makes it: the platform, clock, registry and outbound policy ('atrium-platform'),
// credentials ('atrium-credentials'), counters and the sign-in guard ('atrium-limits'), the job
// runner ('atrium-jobs'), model calls ('atrium-llm'), addAuthenticator ('atrium-auth'), the sign-in service and token issuer
// ('atrium-sign-in'). Every plugin is given the AppOptions as its options and reads only its own fields.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify'
import cookie from '@fastify/cookie'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { authPlugin } from './http/auth.js'
import { credentialsPlugin } from './http/credentials.js'
import { compileOnUse, serializersOnUse, type CompileOnUse } from './http/compile-on-use.js'
import { clientErrorHandler, envelopePlugin, frameworkErrors, genReqId } from './http/envelope.js'
import { jobsPlugin, type JobsOptions } from './http/jobs.js'
import { licensePlugin } from './http/license.js'
import { llmPlugin } from './http/llm.js'
import { limitsPlugin, type LimitsOptions } from './http/limits.js'
import { metricsPlugin } from './http/metrics.js'
import { openapiPlugin } from './http/openapi.js'
import { pagesPlugin } from './http/pages.js'
import { platformPlugin, type PlatformOptions } from './http/platform.js'
import { requestLogPlugin } from './http/request-log.js'
import { validationPlugin } from './http/validation.js'
import { agentsPlugin, type AgentsOptions } from './modules/agents/plugin.js'
import { apiKeysPlugin } from './modules/api-keys/plugin.js'
import { chatPlugin, type ChatOptions } from './modules/chat/plugin.js'
import { auditPlugin } from './modules/audit/plugin.js'
import { signInPlugin, type SignInOptions } from './modules/auth/plugin.js'
import { cliAuthPlugin } from './modules/cli-auth/plugin.js'
import { downloadsPlugin } from './modules/downloads/plugin.js'
import { exportsPlugin, type ExportsOptions } from './modules/exports/plugin.js'
import { gdprPlugin } from './modules/gdpr/plugin.js'
import { oauthPlugin } from './modules/oauth/plugin.js'
import { opsPlugin } from './modules/ops/plugin.js'
import { projectsPlugin } from './modules/projects/plugin.js'
import { regionsPlugin } from './modules/regions/plugin.js'
import { restoresPlugin, type RestoresOptions } from './modules/restores/plugin.js'
import { teamPlugin } from './modules/team/plugin.js'
import { tenantsPlugin } from './modules/tenants/plugin.js'
import { webhooksPlugin, type WebhooksOptions } from './modules/webhooks/plugin.js'
import type { Platform } from './platform/index.js'
import { lazyRequestLogger } from './logger.js'
import type pino from 'pino'
import type { Logger } from 'pino'

/** What a caller (tests) may change; each field is documented by the plugin that reads it. */
export interface AppOptions extends PlatformOptions, LimitsOptions, JobsOptions, SignInOptions, WebhooksOptions, AgentsOptions, ChatOptions, ExportsOptions, RestoresOptions {}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set on SIGTERM: readiness fails so the load balancer stops sending traffic. */
    draining: boolean
    /** Route schemas, compiled on first use (http/compile-on-use.ts). */
    schemas: CompileOnUse
  }
}

/** HTTP plugins, in the order their hooks run on a request. */
const HTTP: FastifyPluginAsync<AppOptions>[] = [
  envelopePlugin,
  validationPlugin,
  requestLogPlugin,
  metricsPlugin,
  openapiPlugin,
  credentialsPlugin,
  limitsPlugin,
  jobsPlugin,
  llmPlugin,
  authPlugin,
  licensePlugin,
  pagesPlugin,
]

/**
 * Modules. Sign-in comes before those that start sessions through it (cli-auth, oauth, team);
 * tenants (the LLM settings) before agents, and agents before projects, whose backups list them.
 */
const MODULES: FastifyPluginAsync<AppOptions>[] = [
  opsPlugin,
  downloadsPlugin,
  signInPlugin,
  cliAuthPlugin,
  oauthPlugin,
  tenantsPlugin,
  agentsPlugin,
  projectsPlugin,
  chatPlugin,
  apiKeysPlugin,
  auditPlugin,
  teamPlugin,
  webhooksPlugin,
  exportsPlugin,
  restoresPlugin,
  gdprPlugin,
  regionsPlugin,
]

export async function buildApp(platform: Platform, opts: AppOptions = {}): Promise<FastifyInstance> {
  const { config, log } = platform
  const schemas = compileOnUse()
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    genReqId,
    requestIdHeader: false,
    // Fastify's two lines per request are replaced by the one 'atrium-request-log' writes.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    childLoggerFactory: (logger, bindings, opts) => lazyRequestLogger(logger as Logger, bindings, opts as pino.ChildLoggerOptions),
    bodyLimit: config.MAX_REQUEST_BODY_BYTES,
    trustProxy: config.TRUSTED_PROXIES.length ? config.TRUSTED_PROXIES : false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Refusals before routing (a URL that does not decode, a parameter too long) and of Node's parser
    // (headers too large, a malformed request) are answered in the envelope too.
    frameworkErrors,
    clientErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: serializersOnUse(schemas) } },
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('draining', false)
  app.decorate('schemas', schemas)
  // While draining, each answer closes its connection: a kept-alive socket would hold the shutdown
  // open until its idle timeout once its last request was answered.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (app.draining) reply.header('connection', 'close')
    done(null, payload)
  })

  await app.register(platformPlugin, { ...opts, platform })
  // Cookies for the modules that sign in (each lists '@fastify/cookie'); parsing them first changes nothing.
  await app.register(cookie)
  for (const plugin of [...HTTP, ...MODULES]) await app.register(plugin, opts)
  return app
}
