// Admin CLI: `npm run --silent admin -- <command> [options]` (compiled: `node dist/server/cli.js <command>`). Each
// command prints exactly one JSON line on stdout (logs go to stderr), so scripts and the installer can parse it.
// Exit codes: 0 done, 1 failed (a refusal such as the license's tenant limit also prints
// {"error":{code,message,details}} on stdout), 2 bad usage or input, 78 configuration or license
// problem (as the server).
import { parseArgs } from 'node:util'
import pino from 'pino'
import { Registry } from 'prom-client'
import { ADMIN_CLI } from './admin-cli.js'
import { readRegionStores } from '../config/schema.js'
import { loadConfigOrExit, loadSettingsOrExit } from './config.js'
import { EMAIL_RE } from '../common/email.js'
import { isMain } from '../common/is-main.js'
import { AppError } from './domain/errors.js'
import { ALL } from './domain/permissions.js'
import { PLANS } from './domain/plans.js'
import { apiKeyTags, KEY_TYPES, type KeyType } from './modules/api-keys/keys.js'
import { createKey } from './modules/api-keys/service.js'
import { createTenant } from './modules/tenants/service.js'
import { tenantExists } from './modules/tenants/store.js'
import { loginThrottle } from './modules/sign-in/throttle.js'
import { unlockSignIn } from './modules/sign-in/unlock.js'
import { openCache } from './platform/cache.js'
import { openCounters, RATE_LIMIT_PREFIX } from './platform/counters.js'
import { openDb, type Db } from './platform/db.js'
import { decideLicense, licenseOf, LicenseRefused, type LicenseOptions } from './platform/license.js'
import { migrate, waitForMigrations } from './platform/migrate.js'
import { createSecrets, loadMasterKey, type Secrets } from './platform/secrets.js'
import { readClock, trustedTime, type TimeSource, type TrustedTime } from './platform/trusted-time.js'

/** The most a password read from standard input may be (the API's own limit for a password is 1024 characters). */
export const MAX_STDIN_PASSWORD_BYTES = 1024

const USAGE = `Usage: ${ADMIN_CLI} <command> [options]

Commands:
  serve                          run the API server (same as npm start)
  migrate                        apply pending database migrations
  wait-for-migrations [--timeout-seconds S]
                                 wait until another process (the chart's migration Job) has applied every
                                 migration of this release (default 600 s); prints {"pending":[]}, exit 1
                                 with the versions still pending when the time is up
  create-tenant --name N [--plan ${PLANS.join('|')}] [--email E] [--password-stdin]
                                 create a tenant, its owner and an svc_ci_ key with every permission;
                                 prints {"tenantId","userId","apiKey"}; refused (exit 1) beyond the
                                 license's maxTenants. --password-stdin: the owner's password is the first
                                 line of standard input (at most ${MAX_STDIN_PASSWORD_BYTES} bytes), never an argument (every
                                 user of the machine sees a command line: ps, the engine's events)
  create-key (--tenant ID --type sdk|ci | --type admin) [--permissions a,b] [--name N] [--expires-in-days D]
                                 create an API key; prints {"id","apiKey","type","permissions"}
  license                        check LICENSE_KEY as the server would; needs no other setting. Prints
                                 {"status","customer","plan","expiresAt","maxTenants","daysLeft"?,"readOnly",
                                 "message","airGapped","clock"}; exit 78 when the server would refuse to
                                 start. With DATABASE_URL the license is judged, as the server does, by the
                                 later of this clock and the database's (clock.judgedBy, behindSeconds);
                                 without it (or when the database cannot be read) a license valid or in
                                 grace by this clock alone is "unconfirmed" (statusByThisClock, clock.unchecked)
  unlock-sign-in --email E       lift an address's sign-in lock (too many failed passwords): clears its failures
                                 from every address and the waits of each address that failed for it, and
                                 audits auth.sign_in_unlocked in each organization with an account for it.
                                 Prints {"email","failures","locked","addresses","waiting","accounts":[{"tenantId",
                                 "userId"}]}. Needs REDIS_URL: without it the counters are in the server's own
                                 memory (exit 1, SERVICE_UNAVAILABLE; restarting the server clears them)
  check-services                 check the PostgreSQL, Redis and S3 stores the settings name (DATABASE_URL,
                                 REDIS_URL, R2_*, REGION_STORES) from where this runs, as the installer's
                                 preflight does. Prints {"checks":[{id,title,status,found,required,fix}]},
                                 exit 0 whatever they found: the installer runs it inside the cluster
  help                           this text
`

