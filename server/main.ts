// Process entry: load config, open the platform, build the app, listen, drain on SIGTERM.
import { ADMIN_CLI } from './admin-cli.js'
import { buildApp } from './app.js'
import { listenMetrics } from './http/metrics.js'
import { loadConfigOrExit } from './config.js'
import { drain } from './lifecycle.js'
import { isMain } from '../common/is-main.js'
import { createLogger } from './logger.js'
import { openPlatform } from './platform/index.js'
import { LicenseRefused, type LicenseOptions } from './platform/license.js'
import { lagMessage } from './platform/trusted-time.js'

export interface ServeOptions {
  /** Trusted keys and clock of the license: only code passes them (tests), never a setting. */
  license?: LicenseOptions
}

export async function serve(opts: ServeOptions = {}): Promise<void> {
  const config = loadConfigOrExit()
  const log = createLogger(config.LOG_LEVEL)
  const platform = await openPlatform(config, log, { license: opts.license })
  const app = await buildApp(platform)
  const address = await app.listen({ port: config.PORT, host: config.HOST })
  const metrics = config.METRICS_PORT
    ? await listenMetrics(app.registry, { port: config.METRICS_PORT, host: config.HOST })
    : null

  const embedded = [
    platform.db.mode === 'embedded' ? 'database (PGlite)' : '',
    platform.cache.redis ? '' : 'cache (in-process)',
    platform.blobs.kind === 'local' ? 'blob storage (local folder)' : '',
  ].filter(Boolean)
  log.info(
    {
      address,
      url: config.PUBLIC_URL,
      embedded,
      airGapped: config.AIR_GAPPED,
      ...(metrics ? { metrics: metrics.address } : {}),
      ...(platform.tracing.enabled
        ? { tracing: { endpoint: config.TRACING_OTLP_ENDPOINT, sampleRatio: config.TRACING_SAMPLE_RATIO } }
        : {}),
    },
    'atrium listening',
  )
  const lag = lagMessage(platform.time)
  process.stderr.write(
    [
      '',
      `Atrium is listening on ${address} (public URL ${config.PUBLIC_URL})`,
      embedded.length
        ? `Embedded defaults in ${config.DATA_DIR}: ${embedded.join(', ')}`
        : 'Using the configured PostgreSQL, Redis and object storage',
      platform.license.message(),
      ...(lag ? [lag] : []),
      config.AIR_GAPPED
        ? 'Air-gapped (AIR_GAPPED=true): features that need outside APIs are off; outbound connections go only to OUTBOUND_ALLOWED_NETWORKS and OUTBOUND_ALLOWED_DOMAINS'
        : 'Connected (AIR_GAPPED=false): features that call outside APIs are available',
      `API docs: ${config.PUBLIC_URL}/docs   Health: ${config.PUBLIC_URL}/readyz   Metrics: ${metrics ? `${metrics.address}/metrics (METRICS_PORT)` : `${config.PUBLIC_URL}/metrics`}`,
      'Create the first tenant (prints its API key once; the password, 12+ characters, is one line on standard input):',
      `  ${ADMIN_CLI} create-tenant --name "My Company" --email admin@example.com --password-stdin`,
      '',
    ].join('\n'),
  )

  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'draining: finishing in-flight requests')
    const force = setTimeout(() => {
      log.error({ timeoutSeconds: config.SHUTDOWN_TIMEOUT_SECONDS }, 'drain timed out; exiting')
      process.exit(1)
    }, config.SHUTDOWN_TIMEOUT_SECONDS * 1000)
    force.unref()
    // Open connections get at most a fifth of the budget (5 s by default) to be used and closed (lifecycle.ts);
    // requests in flight go on meanwhile, and the rest is theirs and the job runner's.
    const window = Math.min(5000, config.SHUTDOWN_TIMEOUT_SECONDS * 200)
    Promise.all([drain(app, platform, window), metrics?.close()]).then(
      () => {
        log.info('stopped')
        process.exit(0)
      },
      (err: unknown) => {
        log.error({ err }, 'error while draining')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

/**
 * Why the server could not start, as one line on stderr and an exit code: 78 (EX_CONFIG) for a license production
 * refuses, as for a bad setting.
 */
function exitOnStartFailure(err: unknown): never {
  if (err instanceof LicenseRefused) {
    process.stderr.write(`license error: ${err.summary}\n`)
    process.exit(78)
  }
  process.stderr.write(`atrium failed to start: ${(err as Error).message}\n`)
  process.exit(1)
}

if (isMain(import.meta.url)) serve().catch(exitOnStartFailure)
