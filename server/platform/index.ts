// Opens every outside system once, each with its embedded default; closes them in reverse.
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { openLocalBlobs, openS3Blobs, type Blobs } from './blobs.js'
import { openCache, type Cache } from './cache.js'
import { openDb, type Db } from './db.js'
import { decideLicense, LicenseRefused, startLicense, type License, type LicenseOptions } from './license.js'
import { migrate, refuseNewerSchema } from './migrate.js'
import { createSecrets, loadMasterKey, type Secrets } from './secrets.js'
import { compilePolicy, outboundPolicyOf, type CompiledPolicy } from './outbound.js'
import { tenantStorage, type SiteAddress, type Storage } from './storage.js'
import { openTracing, type Tracing } from './tracing.js'
import { checkClock, clockLag, trustedTime, type TrustedTime } from './trusted-time.js'

export interface Platform {
  readonly config: Config
  readonly log: Logger
  readonly db: Db
  readonly cache: Cache
  /**
   * The platform's own store, for platform-level uses only (the readiness probe, serving the local
   * store's signed links). A tenant's objects are reached through `storage.forTenant`.
   */
  readonly blobs: Blobs
  /** The one place that decides which store holds a tenant's objects. */
  readonly storage: Storage
  readonly secrets: Secrets
  /** The outbound policy (OUTBOUND_ALLOWED_NETWORKS, AIR_GAPPED), compiled once: every call out is judged by it. */
  readonly outbound: CompiledPolicy
  readonly license: License
  /** Traces (TRACING_OTLP_ENDPOINT); `enabled` false and nothing started when it is empty. */
  readonly tracing: Tracing
  /** The time the license is judged by: never earlier than the database's clock or the latest time recorded. */
  readonly time: TrustedTime
  close(): Promise<void>
}

export interface PlatformOptions {
  migrate?: boolean
  /** Trusted keys and clock of the license (tests); the shipped keys and the real clock otherwise. */
  license?: LicenseOptions
}

export async function openPlatform(config: Config, log: Logger, opts: PlatformOptions = {}): Promise<Platform> {
  // First: a production server without a usable license stops before it touches anything.
  const decision = await decideLicense(config, opts.license)
  if (decision.kind === 'refused') throw new LicenseRefused(decision.summary)
  const time = trustedTime(opts.license?.now)
  const opened: { close(): Promise<void> }[] = []
  try {
    const outbound = compilePolicy(outboundPolicyOf(config))
    // Before the pools it wraps; closed last, so that the spans of everything closing are sent.
    const tracing = await openTracing(config, { policy: outbound, log })
    opened.push(tracing)
    const secrets = createSecrets(
      loadMasterKey({ configured: config.ENCRYPTION_MASTER_KEY, dataDir: config.DATA_DIR, log }),
    )
    const db = await openDb({
      databaseUrl: config.DATABASE_URL,
      dataDir: config.DATA_DIR,
      poolMax: config.DATABASE_POOL_MAX,
      log,
      tracing,
    })
    opened.push(db)
    if (opts.migrate ?? config.MIGRATE_ON_START) {
      const applied = await migrate(db.sql)
      if (applied.length) log.info({ applied }, 'database migrations applied')
    } else await refuseNewerSchema(db.sql)
    // Before the license says where it stands, so that it says so by the trusted time.
    await checkClock(db, time)
    clockLag(log, time)
    const license = startLicense(decision, config, log, time.now)
    opened.push({ close: async () => license.close() })
    const cache = await openCache({ redisUrl: config.REDIS_URL, log, tracing })
    opened.push(cache)
    const timeoutMs = config.STORAGE_TIMEOUT_SECONDS * 1000
    const blobs = config.R2_ENDPOINT
      ? await openS3Blobs({
          endpoint: config.R2_ENDPOINT,
          publicEndpoint: config.R2_PUBLIC_ENDPOINT,
          bucket: config.R2_BUCKET,
          accessKey: config.R2_ACCESS_KEY_ID,
          secretKey: config.R2_SECRET_ACCESS_KEY,
          region: config.R2_REGION,
          timeoutMs,
        })
      : openLocalBlobs({
          dir: join(config.DATA_DIR, 'blobs'),
          publicUrl: config.PUBLIC_URL,
          signingKey: secrets.deriveKey('blob-links'),
          log,
        })
    // The regions of REGION_STORES, each its own store beside the default region's (R2_*).
    const regions = new Map<string, Blobs>([[config.DEFAULT_REGION, blobs]])
    const addresses = new Map<string, SiteAddress>(
      config.R2_ENDPOINT
        ? [[config.DEFAULT_REGION, { endpoint: config.R2_ENDPOINT, signingRegion: config.R2_REGION }]]
        : [],
    )
    for (const [code, r] of Object.entries(config.REGION_STORES)) {
      addresses.set(code, { endpoint: r.endpoint, signingRegion: r.region })
      regions.set(
        code,
        await openS3Blobs({
          endpoint: r.endpoint,
          publicEndpoint: r.publicEndpoint || undefined,
          bucket: r.bucket,
          accessKey: r.accessKeyId,
          secretKey: r.secretAccessKey,
          region: r.region,
          timeoutMs,
        }),
      )
    }
    return {
      config,
      log,
      db,
      cache,
      blobs,
      storage: tenantStorage({
        db,
        defaultRegion: config.DEFAULT_REGION,
        regions,
        addresses,
        secrets,
        policy: outbound,
        timeoutMs,
      }),
      secrets,
      outbound,
      license,
      tracing,
      time,
      async close() {
        license.close()
        await cache.close()
        await db.close()
        await tracing.close()
      },
    }
  } catch (err) {
    for (const o of opened.reverse()) await o.close().catch(() => {})
    throw err
  }
}