class UsageError extends Error {}

/**
 * The first line of `input` (its line break dropped), for a secret handed over on standard input. At most `max` bytes
 * are kept: a longer line, or one that never ends, is refused once it passes the bound, not read whole.
 */
export async function readSecretLine(input: AsyncIterable<Buffer | string>, max: number): Promise<string> {
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of input) {
    const c = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    const end = c.indexOf(0x0a)
    const part = end === -1 ? c : c.subarray(0, end)
    size += part.length
    // Leaving the loop ends the stream: nothing past the bound (or past the line) is read.
    if (size > max) throw new UsageError(`the password on standard input is longer than ${max} bytes`)
    parts.push(part)
    if (end !== -1) break
  }
  const line = Buffer.concat(parts).toString('utf8').replace(/\r$/, '')
  if (!line) throw new UsageError('--password-stdin: standard input held no password (give it as one line)')
  return line
}

/** A refusal to report as one JSON line on stdout, exit 1. */
class Refused extends Error {
  constructor(readonly error: AppError) {
    super(error.message)
  }
}

const print = (value: unknown) => process.stdout.write(JSON.stringify(value) + '\n')

/** The database, and the master key's secrets (keys made here are tagged as the server tags them). */
async function withDb<T>(fn: (db: Db, secrets: Secrets) => Promise<T>, opts: { migrate: boolean }): Promise<T> {
  const config = loadConfigOrExit()
  const log = pino({ level: 'warn' }, pino.destination(2))
  const db = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 2, log })
  try {
    if (opts.migrate && config.MIGRATE_ON_START) await migrate(db.sql)
    return await fn(
      db,
      createSecrets(loadMasterKey({ configured: config.ENCRYPTION_MASTER_KEY, dataDir: config.DATA_DIR, log })),
    )
  } finally {
    await db.close()
  }
}

/**
 * What the license is judged by: the process clock, or a later one read from DATABASE_URL (the
 * database's clock, the installation's high-water mark). Read only; without DATABASE_URL, or with
 * a database that cannot be reached, the process clock is left, and `unchecked` says why.
 */
async function clockOf(
  databaseUrl: string,
  time: TrustedTime,
): Promise<{ judgedBy: TimeSource; behindSeconds: number; unchecked?: string }> {
  if (!databaseUrl)
    return {
      judgedBy: 'process',
      behindSeconds: 0,
      unchecked:
        "no DATABASE_URL: judged by this machine's clock alone, which the server checks against its database's",
    }
  const log = pino({ level: 'silent' })
  try {
    const db = await openDb({ databaseUrl, dataDir: '', poolMax: 1, log })
    try {
      time.observe(await db.system(readClock))
    } finally {
      await db.close()
    }
  } catch (err) {
    return {
      judgedBy: 'process',
      behindSeconds: 0,
      unchecked: `the database could not be read (${(err as Error).message}): judged by this machine's clock`,
    }
  }
  return { judgedBy: time.source(), behindSeconds: Math.round(time.behindMs() / 1000) }
}

/**
 * The command's `--name value` options and its `--switch`es (no value); anything else is a UsageError.
 */
function options<N extends string, S extends string = never>(
  args: string[],
  names: readonly N[] = [],
  switches: readonly S[] = [],
): Partial<Record<N, string>> & Partial<Record<S, boolean>> {
  const spec = {
    ...Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])),
    ...Object.fromEntries(switches.map((n) => [n, { type: 'boolean' as const }])),
  }
  try {
    const { values } = parseArgs({ args, options: spec, strict: true, allowPositionals: false })
    return values as Partial<Record<N, string>> & Partial<Record<S, boolean>>
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}

