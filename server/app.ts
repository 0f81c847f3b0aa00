// buildApp(platform): what is built, then what is served. buildServices (services.ts, the composition root) builds
// every adapter and service once, in the order the data flows; the app gives the job runner its queues (the registry,
// jobs.ts, with the handlers the modules export) and hands the rest on: first the decorations the request pipeline
// reads (decorations.ts), then the HTTP plugins, in the order their hooks run on a request, then one plugin per module,
// which registers its routes with the services it is given. No I/O of its own: everything outside comes in through the
// platform, so a test builds the same app on real services or embedded defaults. main.ts listens.
//
// Every plugin is named (fastify-plugin) and lists in `dependencies` the plugins whose hooks or
// decorations it needs, so Fastify refuses to start when one is missing or registered after it.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify'
import cookie from '@fastify/cookie'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { DECORATIONS } from './decorations.js'
import { authPlugin } from './http/auth.js'
import { compileOnUse, serializersOnUse, type CompileOnUse } from './http/compile-on-use.js'
import { clientErrorHandler, envelopePlugin, frameworkErrors, genReqId } from './http/envelope.js'
import { licensePlugin } from './http/license.js'
import { metricsPlugin } from './http/metrics.js'
import { openapiPlugin } from './http/openapi.js'
import { pagesPlugin } from './http/pages.js'
import { requestLogPlugin } from './http/request-log.js'
import { tracingPlugin } from './http/tracing.js'
import { validationPlugin } from './http/validation.js'
import { agentsPlugin } from './modules/agents/plugin.js'
import { apiKeysPlugin } from './modules/api-keys/plugin.js'
import { chatPlugin } from './modules/chat/plugin.js'
import { auditPlugin } from './modules/audit/plugin.js'
import { signInPlugin } from './modules/sign-in/plugin.js'
import { cliAuthPlugin } from './modules/cli-auth/plugin.js'
import { downloadsPlugin } from './modules/downloads/plugin.js'
import { exportsPlugin } from './modules/exports/plugin.js'
import { gdprPlugin } from './modules/gdpr/plugin.js'
import { oauthPlugin } from './modules/oauth/plugin.js'
import { opsPlugin } from './modules/ops/plugin.js'
import { projectsPlugin } from './modules/projects/plugin.js'
import { regionsPlugin } from './modules/regions/plugin.js'
import { restoresPlugin } from './modules/restores/plugin.js'
import { teamPlugin } from './modules/team/plugin.js'
import { tenantsPlugin } from './modules/tenants/plugin.js'
import { webhooksPlugin } from './modules/webhooks/plugin.js'
import type { Platform } from './platform/index.js'
import { lazyRequestLogger } from './logger.js'
import { initJobs, jobHandlers, type QueueOptions } from './jobs.js'
import { buildServices, type Services, type ServicesOptions } from './services.js'
import type pino from 'pino'
import type { Logger } from 'pino'

/** What a caller (tests) may change: the services' options (services.ts) and the queues' numbers (jobs.ts). */
export type AppOptions = ServicesOptions & QueueOptions

declare module 'fastify' {
  interface FastifyInstance {
    /** Set on SIGTERM: readiness fails so the load balancer stops sending traffic. */
    draining: boolean
    /** Route schemas, compiled on first use (http/compile-on-use.ts). */
    schemas: CompileOnUse
  }
}

/** HTTP plugins, in the order their hooks run on a request. */
const HTTP: FastifyPluginAsync[] = [
  // First: every later hook, and the handler, runs in the request's span.
  tracingPlugin,
  envelopePlugin,
  validationPlugin,
  requestLogPlugin,
  metricsPlugin,
  openapiPlugin,
  authPlugin,
  licensePlugin,
  pagesPlugin,
]

/** Modules, each given the services (it reads the ones its options name); their routes are registered in this order. */
const MODULES: FastifyPluginAsync<Services>[] = [
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
  const services = await buildServices(platform, opts)
  initJobs(services.jobs, jobHandlers(services), config, opts)
  const schemas = compileOnUse()
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    genReqId,
    requestIdHeader: false,
    // Fastify's two lines per request are replaced by the one 'atrium-request-log' writes.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    childLoggerFactory: (logger, bindings, opts) =>
      lazyRequestLogger(logger as Logger, bindings, opts as pino.ChildLoggerOptions),
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

  // Background work starts once the app is ready; on close (the last hook to run) it drains, before the platform's
  // pools close.
  app.addHook('onReady', () => services.start())
  app.addHook('onClose', () => services.close())

  for (const plugin of DECORATIONS) await app.register(plugin, services)
  // Cookies for the modules that sign in (each lists '@fastify/cookie'); parsing them first changes nothing.
  await app.register(cookie)
  for (const plugin of HTTP) await app.register(plugin)
  for (const plugin of MODULES) await app.register(plugin, services)
  return app
}
