// Checks of the services Atrium will use: PostgreSQL, Redis and the S3 store. Each talks to the
// real service with a short timeout and turns every failure into a `fail` that says what went
// wrong and how to fix it; none throws, and no password ever appears in what they report.
import { isIP } from 'node:net'
import { Redis } from 'ioredis'
import { Client } from 'minio'
import postgres from 'postgres'
import type { CheckResult, CheckStatus } from './check.js'
import { compareVersions, parseVersion } from './tools.js'

const DEFAULT_TIMEOUT_MS = 5000

/** host:port of a URL, never its credentials. */
export function where(url: string): string {
  try {
    const u = new URL(url)
    return `${u.hostname}${u.port ? `:${u.port}` : ''}`
  } catch {
    return '(not a URL)'
  }
}

const check = (id: string, title: string, status: CheckStatus, found: string, required: string, fix = ''): CheckResult =>
  ({ id, title, status, found, required, fix: status === 'pass' ? '' : fix })

const messageOf = (err: unknown) => {
  const e = err as { code?: string; message?: string; errors?: { code?: string }[] }
  // Node's AggregateError (IPv4 and IPv6 both refused) hides the code in its parts.
  return e.code ?? e.errors?.[0]?.code ?? e.message ?? String(err)
}

const unreachable = (id: string, what: string, url: string, err: unknown) =>
  check(id, `${what} reachable`, 'fail', `not reachable at ${where(url)} (${messageOf(err)})`, `${what} answering at ${where(url)}`,
    `Start ${what}, or correct the host and port; check firewalls between this machine and ${where(url)}`)

// --- PostgreSQL -------------------------------------------------------------------------------

export const POSTGRES_MINIMUM = 150000

export function gradePostgresVersion(versionNum: number, version: string): CheckResult {
  return check('postgres.version', 'PostgreSQL version', versionNum >= POSTGRES_MINIMUM ? 'pass' : 'fail', `PostgreSQL ${version}`, 'PostgreSQL 15 or newer',
    'Upgrade PostgreSQL to 15 or newer (pg_upgrade), or point DATABASE_URL at a newer server')
}

export interface PostgresPrivileges { user: string; database: string; superuser: boolean; createrole: boolean; createOnDb: boolean }

/** The migrations create two roles and the schema's tables, policies and functions. */
export function gradePostgresPrivileges(p: PostgresPrivileges): CheckResult {
  const ok = p.superuser || (p.createrole && p.createOnDb)
  const has = p.superuser ? 'superuser' : [p.createrole ? 'CREATEROLE' : 'no CREATEROLE', p.createOnDb ? `CREATE on ${p.database}` : `no CREATE on ${p.database}`].join(', ')
  const grants = [!p.createrole && `ALTER ROLE "${p.user}" CREATEROLE;`, !p.createOnDb && `GRANT CREATE ON DATABASE "${p.database}" TO "${p.user}";`].filter(Boolean).join(' ')
  return check('postgres.privileges', 'PostgreSQL privileges for migrations', ok ? 'pass' : 'fail', `user ${p.user}: ${has}`,
    'CREATEROLE and CREATE on the database (or superuser)', `As a superuser run: ${grants}`)
}