export interface CliOptions {
  /** Trusted keys and clock of the license: only code passes them (tests), never a setting. */
  license?: LicenseOptions
}

export async function run(argv: string[], opts: CliOptions = {}): Promise<void> {
  const [command, ...args] = argv
  switch (command) {
    case 'serve': {
      const { serve } = await import('./main.js')
      return serve({ license: opts.license })
    }
    case 'migrate': {
      options(args)
      const applied = await withDb((db) => migrate(db.sql), { migrate: false })
      print({ applied })
      return
    }
    case 'wait-for-migrations': {
      const o = options(args, ['timeout-seconds'])
      const seconds = o['timeout-seconds'] ?? '600'
      if (!/^[1-9]\d{0,5}$/.test(seconds)) throw new UsageError('--timeout-seconds must be a whole number of seconds')
      const r = await withDb((db) => waitForMigrations(db.sql, { timeoutMs: Number(seconds) * 1000 }), {
        migrate: false,
      })
      print({ pending: r.pending })
      if (!r.ok) process.exitCode = 1
      return
    }
    case 'create-tenant': {
      // A password as an argument would be on the command line, for every user (ps) and the container engine's event
      // stream to see: refused by name, with the way that works.
      if (args.some((a) => a === '--password' || a.startsWith('--password=')))
        throw new UsageError(
          "--password is not taken: a command line is visible to every user of the machine (ps) and in the container engine's events; give the password on standard input with --password-stdin",
        )
      const o = options(args, ['name', 'plan', 'email'], ['password-stdin'])
      if (!o.name) throw new UsageError('--name is required')
      const password = o['password-stdin'] ? await readSecretLine(process.stdin, MAX_STDIN_PASSWORD_BYTES) : undefined
      // The same decision as the server's: production needs a usable license; development without
      // one has no tenant limit.
      const config = loadConfigOrExit()
      const decision = await decideLicense(config, opts.license)
      if (decision.kind === 'refused') throw new LicenseRefused(decision.summary)
      const { maxTenants } = licenseOf(decision, config, opts.license?.now)
      const created = await withDb(
        (db, secrets) =>
          createTenant(
            { db, secrets },
            { name: o.name!, plan: o.plan, email: o.email, password },
            { maxTenants },
          ).catch((err: unknown) => {
            throw err instanceof AppError && err.details.reason === 'license_tenant_limit' ? new Refused(err) : err
          }),
        { migrate: true },
      )
      print(created)
      return
    }
    case 'license': {
      options(args)
      // LICENSE_KEY alone is enough: an admin checks a key before anything else is configured.
      const config = loadSettingsOrExit(['NODE_ENV', 'LICENSE_KEY', 'AIR_GAPPED', 'DATABASE_URL'])
      const decision = await decideLicense(config, opts.license)
      if (decision.kind === 'refused') {
        print({ status: 'invalid', reason: decision.reason, readOnly: false, message: decision.summary })
        throw new LicenseRefused(decision.summary)
      }
      // Judged as the server judges it: by the later of this clock and the database's, when there is one.
      const time = trustedTime(opts.license?.now)
      const clock = await clockOf(config.DATABASE_URL, time)
      const license = licenseOf(decision, config, time.now)
      const view = license.view()
      // A clock set back only makes a license look better than the server's later time would: valid or in grace by
      // this clock alone is not confirmed (expired is: the server's time is never earlier).
      const unconfirmed = clock.unchecked !== undefined && (view.status === 'valid' || view.status === 'grace')
      print({
        ...view,
        ...(unconfirmed ? { status: 'unconfirmed', statusByThisClock: view.status } : {}),
        message: unconfirmed
          ? `Unconfirmed: ${clock.unchecked}. By this clock: ${license.message()}`
          : license.message(),
        airGapped: config.AIR_GAPPED,
        clock,
        ...(decision.kind === 'unlicensed' && decision.problem ? { problem: decision.problem } : {}),
      })
      return
    }
    case 'create-key': {
      const o = options(args, ['tenant', 'type', 'permissions', 'name', 'expires-in-days'])
      const type = (o.type ?? 'ci') as KeyType
      if (!KEY_TYPES.includes(type)) throw new UsageError(`--type must be one of ${KEY_TYPES.join(', ')}`)
      if (type !== 'admin' && !o.tenant) throw new UsageError('--tenant is required for sdk and ci keys')
      const days = o['expires-in-days']
      if (days !== undefined && !/^[1-9]\d{0,4}$/.test(days))
        throw new UsageError('--expires-in-days must be a whole number of days')
      const permissions = (o.permissions ?? ALL)
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)
      const created = await withDb(
        (db, secrets) =>
          db.system(async (sql) => {
            if (o.tenant && !(await tenantExists(sql, o.tenant)))
              throw new AppError('RESOURCE_NOT_FOUND', `tenant ${o.tenant} does not exist`)
            return createKey(sql, apiKeyTags(secrets), {
              tenantId: type === 'admin' ? null : o.tenant!,
              type,
              name: o.name ?? '',
              permissions,
              expiresAt: days ? new Date(Date.now() + Number(days) * 86_400_000) : null,
            })
          }),
        { migrate: true },
      )
      print({ id: created.id, apiKey: created.key, type, permissions })
      return
    }
    case 'unlock-sign-in': {
      const o = options(args, ['email'])
      const email = o.email?.trim()
      if (!email || !EMAIL_RE.test(email)) throw new UsageError('--email must be an email address')
      const config = loadConfigOrExit()
      if (!config.REDIS_URL) {
        throw new Refused(
          new AppError(
            'SERVICE_UNAVAILABLE',
            "Without REDIS_URL the sign-in counters are in the server process's memory, out of this command's reach: restarting the server clears them",
            {
              reason: 'counters_in_server_memory',
            },
          ),
        )
      }
      const log = pino({ level: 'warn' }, pino.destination(2))
      const cache = await openCache({ redisUrl: config.REDIS_URL, log })
      try {
        // Unreachable, Redis is an error: the throttle's fallback to memory would clear nothing of the servers'.
        await cache.ping()
        const throttle = loginThrottle({
          counters: openCounters({ redis: cache.redis, log, registry: new Registry() }),
          keyPrefix: RATE_LIMIT_PREFIX,
        })
        const unlocked = await withDb((db) => unlockSignIn({ db, throttle }, email), { migrate: true })
        print({ email, ...unlocked })
      } finally {
        await cache.close()
      }
      return
    }
    case 'check-services': {
      options(args)
      // Loaded here: the S3 client and the checks are not needed by any other command.
      const { namedServiceChecks, regionStoreChecks } = await import('../common/service-checks.js')
      const env = process.env
      const [services, stores] = await Promise.all([
        namedServiceChecks(env),
        regionStoreChecks(readRegionStores(env.REGION_STORES)),
      ])
      print({ checks: [...services, ...stores] })
      return
    }
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(USAGE)
      return
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

/** run() with the exit codes above. */
export function main(argv: string[], opts: CliOptions = {}): void {
  run(argv, opts).catch((err: unknown) => {
    if (err instanceof LicenseRefused) {
      process.stderr.write(`license error: ${err.summary}\n`)
      process.exit(78)
    }
    if (err instanceof Refused) {
      print({ error: { code: err.error.code, message: err.error.message, details: err.error.details } })
      process.stderr.write(`error: ${err.message}\n`)
      process.exit(1)
    }
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n\n${USAGE}`)
      process.exit(2)
    }
    if (err instanceof AppError && err.status < 500) {
      process.stderr.write(`error: ${err.message}\n`)
      process.exit(2)
    }
    process.stderr.write(`error: ${(err as Error).message}\n`)
    process.exit(1)
  })
}

if (isMain(import.meta.url)) main(process.argv.slice(2))
