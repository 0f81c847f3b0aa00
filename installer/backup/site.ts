// Where a site's data lives, as the backup reaches it: its PostgreSQL (through PostgreSQL's own
// tools) and every bucket it keeps objects in (R2_* and each REGION_STORES entry). A Compose site's
// bundled PostgreSQL is reached inside its container (`docker compose exec`: the tools there match
// its version, and it publishes no port); its bundled MinIO at the port it publishes. A site with
// its own services (Helm, or Compose with external ones) is reached as the preflight reaches them:
// at the addresses the configuration names, with pg_dump, pg_restore and psql on this machine.
import { readRegionStores } from '../../config/schema.js'
import { hostOf, usesBundled, composeArgs } from '../core/compose-bundle.js'
import { siteConfig, type Resolved } from '../core/context.js'

export type PgTool = 'pg_dump' | 'pg_restore' | 'psql'

export interface PgCommand {
  file: string
  args: string[]
  /** libpq's settings (PGHOST, PGPASSWORD...): a password never goes in the arguments, which `ps` shows. */
  env: Record<string, string>
}

export interface DatabaseAccess {
  /** Where, for messages (never with the password). */
  where: string
  /** In the bundled container: its tools are its version's. */
  inContainer: boolean
  command(tool: PgTool, args: readonly string[]): PgCommand
  /** The tool without the connection (`--version`). */
  bare(tool: PgTool, args: readonly string[]): PgCommand
}

export interface Store {
  /** `default` for R2_*, the region code for a REGION_STORES entry. */
  name: string
  endpoint: string
  bucket: string
  accessKey: string
  secretKey: string
  region: string
}

export interface SiteServices {
  database: DatabaseAccess
  stores: Store[]
}

/** libpq's environment for a postgres:// URL: every part of it, so the tools connect exactly where the server does. */
export function libpqEnv(url: string): Record<string, string> {
  const u = new URL(url)
  const env: Record<string, string> = {
    PGHOST: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    PGPORT: u.port || '5432',
    PGUSER: decodeURIComponent(u.username),
    PGDATABASE: decodeURIComponent(u.pathname.slice(1)),
  }
  if (u.password) env.PGPASSWORD = decodeURIComponent(u.password)
  const ssl = u.searchParams.get('sslmode') ?? (u.searchParams.get('ssl') === 'true' ? 'require' : null)
  if (ssl) env.PGSSLMODE = ssl
  return env
}

/** A URL without its password, for messages. */
const shown = (url: string) => {
  const u = new URL(url)
  return `${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.host}${u.pathname}`
}

/** The host address a Compose service's published port answers at, from this machine. */
const publishedHost = (bind: string | undefined) =>
  !bind || bind === '0.0.0.0' ? '127.0.0.1' : bind === '::' ? '[::1]' : bind.includes(':') ? `[${bind}]` : bind

/** A PostgreSQL reached at its URL with the client tools of this machine. */
export function directDatabase(url: string): DatabaseAccess {
  const env = libpqEnv(url)
  // pg_restore restores into --dbname only (without it, it prints SQL); the others read PGDATABASE.
  return {
    where: shown(url),
    inContainer: false,
    command: (tool, args) => ({
      file: tool,
      args: tool === 'pg_restore' ? ['--dbname', env.PGDATABASE!, ...args] : [...args],
      env,
    }),
    bare: (tool, args) => ({ file: tool, args: [...args], env: {} }),
  }
}

/** How this site's data is reached, or every reason it cannot be. */
export function siteServices(ctx: Resolved): { services: SiteServices } | { problems: string[] } {
  const config = siteConfig(ctx)
  const problems: string[] = []
  const compose = ctx.files.target === 'compose'
  const profiles = (config.COMPOSE_PROFILES ?? '').split(',')
  const dbUrl = config.DATABASE_URL ?? ''
  let database: DatabaseAccess | null = null
  if (!dbUrl)
    problems.push(
      `DATABASE_URL is not configured for this site (${ctx.files.target === 'compose' ? ctx.files.env : ctx.files.secret}): configure it first`,
    )
  else if (!URL.canParse(dbUrl)) problems.push('DATABASE_URL is not a URL')
  else if (ctx.files.target === 'compose' && usesBundled(dbUrl) && profiles.includes('postgres')) {
    const env = libpqEnv(dbUrl)
    const exec = [...composeArgs(ctx.answers, ctx.files.env), 'exec', '-T', 'postgres']
    database = {
      where: `the bundled PostgreSQL (${shown(dbUrl)}, in its container)`,
      inContainer: true,
      // Inside the container the local socket trusts its own users: no password is needed or passed.
      command: (tool, args) => ({
        file: 'docker',
        args: [...exec, tool, '--username', env.PGUSER!, '--dbname', env.PGDATABASE!, ...args],
        env: {},
      }),
      bare: (tool, args) => ({ file: 'docker', args: [...exec, tool, ...args], env: {} }),
    }
  } else database = directDatabase(dbUrl)
  const stores: Store[] = []
  const endpoint = config.R2_ENDPOINT ?? ''
  if (!endpoint) problems.push('R2_ENDPOINT is not configured for this site: configure it first')
  else {
    const bundledS3 = compose && usesBundled(endpoint) && profiles.includes('s3')
    stores.push({
      name: 'default',
      endpoint: bundledS3
        ? `http://${publishedHost(config.ATRIUM_BIND_ADDRESS)}:${config.ATRIUM_S3_PORT || '9000'}`
        : endpoint,
      bucket: config.R2_BUCKET || 'atrium',
      accessKey: config.R2_ACCESS_KEY_ID ?? '',
      secretKey: config.R2_SECRET_ACCESS_KEY ?? '',
      region: config.R2_REGION || 'us-east-1',
    })
    if (!bundledS3 && compose && BUNDLED_HOST_ONLY.has(hostOf(endpoint)))
      problems.push(`R2_ENDPOINT names ${hostOf(endpoint)}, which only the Compose network knows`)
  }
  const regions = readRegionStores(config.REGION_STORES)
  if ('problems' in regions) problems.push(`REGION_STORES: ${regions.problems.join('; ')}`)
  else
    for (const [code, s] of Object.entries(regions.value))
      stores.push({
        name: code,
        endpoint: s.endpoint,
        bucket: s.bucket,
        accessKey: s.accessKeyId,
        secretKey: s.secretAccessKey,
        region: s.region || 'us-east-1',
      })
  return problems.length || !database ? { problems } : { services: { database, stores } }
}

const BUNDLED_HOST_ONLY = new Set(['minio'])