export async function postgresChecks(url: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CheckResult[]> {
  const sql = postgres(url, { max: 1, connect_timeout: Math.ceil(timeoutMs / 1000), idle_timeout: 1, onnotice: () => {}, connection: { application_name: 'atrium-installer' } })
  try {
    const [row] = await sql<{ num: string; version: string; user: string; database: string; superuser: boolean; createrole: boolean; create_on_db: boolean }[]>`
      select current_setting('server_version_num') as num, current_setting('server_version') as version,
             current_user as user, current_database() as database, r.rolsuper as superuser, r.rolcreaterole as createrole,
             has_database_privilege(current_database(), 'CREATE') as create_on_db
        from pg_roles r where r.rolname = current_user`
    const r = row!
    return [
      check('postgres.connect', 'PostgreSQL reachable', 'pass', `connected to ${r.database} at ${where(url)} as ${r.user}`, 'a PostgreSQL server that accepts DATABASE_URL'),
      gradePostgresVersion(Number(r.num), r.version.split(' ')[0]!),
      gradePostgresPrivileges({ user: r.user, database: r.database, superuser: r.superuser, createrole: r.createrole, createOnDb: r.create_on_db }),
    ]
  } catch (err) {
    const code = (err as { code?: string }).code
    const user = (() => { try { return decodeURIComponent(new URL(url).username) || '(default user)' } catch { return '' } })()
    if (code === '28P01' || code === '28000') {
      return [check('postgres.connect', 'PostgreSQL reachable', 'fail', `authentication failed for user ${user}`, 'a PostgreSQL server that accepts DATABASE_URL',
        'Correct the user and password in DATABASE_URL, and check pg_hba.conf allows this machine')]
    }
    if (code === '3D000') {
      return [check('postgres.connect', 'PostgreSQL reachable', 'fail', `the database in DATABASE_URL does not exist at ${where(url)}`, 'an existing database',
        'Create it first (CREATE DATABASE atrium OWNER ...), or correct the name in DATABASE_URL')]
    }
    return [unreachable('postgres.connect', 'PostgreSQL', url, err)]
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {})
  }
}

// --- Redis ------------------------------------------------------------------------------------

export const REDIS_MINIMUM = '7.0.0'

export function gradeRedisVersion(version: string): CheckResult {
  const v = parseVersion(version)
  const ok = v !== null && compareVersions(v, parseVersion(REDIS_MINIMUM)!) >= 0
  return check('redis.version', 'Redis version', ok ? 'pass' : 'fail', `Redis ${version}`, 'Redis 7.0 or newer', 'Upgrade Redis to 7 or newer, or point REDIS_URL at a newer server')
}

/**
 * Rate-limit counters and cross-replica signals live in Redis: a policy that evicts any key
 * (allkeys-*) silently lifts limits, so it fails; volatile-* evicts only keys with a lifetime
 * (ours have one), which works but can still drop live counters under pressure, so it warns.
 */
export function gradeRedisEviction(policy: string | null): CheckResult {
  const status: CheckStatus = policy === 'noeviction' ? 'pass' : policy === null || policy.startsWith('volatile-') ? 'warn' : 'fail'
  return check('redis.eviction', 'Redis eviction policy', status, policy === null ? 'could not read maxmemory-policy' : `maxmemory-policy ${policy}`, 'noeviction (volatile-* tolerated)',
    'Set maxmemory-policy noeviction in redis.conf (or CONFIG SET maxmemory-policy noeviction) and size maxmemory for the load')
}

export async function redisChecks(url: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CheckResult[]> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, commandTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
  let cause: unknown = null
  // The socket's own error (ECONNREFUSED...) says more than the command's "Connection is closed".
  redis.on('error', (err) => (cause ??= err))
  try {
    await redis.connect()
    const info = await redis.info()
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? null
    let policy = field('maxmemory_policy')
    if (policy === null) policy = await redis.config('GET', 'maxmemory-policy').then((r) => (r as string[])[1] ?? null, () => null)
    return [
      check('redis.connect', 'Redis reachable', 'pass', `connected to ${where(url)}`, 'a Redis server that accepts REDIS_URL'),
      gradeRedisVersion(field('redis_version') ?? 'unknown'),
      gradeRedisEviction(policy),
    ]
  } catch (err) {
    const msg = `${(err as Error).message} ${(cause as Error | null)?.message ?? ''}`
    if (/NOAUTH|WRONGPASS|invalid password|invalid username-password/i.test(msg)) {
      return [check('redis.connect', 'Redis reachable', 'fail', `authentication failed at ${where(url)}`, 'a Redis server that accepts REDIS_URL',
        'Correct the user and password in REDIS_URL (redis://user:password@host:port)')]
    }
    return [unreachable('redis.connect', 'Redis', url, cause ?? err)]
  } finally {
    redis.disconnect()
  }
}

// --- S3 ---------------------------------------------------------------------------------------

