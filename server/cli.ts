// Admin CLI: `npm run --silent admin -- <command> [options]`. Each command prints exactly one JSON
// line on stdout (logs go to stderr), so scripts and the installer can parse it.
// Exit codes: 0 done, 1 failed, 2 bad usage or input.
import { parseArgs } from 'node:util'
import pino from 'pino'
import { loadConfigOrExit } from './config.js'
import { AppError } from './http/errors.js'
import { isMain } from './is-main.js'
import { KEY_TYPES, type KeyType } from './modules/api-keys/keys.js'
import { ALL } from './http/permissions.js'
import { createKey } from './modules/api-keys/service.js'
import { createTenant } from './modules/tenants/service.js'
import { tenantExists } from './modules/tenants/store.js'
import { openDb, type Db } from './platform/db.js'
import { migrate } from './platform/migrate.js'

const USAGE = `Usage: npm run --silent admin -- <command> [options]

Commands:
  serve                          run the API server (same as npm start)
  migrate                        apply pending database migrations
  create-tenant --name N [--plan free|pro|growth|enterprise] [--email E] [--password P]
                                 create a tenant, its owner and an svc_ci_ key with every permission;
                                 prints {"tenantId","userId","apiKey"}
  create-key (--tenant ID --type sdk|ci | --type admin) [--permissions a,b] [--name N] [--expires-in-days D]
                                 create an API key; prints {"id","apiKey","type","permissions"}
  help                           this text
`

class UsageError extends Error {}

const print = (value: unknown) => process.stdout.write(JSON.stringify(value) + '\n')

async function withDb<T>(fn: (db: Db) => Promise<T>, opts: { migrate: boolean }): Promise<T> {
  const config = loadConfigOrExit()
  const log = pino({ level: 'warn' }, pino.destination(2))
  const db = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 2, log })
  try {
    if (opts.migrate && config.MIGRATE_ON_START) await migrate(db.sql)
    return await fn(db)
  } finally {
    await db.close()
  }
}

function options(args: string[], spec: Record<string, { type: 'string' }>) {
  try {
    return parseArgs({ args, options: spec, strict: true, allowPositionals: false }).values as Record<string, string | undefined>
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}

export async function run(argv: string[]): Promise<void> {
  const [command, ...args] = argv
  switch (command) {
    case 'serve': {
      const { serve } = await import('./main.js')
      return serve()
    }
    case 'migrate': {
      options(args, {})
      const applied = await withDb((db) => migrate(db.sql), { migrate: false })
      print({ applied })
      return
    }
    case 'create-tenant': {
      const o = options(args, { name: { type: 'string' }, plan: { type: 'string' }, email: { type: 'string' }, password: { type: 'string' } })
      if (!o.name) throw new UsageError('--name is required')
      const created = await withDb((db) => createTenant(db, { name: o.name!, plan: o.plan, email: o.email, password: o.password }), { migrate: true })
      print(created)
      return
    }
    case 'create-key': {
      const o = options(args, { tenant: { type: 'string' }, type: { type: 'string' }, permissions: { type: 'string' }, name: { type: 'string' }, 'expires-in-days': { type: 'string' } })
      const type = (o.type ?? 'ci') as KeyType
      if (!KEY_TYPES.includes(type)) throw new UsageError(`--type must be one of ${KEY_TYPES.join(', ')}`)
      if (type !== 'admin' && !o.tenant) throw new UsageError('--tenant is required for sdk and ci keys')
      const days = o['expires-in-days']
      if (days !== undefined && !/^[1-9]\d{0,4}$/.test(days)) throw new UsageError('--expires-in-days must be a whole number of days')
      const permissions = (o.permissions ?? ALL).split(',').map((p) => p.trim()).filter(Boolean)
      const created = await withDb(
        (db) =>
          db.system(async (sql) => {
            if (o.tenant && !(await tenantExists(sql, o.tenant))) throw new AppError('RESOURCE_NOT_FOUND', `tenant ${o.tenant} does not exist`)
            return createKey(sql, {
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
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(USAGE)
      return
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

if (isMain(import.meta.url)) {
  run(process.argv.slice(2)).catch((err: unknown) => {
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