export interface S3Target { endpoint: string; bucket: string; accessKey: string; secretKey: string; region: string }
export type Addressing = 'path-style' | 'virtual-hosted'

function s3Client(t: S3Target, pathStyle: boolean): Client {
  const url = new URL(t.endpoint)
  return new Client({
    endPoint: url.hostname, port: url.port ? Number(url.port) : undefined, useSSL: url.protocol === 'https:',
    accessKey: t.accessKey, secretKey: t.secretKey, region: t.region, pathStyle,
  })
}

const withTimeout = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(Object.assign(new Error(`${what} timed out`), { code: 'ETIMEDOUT' })), ms).unref())])

/**
 * Virtual-hosted addressing (bucket.host) needs DNS for every bucket name; stores reached by IP or
 * a single-label name can only be addressed by path. Where both could work, the store decides.
 */
export async function detectAddressing(t: S3Target, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<Addressing> {
  const host = new URL(t.endpoint).hostname
  if (isIP(host.replace(/^\[|\]$/g, '')) || !host.includes('.')) return 'path-style'
  try {
    await withTimeout(s3Client(t, false).bucketExists(t.bucket), timeoutMs, 'virtual-hosted request')
    return 'virtual-hosted'
  } catch {
    return 'path-style'
  }
}

const S3_AUTH = /InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|InvalidToken/

/** A full round trip: the bucket (found or made), put, get, presigned get, delete. */
export async function s3Checks(t: S3Target, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CheckResult[]> {
  const required = 'an S3-compatible store where the bucket can be created or used, with put, get, presigned get and delete'
  const addressing = await detectAddressing(t, timeoutMs)
  const client = s3Client(t, addressing === 'path-style')
  const key = `atrium-preflight/${Date.now()}-${Math.random().toString(36).slice(2)}`
  const body = Buffer.from(`atrium preflight ${key}`)
  let step = 'find or create the bucket'
  try {
    const step_ = async <T>(name: string, p: () => Promise<T>) => { step = name; return withTimeout(p(), timeoutMs, name) }
    if (!(await step_('find the bucket', () => client.bucketExists(t.bucket)))) await step_('create the bucket', () => client.makeBucket(t.bucket, t.region))
    await step_('put an object', () => client.putObject(t.bucket, key, body, body.length))
    const stream = await step_('get the object', () => client.getObject(t.bucket, key))
    const chunks: Buffer[] = []
    for await (const c of stream) chunks.push(c as Buffer)
    if (!Buffer.concat(chunks).equals(body)) throw new Error('the object read back differs from the one written')
    const link = await step_('presign a download link', () => client.presignedGetObject(t.bucket, key, 60))
    const res = await step_('download through the presigned link', () => fetch(link))
    if (!res.ok || !Buffer.from(await res.arrayBuffer()).equals(body)) throw new Error(`the presigned link answered HTTP ${res.status}`)
    await step_('delete the object', () => client.removeObject(t.bucket, key))
    return [
      check('s3.roundtrip', 'S3 store round trip', 'pass', `bucket ${t.bucket} at ${where(t.endpoint)}: put, get, presigned get and delete work`, required),
      check('s3.addressing', 'S3 addressing', 'pass', addressing, 'path-style or virtual-hosted (recorded for the configuration)'),
    ]
  } catch (err) {
    const text = `${(err as { code?: string }).code ?? ''} ${(err as Error).message ?? ''}`
    if (S3_AUTH.test(text)) {
      return [check('s3.roundtrip', 'S3 store round trip', 'fail', `the store refused the credentials (${text.trim().split(/\s/)[0]}) while trying to ${step}`, required,
        'Correct R2_ACCESS_KEY_ID and R2_SECRET_ACCESS_KEY, and give that key read, write and delete on the bucket')]
    }
    if (/ECONNREFUSED|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|timed out/.test(text)) return [unreachable('s3.roundtrip', 'The S3 store', t.endpoint, err)]
    return [check('s3.roundtrip', 'S3 store round trip', 'fail', `could not ${step}: ${(err as Error).message}`, required,
      'Check the bucket name, the region (R2_REGION) and the key\'s permissions on the bucket')]
  }
}
