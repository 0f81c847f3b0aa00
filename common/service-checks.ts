// Checks of the services Atrium will use: PostgreSQL, Redis and the S3 store. Each talks to the
// real service with a short timeout and turns every failure into a `fail` that says what went
// wrong and how to fix it; none throws, and no password ever appears in what they report.
import { lookup as dnsLookup } from 'node:dns'
import http from 'node:http'
import https from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import { Cluster, Redis } from 'ioredis'
import { Client } from 'minio'
import postgres from 'postgres'
import { check, type CheckResult, type CheckStatus } from './checks.js'
import { inSeconds, within } from './deadline.js'
import { redactor } from './redact.js'
import { mastersOf, redisClient, redisHosts, redisListOf, type RedisTopology } from './redis-topology.js'
import { compareVersions, parseVersion } from './version-numbers.js'

export interface ServiceCheckOptions {
  /** Limit for each network step (connect, query, request); 5 s unless told. */
  timeoutMs?: number
}

const DEFAULT_TIMEOUT_MS = 5000

/** host:port of a URL (each of a Redis list's), never its credentials. */
export function where(url: string): string {
  const list = redisListOf(url)
  if (list)
    return redisHosts(list)
      .map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`)
      .join(',')
  try {
    const u = new URL(url)
    return `${u.hostname}${u.port ? `:${u.port}` : ''}`
  } catch {
    return '(not a URL)'
  }
}

/** The URL with its passwords replaced by ***, for showing to people. */
export function redactUrl(url: string): string {
  const list = redisListOf(url)
  if (list) {
    // Rebuilt from what was read, so that no spelling of a password survives.
    const user = list.username ?? ''
    const auth = list.password ? `${user}:***@` : user ? `${user}@` : ''
    const path = list.kind === 'sentinel' ? `/${list.name}/${list.db}` : ''
    const query = list.kind === 'sentinel' && list.sentinelPassword ? '?sentinelPassword=***' : ''
    return `${url.slice(0, url.indexOf('://') + 3)}${auth}${where(url)}${path}${query}`
  }
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return '(not a URL)'
  }
}

/**
 * Error texts are quoted into `found`; a driver that echoes its connection string must not leak
 * the password through them, so every known secret is masked on the way out.
 */
function scrub(results: CheckResult[], secrets: (string | undefined)[]): CheckResult[] {
  const clean = redactor(
    secrets.filter((s) => s !== undefined),
    '***',
  )
  return results.map((r) => ({ ...r, found: clean(r.found), fix: clean(r.fix) }))
}

const passwordOf = (url: string) => {
  const list = redisListOf(url)
  if (list) return list.password
  try {
    return decodeURIComponent(new URL(url).password)
  } catch {
    return undefined
  }
}

const userOf = (url: string) => {
  const list = redisListOf(url)
  if (list) return list.username ?? ''
  try {
    return decodeURIComponent(new URL(url).username)
  } catch {
    return ''
  }
}

const databaseOf = (url: string) => {
  try {
    return decodeURIComponent(new URL(url).pathname.slice(1))
  } catch {
    return ''
  }
}

const codeOf = (err: unknown): string => {
  const e = err as { code?: unknown; errors?: { code?: string }[] }
  // Node's AggregateError (IPv4 and IPv6 both refused) hides the code in its parts.
  return typeof e?.code === 'string' ? e.code : (e?.errors?.[0]?.code ?? '')
}
const messageOf = (err: unknown) => (err as Error | null)?.message || String(err)

const NETWORK =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|CONNECT_TIMEOUT|timed out|Connection is closed/

/**
 * Codes of a peer that accepted and never answered: a socket's or our deadline's (ETIMEDOUT), postgres.js's
 * (CONNECT_TIMEOUT).
 */
const TIMED_OUT = new Set(['ETIMEDOUT', 'CONNECT_TIMEOUT'])

/**
 * A service that could not be reached; one that accepted the connection but never answered is said so, with the
 * deadline it missed.
 */
const unreachable = (id: string, what: string, url: string, err: unknown, timeoutMs: number) =>
  check(
    id,
    `${what.replace(/^the /, '')} reachable`,
    'fail',
    TIMED_OUT.has(codeOf(err))
      ? `no answer from ${where(url)} in ${inSeconds(timeoutMs)}`
      : `not reachable at ${where(url)} (${codeOf(err) || messageOf(err)})`,
    `${what} answering at ${where(url)}`,
    `Start ${what}, or correct the host and port; check firewalls and DNS between this machine and ${where(url)}`,
  )

// --- PostgreSQL -------------------------------------------------------------------------------

export const POSTGRES_MINIMUM = 150000

// server_version_num: major * 10000 + minor since 10; 9.6.24 was 90624.
const versionText = (n: number) =>
  n >= 100000
    ? `${Math.floor(n / 10000)}.${n % 10000}`
    : `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}`

/** server_version_num (150000 is 15.0); `version` is only for the words shown. */
export function gradePostgresVersion(versionNum: number, version = versionText(versionNum)): CheckResult {
  return check(
    'postgres.version',
    'PostgreSQL version',
    versionNum >= POSTGRES_MINIMUM ? 'pass' : 'fail',
    `PostgreSQL ${version}`,
    'PostgreSQL 15 or newer',
    'Upgrade PostgreSQL to 15 or newer (pg_upgrade), or point DATABASE_URL at a newer server',
  )
}

export interface PostgresPrivileges {
  user: string
  database: string
  /** Where the migrations' tables go: the first schema on the search path (null: none exists). */
  schema: string | null
  superuser: boolean
  createrole: boolean
  /** Already a member of both atrium_app and atrium_system (an administrator made them). */
  rolesGranted: boolean
  /** CREATE on `schema`; since PostgreSQL 15 only the database owner has it on public by default. */
  createOnSchema: boolean
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`

/**
 * Migration 0001 creates the roles atrium_app and atrium_system and grants them to the user
 * (CREATEROLE, unless an administrator already did both), then tables, policies and functions in
 * the current schema (CREATE on that schema). A superuser can do all of it.
 */
export function gradePostgresPrivileges(p: PostgresPrivileges): CheckResult {
  const roles = p.superuser || p.createrole || p.rolesGranted
  const tables = p.superuser || p.createOnSchema
  const schema = p.schema ?? 'public'
  const has = p.superuser
    ? 'superuser'
    : [
        p.createrole ? 'CREATEROLE' : p.rolesGranted ? 'member of atrium_app and atrium_system' : 'no CREATEROLE',
        p.schema === null
          ? 'no schema on the search path'
          : `${p.createOnSchema ? '' : 'no '}CREATE on schema ${p.schema}`,
      ].join(', ')
  const statements = [
    !roles && `ALTER ROLE ${ident(p.user)} CREATEROLE;`,
    !tables && `GRANT CREATE ON SCHEMA ${ident(schema)} TO ${ident(p.user)};`,
  ]
    .filter(Boolean)
    .join(' ')
  return check(
    'postgres.privileges',
    'PostgreSQL privileges for the migrations',
    roles && tables ? 'pass' : 'fail',
    `user ${p.user} on ${p.database}: ${has}`,
    'CREATEROLE (or membership in atrium_app and atrium_system) and CREATE on the schema, or superuser',
    `As a superuser, in database ${p.database}, run: ${statements}` +
      (roles
        ? ''
        : ` (or, instead of CREATEROLE: CREATE ROLE atrium_app NOLOGIN; CREATE ROLE atrium_system NOLOGIN; GRANT atrium_app, atrium_system TO ${ident(p.user)};)`),
  )
}

interface PostgresFacts {
  num: string
  version: string
  user: string
  database: string
  schema: string | null
  superuser: boolean
  createrole: boolean
  roles_granted: boolean
  create_on_schema: boolean
}

/**
 * SQLSTATE 28000 (invalid_authorization_specification): not a wrong password (that is 28P01), so
 * correcting the password cannot help. pg_hba.conf has no line for this client, or one that
 * rejects it; or the user does not exist (said only where pg_hba.conf asks no password). Returns
 * what was found and the fix.
 */
function refusedAuthorization(url: string, message: string): [found: string, fix: string] {
  const user = userOf(url) || '(the default user)'
  const role = /role "(.*)" does not exist/.exec(message)
  if (role)
    return [
      `the user ${role[1]} does not exist at ${where(url)}`,
      `Create it (CREATE ROLE ${ident(role[1]!)} LOGIN PASSWORD '...'), or correct the user in DATABASE_URL`,
    ]
  if (/pg_hba\.conf/.test(message)) {
    // The client's address as the server saw it (behind NAT, not this machine's own).
    const client = /host "([^"]+)"/.exec(message)?.[1] ?? '<this machine>'
    const mask = client.includes(':') ? '/128' : /^[\d.]+$/.test(client) ? '/32' : ''
    const line = `host ${databaseOf(url) || 'all'} ${userOf(url) || 'all'} ${client}${mask} scram-sha-256`
    return [
      `PostgreSQL at ${where(url)} does not admit this client: ${message}`,
      `The password is not the problem: on the PostgreSQL server, add a pg_hba.conf line admitting it (${line}) above any line that rejects it, then reload the configuration (SELECT pg_reload_conf())` +
        (/no encryption/.test(message)
          ? '; if pg_hba.conf admits only TLS connections (hostssl), add ?sslmode=require to DATABASE_URL instead'
          : ''),
    ]
  }
  return [
    `PostgreSQL at ${where(url)} refused user ${user}: ${message} (SQLSTATE 28000)`,
    'Fix what the server reports (the user, its LOGIN right, pg_hba.conf), then run the checks again',
  ]
}

/** What a pooler between Atrium and PostgreSQL does to its sessions (none: `session`). */
export type Pooling = 'session' | 'moved' | 'dropped' | { refused: string }

/** The startup parameter the probe sends in place of the server's `role`, with a value it can read back. */
const PROBE_PARAMETER = { statement_timeout: '4321' }

/**
 * What a pooler does to Atrium's sessions. First whether a connection keeps one server session:
 * client A notes its backend; B opens a transaction and notes its own, holding it; A asks again.
 * With a session of its own A is on the same backend both times and B never on it; a pooler by
 * transaction or statement gives A's backend to B (PgBouncer hands out its most recently used one
 * first) or A another. Then a connection with a startup parameter, as the server's tenant
 * connections log in (role=atrium_app): a pooler may refuse it (PgBouncer: "unsupported startup
 * parameter") or drop it (its ignore_startup_parameters). Simple queries only (no prepared statements).
 */
async function poolingProbe(url: string, timeoutMs: number): Promise<Pooling> {
  const open = (connection = {}) =>
    postgres(url, {
      max: 1,
      prepare: false,
      connect_timeout: timeoutMs / 1000,
      onnotice: () => {},
      connection: { application_name: 'atrium-installer', ...connection },
    })
  const a = open()
  const b = open()
  const c = open(PROBE_PARAMETER)
  try {
    const pid = async (sql: postgres.Sql | postgres.TransactionSql) =>
      (await sql<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid
    const first = await pid(a)
    let moved = false
    // PgBouncer by statement closes a connection that opens a transaction ("transaction blocks not
    // allowed in statement pooling mode"), where PostgreSQL itself has just answered A.
    await b
      .begin(async (tx) => {
        const held = await pid(tx)
        const again = await pid(a)
        moved = held === first || again !== first
      })
      .catch(() => (moved = true))
    if (moved) return 'moved'
    let timeout: string
    try {
      timeout = (await c<{ t: string }[]>`select current_setting('statement_timeout') as t`)[0]!.t
    } catch (err) {
      // PostgreSQL itself answered A and B just now: what refuses this connection is its parameter.
      return { refused: messageOf(err) }
    }
    return timeout === '4321ms' ? 'session' : 'dropped'
  } finally {
    await Promise.all([a.end({ timeout: 0 }), b.end({ timeout: 0 }), c.end({ timeout: 0 })]).catch(() => {})
  }
}

const POOLER_FIX =
  'Point DATABASE_URL at PostgreSQL itself: Atrium pools its own connections (DATABASE_POOL_MAX per replica). A pooler in front must keep a session per connection and pass its startup parameters through; PgBouncer does neither by transaction or statement, and refuses the role parameter in any pool mode (ignore_startup_parameters would drop it, which is worse)'

/**
 * Atrium keeps state on its database sessions: its tenant connections log in as atrium_app (the
 * role startup parameter, so that row-level security applies without a switch per transaction),
 * the job runner LISTENs, a reserved connection keeps its tenant's setting between queries, and
 * queries are prepared statements. A pooler that refuses the parameter stops Atrium; one that drops
 * it would run tenant work as the connecting user; one that moves a connection between sessions
 * loses the rest.
 */
export function gradePostgresPooling(pooling: Pooling): CheckResult {
  const grade = (found: string) =>
    check(
      'postgres.pooling',
      'Database sessions',
      'fail',
      found,
      'a session per connection, with its startup parameters',
      POOLER_FIX,
    )
  if (pooling === 'session')
    return check(
      'postgres.pooling',
      'Database sessions',
      'pass',
      'each connection keeps its session and its startup parameters',
      'a session per connection, with its startup parameters',
    )
  if (pooling === 'moved')
    return grade(
      "DATABASE_URL goes through a pooler that moves a connection's queries between server sessions (PgBouncer's pool_mode = transaction or statement): the job runner's LISTEN, a reserved connection's tenant setting and prepared statements would be lost",
    )
  if (pooling === 'dropped')
    return grade(
      "DATABASE_URL goes through a pooler that drops startup parameters (PgBouncer's ignore_startup_parameters): Atrium's tenant connections would not log in as atrium_app, and tenant work would run as the connecting user, outside row-level security",
    )
  return grade(
    `DATABASE_URL goes through a pooler that refuses startup parameters ("${pooling.refused}"): Atrium's tenant connections log in as atrium_app with one (role), so they would fail`,
  )
}

export async function postgresChecks(url: string, opts: ServiceCheckOptions = {}): Promise<CheckResult[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const connect = (status: CheckStatus, found: string, fix = '') =>
    check(
      'postgres.connect',
      'PostgreSQL reachable',
      status,
      found,
      'a PostgreSQL server that accepts DATABASE_URL',
      fix,
    )
  let sql: postgres.Sql | undefined
  try {
    sql = postgres(url, {
      max: 1,
      connect_timeout: timeoutMs / 1000,
      idle_timeout: 1,
      onnotice: () => {},
      connection: { application_name: 'atrium-installer' },
    })
    const [r] = await within(
      timeoutMs,
      'the PostgreSQL query',
      sql<PostgresFacts[]>`
      select current_setting('server_version_num') as num, current_setting('server_version') as version,
             current_user as user, current_database() as database, current_schema() as schema,
             r.rolsuper as superuser, r.rolcreaterole as createrole,
             (select count(*) = 2 from pg_roles a
               where a.rolname in ('atrium_app', 'atrium_system') and pg_has_role(current_user, a.oid, 'MEMBER')) as roles_granted,
             coalesce(has_schema_privilege(current_schema(), 'CREATE'), false) as create_on_schema
        from pg_roles r where r.rolname = current_user`,
    )
    return scrub(
      [
        connect('pass', `connected to ${r!.database} at ${where(url)} as ${r!.user}`),
        gradePostgresVersion(Number(r!.num), r!.version.split(' ')[0]),
        gradePostgresPrivileges({
          user: r!.user,
          database: r!.database,
          schema: r!.schema,
          superuser: r!.superuser,
          createrole: r!.createrole,
          rolesGranted: r!.roles_granted,
          createOnSchema: r!.create_on_schema,
        }),
        gradePostgresPooling(await within(timeoutMs, 'the pooling probe', poolingProbe(url, timeoutMs))),
      ],
      [passwordOf(url)],
    )
  } catch (err) {
    const code = codeOf(err)
    const result =
      code === '28P01'
        ? connect(
            'fail',
            `password authentication failed for user ${userOf(url) || '(the default user)'} at ${where(url)}`,
            'Correct the password in DATABASE_URL, or the user (PostgreSQL says the same of a user that does not exist): pg_hba.conf admits this client, and the server refused the password',
          )
        : code === '28000'
          ? connect('fail', ...refusedAuthorization(url, messageOf(err)))
          : code === '3D000'
            ? connect(
                'fail',
                `the database ${databaseOf(url)} does not exist at ${where(url)}`,
                'Create it first (CREATE DATABASE atrium OWNER <user>), or correct the name in DATABASE_URL',
              )
            : (err as { severity?: string }).severity // any other answer from the server itself
              ? connect(
                  'fail',
                  `PostgreSQL at ${where(url)} refused: ${messageOf(err)} (SQLSTATE ${code})`,
                  'Fix what the server reports, then run the checks again',
                )
              : NETWORK.test(`${code} ${messageOf(err)}`)
                ? unreachable('postgres.connect', 'PostgreSQL', url, err, timeoutMs)
                : connect(
                    'fail',
                    `could not use DATABASE_URL ${redactUrl(url)}: ${messageOf(err)}`,
                    'Write DATABASE_URL as postgres://user:password@host:5432/database',
                  )
    return scrub([result], [passwordOf(url)])
  } finally {
    await sql?.end({ timeout: 0 }).catch(() => {})
  }
}

// --- Redis ------------------------------------------------------------------------------------

export const REDIS_MINIMUM = '7.0.0'

export function gradeRedisVersion(version: string): CheckResult {
  const v = parseVersion(version)
  const ok = v !== null && compareVersions(v, parseVersion(REDIS_MINIMUM)!) >= 0
  return check(
    'redis.version',
    'Redis version',
    ok ? 'pass' : 'fail',
    `Redis ${version}`,
    'Redis 7.0 or newer',
    'Upgrade Redis to 7 or newer, or point REDIS_URL at a newer server',
  )
}

/**
 * Rate-limit counters and cross-replica pub/sub coordination live in Redis: a policy that may
 * evict any key (allkeys-*) silently lifts limits, so it fails; volatile-* evicts only keys with a
 * lifetime (ours have one), which works until memory runs short and then drops live counters, so
 * it warns; noeviction refuses writes instead of losing them, which is loud and safe. A policy we
 * could not read warns: it is probably fine, but nobody checked.
 */
export function gradeRedisEviction(policy: string | null): CheckResult {
  const status: CheckStatus =
    policy === 'noeviction' ? 'pass' : policy === null || policy.startsWith('volatile-') ? 'warn' : 'fail'
  return check(
    'redis.eviction',
    'Redis eviction policy',
    status,
    policy === null ? 'could not read maxmemory-policy' : `maxmemory-policy ${policy}`,
    'noeviction (volatile-* tolerated)',
    'Set maxmemory-policy noeviction in redis.conf (or CONFIG SET maxmemory-policy noeviction) and size maxmemory for the load',
  )
}

const infoField = (info: string, name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? null

const redisConnect = (status: CheckStatus, found: string, fix = '') =>
  check('redis.connect', 'Redis reachable', status, found, 'a Redis server that accepts REDIS_URL', fix)

/** What a failed connection or command says, as the redis.connect check. */
function redisFailure(url: string, err: unknown, cause: unknown, timeoutMs: number): CheckResult {
  const connect = redisConnect
  const msg = `${messageOf(err)} ${cause ? messageOf(cause) : ''}`
  return /NOAUTH|WRONGPASS|invalid password|invalid username-password/i.test(msg)
    ? connect(
        'fail',
        `authentication failed${userOf(url) ? ` for user ${userOf(url)}` : ''} at ${where(url)}`,
        'Correct the user and password in REDIS_URL (redis://user:password@host:6379)',
      )
    : /NOPERM/.test(msg)
      ? connect(
          'fail',
          `the user may not run INFO at ${where(url)} (${messageOf(err)})`,
          "Give the REDIS_URL user all commands on Atrium's keys (ACL SETUSER <user> +@all ~*)",
        )
      : (err as Error).name === 'ReplyError'
        ? connect(
            'fail',
            `Redis at ${where(url)} answered: ${messageOf(err)}`,
            'Fix what the server reports, then run the checks again',
          )
        : unreachable('redis.connect', 'Redis', url, cause ?? err, timeoutMs)
}

export async function redisChecks(url: string, opts: ServiceCheckOptions = {}): Promise<CheckResult[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const list = redisListOf(url)
  if (list) return redisTopologyChecks(url, list, timeoutMs)
  const connect = redisConnect
  let redis: Redis | undefined
  // The socket's own error (ECONNREFUSED...) says more than the command's "Connection is closed".
  let cause: unknown = null
  // The credentials are sent here, not by ioredis: it prints its own warnings to the terminal (a
  // password the server does not ask for), which the installer's screen must not show, and which
  // are a finding of this check.
  // The database index too: ioredis would SELECT it before that AUTH, and a server that wants the
  // password first would answer NOAUTH, which then reads as a wrong password.
  const given = URL.canParse(url) ? new URL(url) : null
  const decoded = (s: string) => {
    try {
      return decodeURIComponent(s)
    } catch {
      return s
    }
  }
  const credentials = given?.password ? [decoded(given.username), decoded(given.password)] : null
  const db = given && /^\/\d+$/.test(given.pathname) ? Number(given.pathname.slice(1)) : 0
  if (given) {
    given.username = ''
    given.password = ''
    given.pathname = ''
  }
  let unneededPassword = false
  try {
    // One attempt, no reconnect loop, no queue of commands waiting for a connection that never
    // comes, and no ready check before the AUTH below.
    redis = new Redis(given?.toString() ?? url, {
      lazyConnect: true,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      enableReadyCheck: false,
    })
    redis.on('error', (err) => (cause ??= err))
    await within(timeoutMs, 'the Redis connection', redis.connect())
    if (credentials) {
      const [user, password] = credentials as [string, string]
      await (user ? redis.auth(user, password) : redis.auth(password)).catch((err: unknown) => {
        // Redis answers so when it has no password (or its default user needs none).
        if (/no password is set|without any password configured/i.test(messageOf(err))) unneededPassword = true
        else throw err
      })
    }
    if (db) await redis.select(db)
    const info = await redis.info()
    // INFO carries the policy and works where CONFIG is renamed or disabled (managed Redis);
    // CONFIG GET is asked only when INFO leaves it out.
    const policy =
      infoField(info, 'maxmemory_policy') ??
      (await redis.config('GET', 'maxmemory-policy').then(
        (r) => (Array.isArray(r) ? ((r[1] as string | undefined) ?? null) : null),
        () => null,
      ))
    const connected = unneededPassword
      ? connect(
          'warn',
          `connected to ${where(url)}, which asks for no password although REDIS_URL gives one: anyone who reaches it can read and change Atrium's sessions and limits`,
          'Set a password on Redis (requirepass, or an ACL user with one), the one REDIS_URL gives',
        )
      : connect('pass', `connected to ${where(url)}`)
    return scrub(
      [connected, gradeRedisVersion(infoField(info, 'redis_version') ?? 'unknown'), gradeRedisEviction(policy)],
      [passwordOf(url)],
    )
  } catch (err) {
    return scrub([redisFailure(url, err, cause, timeoutMs)], [passwordOf(url)])
  } finally {
    redis?.disconnect()
  }
}

/** The worse of two results: fail over warn over pass. */
const worse = (a: CheckResult, b: CheckResult) => (RANK[b.status] > RANK[a.status] ? b : a)
const RANK: Record<CheckStatus, number> = { pass: 0, warn: 1, fail: 2 }

/**
 * A Sentinel set or a Cluster, through ioredis's own support (as the server connects): reached,
 * the topology healthy (the master named and replicated; the cluster's state ok, every master with
 * a replica), then the version and eviction policy of every master, the worst reported.
 */
async function redisTopologyChecks(url: string, topology: RedisTopology, timeoutMs: number): Promise<CheckResult[]> {
  let cause: unknown = null
  const once = {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    sentinelRetryStrategy: () => null,
    enableOfflineQueue: false,
  }
  const client = redisClient(topology, once, {
    lazyConnect: true,
    clusterRetryStrategy: () => null,
    enableOfflineQueue: false,
  })
  client.on('error', (err) => (cause ??= err))
  try {
    await within(timeoutMs, 'the Redis connection', client.connect())
    const masters = mastersOf(client)
    const infos = await Promise.all(masters.map((m) => m.info()))
    let shape: CheckResult
    if (client instanceof Cluster) {
      const state = infoField(await client.cluster('INFO'), 'cluster_state')
      const nodes = String(await client.cluster('NODES'))
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
      const masterIds = nodes.filter((n) => n[2]?.split(',').includes('master') && n[8]).map((n) => n[0])
      const alone = masterIds.filter((id) => !nodes.some((n) => n[3] === id && !n[2]?.includes('fail')))
      const found = `cluster_state ${state}, ${masterIds.length} masters, ${nodes.length - masterIds.length} replicas`
      shape =
        state !== 'ok'
          ? check(
              'redis.topology',
              'Redis Cluster',
              'fail',
              found,
              'cluster_state ok',
              'Check the cluster (redis-cli --cluster check <node>): every slot must be served',
            )
          : alone.length
            ? check(
                'redis.topology',
                'Redis Cluster',
                'warn',
                `${found}; ${alone.length} master(s) without a replica`,
                'a replica for every master',
                {
                  warn: 'A master without a replica takes its slots down with it: add a replica (redis-cli --cluster add-node --cluster-slave)',
                },
              )
            : check('redis.topology', 'Redis Cluster', 'pass', found, 'a replica for every master')
    } else {
      const replicas = Number(infoField(infos[0]!, 'connected_slaves') ?? 0)
      const stream = (client as Redis).stream
      const name = topology.kind === 'sentinel' ? topology.name : ''
      const found = `the Sentinels name master "${name}", at ${stream.remoteAddress}:${stream.remotePort}, with ${replicas} replica(s)`
      shape = replicas
        ? check('redis.topology', 'Redis Sentinel', 'pass', found, 'a master with a replica to fail over to')
        : check('redis.topology', 'Redis Sentinel', 'warn', found, 'a master with a replica to fail over to', {
            warn: 'With no replica the Sentinels have nothing to promote: add one (replicaof <master> <port>)',
          })
    }
    const policies = await Promise.all(masters.map(async (m, i) => infoField(infos[i]!, 'maxmemory_policy') ?? null))
    return scrub(
      [
        redisConnect('pass', `connected to ${where(url)} (${masters.length} master${masters.length > 1 ? 's' : ''})`),
        shape,
        infos.map((info) => gradeRedisVersion(infoField(info, 'redis_version') ?? 'unknown')).reduce(worse),
        policies.map((p) => gradeRedisEviction(p)).reduce(worse),
      ],
      [passwordOf(url), topology.kind === 'sentinel' ? topology.sentinelPassword : undefined],
    )
  } catch (err) {
    // A cluster's "Failed to refresh slots cache" carries its node's own answer as lastNodeError.
    const said = [err, cause, (cause as { lastNodeError?: unknown } | null)?.lastNodeError]
      .map((e) => (e ? messageOf(e) : ''))
      .join(' ')
    const secrets = [passwordOf(url), topology.kind === 'sentinel' ? topology.sentinelPassword : undefined]
    if (topology.kind === 'sentinel' && /No such master/i.test(said))
      return scrub(
        [
          redisConnect(
            'fail',
            `the Sentinels at ${where(url)} know no master named "${topology.name}"`,
            "Write the master's name from the Sentinels' `sentinel monitor <name> ...` line as REDIS_URL's path (/name)",
          ),
        ],
        secrets,
      )
    if (topology.kind === 'cluster' && /cluster support disabled/i.test(said))
      return scrub(
        [
          redisConnect(
            'fail',
            `${where(url)} is not a Redis Cluster node (cluster support disabled)`,
            'For one Redis server write REDIS_URL as redis://host:6379; for a cluster, name its nodes',
          ),
        ],
        secrets,
      )
    return scrub(
      [redisFailure(url, err, cause, timeoutMs)],
      [passwordOf(url), topology.kind === 'sentinel' ? topology.sentinelPassword : undefined],
    )
  } finally {
    client.disconnect()
  }
}

// --- S3 ---------------------------------------------------------------------------------------

export interface S3Target {
  endpoint: string
  bucket: string
  accessKey: string
  secretKey: string
  region: string
}
export type Addressing = 'path-style' | 'virtual-hosted'

export interface S3CheckOptions extends ServiceCheckOptions {
  /** Name resolution for the store's host names (node:dns lookup unless told; tests point it at a fake). */
  lookup?: LookupFunction
  /**
   * Which store this is, for the checks' ids, titles and fixes: the deployment's own (R2_*, ids
   * s3.*) by default, or a region's of REGION_STORES (ids region.<code>.*).
   */
  region?: string
}

/** The names the checks of a store use: its ids' prefix, its title, and the settings a fix names. */
function storeNames(region: string | undefined) {
  if (!region)
    return {
      id: 's3',
      title: 'S3 store',
      keys: 'R2_ACCESS_KEY_ID and R2_SECRET_ACCESS_KEY',
      keyName: 'the key of R2_ACCESS_KEY_ID',
      bucket: 'R2_BUCKET',
      regionSetting: 'R2_REGION',
    }
  const at = `REGION_STORES["${region}"]`
  return {
    id: `region.${region}`,
    title: `Region ${region} store`,
    keys: `${at}.accessKeyId and .secretAccessKey`,
    keyName: `the key of ${at}.accessKeyId`,
    bucket: `${at}.bucket`,
    regionSetting: `${at}.region`,
  }
}

/**
 * Agents of the S3 clients a check made. Destroyed when it ends: a request to a store that never
 * answers is otherwise left open after its deadline, and keeps the installer from exiting.
 */
class Agents {
  private readonly all: http.Agent[] = []
  add<A extends http.Agent>(agent: A): A {
    this.all.push(agent)
    return agent
  }
  destroy() {
    for (const a of this.all.splice(0)) a.destroy()
  }
}

function s3Client(t: S3Target, addressing: Addressing, lookup: LookupFunction, agents: Agents): Client {
  const url = new URL(t.endpoint)
  const useSSL = url.protocol === 'https:'
  return new Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    useSSL,
    accessKey: t.accessKey,
    secretKey: t.secretKey,
    region: t.region,
    pathStyle: addressing === 'path-style',
    // Our own agent, so that requests resolve names the way the detection did.
    transportAgent: agents.add(useSSL ? new https.Agent({ lookup }) : new http.Agent({ lookup })),
  })
}

/**
 * Whether virtual-hosted addressing (bucket.host) is worth trying: it needs a DNS name for every
 * bucket, so not for an IP address, localhost or a single-label name, and not over HTTPS when the
 * bucket name has dots (the store's wildcard certificate cannot cover it).
 */
export function virtualHostCandidate(endpoint: string, bucket: string): boolean {
  const url = new URL(endpoint)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (isIP(host) || host === 'localhost' || host.endsWith('.localhost') || !host.includes('.')) return false
  return !(url.protocol === 'https:' && bucket.includes('.'))
}

const resolves = (name: string, lookup: LookupFunction, timeoutMs: number) =>
  within(
    timeoutMs,
    `resolving ${name}`,
    new Promise<boolean>((resolve) => lookup(name, {}, (err) => resolve(!err))),
  ).catch(() => false)

/**
 * path-style or virtual-hosted, for the configuration. Virtual-hosted only when bucket.host
 * resolves and the store answers for the bucket there (so the bucket must exist); path-style
 * otherwise, which every S3-compatible store we target accepts.
 */
export async function detectAddressing(t: S3Target, opts: S3CheckOptions = {}): Promise<Addressing> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const lookup = opts.lookup ?? (dnsLookup as LookupFunction)
  if (!virtualHostCandidate(t.endpoint, t.bucket)) return 'path-style'
  if (!(await resolves(`${t.bucket}.${new URL(t.endpoint).hostname}`, lookup, timeoutMs))) return 'path-style'
  const agents = new Agents()
  try {
    const found = await within(
      timeoutMs,
      'a virtual-hosted request',
      s3Client(t, 'virtual-hosted', lookup, agents).bucketExists(t.bucket),
    ).catch(() => false)
    return found ? 'virtual-hosted' : 'path-style'
  } finally {
    agents.destroy()
  }
}

/**
 * Whether the bucket exists, asked with a listing rather than HEAD: a HEAD reply has no body, so
 * bad credentials would read as a bare AccessDenied instead of InvalidAccessKeyId.
 */
async function bucketFound(client: Client, bucket: string, prefix: string): Promise<boolean> {
  try {
    await client.listObjectsV2(bucket, prefix, false).toArray()
    return true
  } catch (err) {
    if (codeOf(err) === 'NoSuchBucket') return false
    throw err
  }
}

const BAD_CREDENTIALS = /InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|InvalidClientTokenId/

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }

/**
 * A store's error text as people read it: the minio client leaves XML character references in the
 * messages it parses (MinIO, a Go server, writes ' as &#39;), so they are decoded here.
 */
export function xmlText(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (ref, name: string) => {
    if (name[0] !== '#') return XML_ENTITIES[name.toLowerCase()] ?? ref
    const code = /^#x/i.test(name) ? parseInt(name.slice(2), 16) : Number(name.slice(1))
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : ref
  })
}

/** The region a store says it is in when asked with another (AuthorizationHeaderMalformed, as AWS and MinIO say it). */
const expectedRegion = (text: string) => /region is wrong; expecting '([^']+)'/.exec(text)?.[1] ?? null

/**
 * A full round trip: the bucket (found, or made), put, get and compare, presigned get through
 * fetch and compare, delete. The object is removed even when a step after the put fails.
 */
export async function s3Checks(t: S3Target, opts: S3CheckOptions = {}): Promise<CheckResult[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const lookup = opts.lookup ?? (dnsLookup as LookupFunction)
  const required =
    'an S3-compatible store where the bucket exists or can be created, with put, get, presigned get and delete'
  const n = storeNames(opts.region)
  const roundtrip = (status: CheckStatus, found: string, fix = '') =>
    check(`${n.id}.roundtrip`, `${n.title} round trip`, status, found, required, fix)
  const key = `atrium-preflight/${Date.now()}-${Math.random().toString(36).slice(2)}`
  const body = Buffer.from(`atrium preflight ${key}`)
  let step = ''
  const run = <T>(name: string, work: () => Promise<T>) => {
    step = name
    return within(timeoutMs, name, work())
  }
  let written: Client | undefined
  const agents = new Agents()
  try {
    // Path-style to find or make the bucket (accepted everywhere); the rest of the trip goes the
    // way the configuration will, once the bucket exists to ask about.
    const first = s3Client(t, 'path-style', lookup, agents)
    const existed = await run('find the bucket', () => bucketFound(first, t.bucket, key))
    if (!existed) await run('create the bucket', () => first.makeBucket(t.bucket, t.region))
    const addressing = await detectAddressing(t, { timeoutMs, lookup })
    const client = s3Client(t, addressing, lookup, agents)
    await run('put an object', () => client.putObject(t.bucket, key, body, body.length))
    written = client
    const read = await run('get the object', async () =>
      Buffer.concat((await (await client.getObject(t.bucket, key)).toArray()) as Buffer[]),
    )
    if (!read.equals(body)) throw new Error('the object read back differs from the one written')
    const link = await run('presign a download link', () => client.presignedGetObject(t.bucket, key, 60))
    const res = await run('download through the presigned link', () =>
      fetch(link, { signal: AbortSignal.timeout(timeoutMs) }),
    )
    const fetched = Buffer.from(await run('download through the presigned link', () => res.arrayBuffer()))
    if (!res.ok || !fetched.equals(body))
      throw new Error(`the presigned link answered HTTP ${res.status}${res.ok ? ' with other content' : ''}`)
    await run('delete the object', () => client.removeObject(t.bucket, key))
    written = undefined
    return scrub(
      [
        roundtrip(
          'pass',
          `bucket ${t.bucket} at ${where(t.endpoint)}${existed ? '' : ' (created)'}: put, get, presigned get and delete work`,
        ),
        check(
          `${n.id}.addressing`,
          `${n.title} addressing`,
          'pass',
          addressing,
          'path-style or virtual-hosted (recorded for the configuration)',
        ),
      ],
      [t.secretKey],
    )
  } catch (err) {
    const message = xmlText(messageOf(err))
    const text = `${codeOf(err)} ${message}`
    const region = expectedRegion(message)
    const result = region
      ? roundtrip(
          'fail',
          `the store is in region ${region}, not ${t.region}, at the step: ${step} (${message})`,
          `Set ${n.regionSetting} to ${region}`,
        )
      : BAD_CREDENTIALS.test(text)
        ? roundtrip(
            'fail',
            `the store refused the credentials (${BAD_CREDENTIALS.exec(text)![0]}) at the step: ${step}`,
            `Correct ${n.keys}`,
          )
        : /AccessDenied/.test(text)
          ? roundtrip(
              'fail',
              `access denied at the step: ${step}`,
              `Give ${n.keyName} read, write and delete on bucket ${t.bucket} (and bucket creation, or create the bucket first)`,
            )
          : NETWORK.test(text)
            ? unreachable(`${n.id}.roundtrip`, `the ${n.title}`, t.endpoint, err, timeoutMs)
            : roundtrip(
                'fail',
                `failed at the step: ${step}: ${message}`,
                `Check the endpoint, the bucket name (${n.bucket}), the region (${n.regionSetting}) and the key's permissions on the bucket`,
              )
    return scrub([result], [t.secretKey])
  } finally {
    // Best effort: a failed step after the put must not leave the test object behind.
    if (written) await within(timeoutMs, 'cleanup', written.removeObject(t.bucket, key)).catch(() => {})
    agents.destroy()
  }
}

/** Every setting the service checks read: namedServiceChecks', and REGION_STORES for regionStoreChecks. */
export const SERVICE_SETTINGS = [
  'DATABASE_URL',
  'REDIS_URL',
  'R2_ENDPOINT',
  'R2_BUCKET',
  'R2_ACCESS_KEY_ID',
  'R2_SECRET_ACCESS_KEY',
  'R2_REGION',
  'REGION_STORES',
] as const

/** Whether the settings name any service to check (the others only say how to reach one). */
export const namesAService = (values: Readonly<Record<string, string | undefined>>): boolean =>
  Boolean(values.DATABASE_URL || values.REDIS_URL || values.R2_ENDPOINT || values.REGION_STORES?.trim())

/**
 * Every service the settings name (DATABASE_URL, REDIS_URL, R2_ENDPOINT), checked side by side; one not named is not
 * checked.
 */
export async function namedServiceChecks(values: Readonly<Record<string, string | undefined>>): Promise<CheckResult[]> {
  const checks = await Promise.all([
    values.DATABASE_URL ? postgresChecks(values.DATABASE_URL) : [],
    values.REDIS_URL ? redisChecks(values.REDIS_URL) : [],
    values.R2_ENDPOINT
      ? s3Checks({
          endpoint: values.R2_ENDPOINT,
          bucket: values.R2_BUCKET || 'atrium',
          accessKey: values.R2_ACCESS_KEY_ID ?? '',
          secretKey: values.R2_SECRET_ACCESS_KEY ?? '',
          region: values.R2_REGION || 'us-east-1',
        })
      : [],
  ])
  return checks.flat()
}

/** One store of REGION_STORES as the server reads it. */
export interface RegionStore {
  endpoint: string
  bucket: string
  accessKeyId: string
  secretAccessKey: string
  region: string
}

/**
 * Each region of REGION_STORES is a store of its own, checked as the default one is; settings that do not parse fail
 * region.stores.
 */
export async function regionStoreChecks(
  regions: { value: Readonly<Record<string, RegionStore>> } | { problems: string[] },
): Promise<CheckResult[]> {
  if ('problems' in regions)
    return [
      check(
        'region.stores',
        'Region stores (REGION_STORES)',
        'fail',
        regions.problems.join('; '),
        'a JSON object of region code to store',
        'Correct REGION_STORES',
      ),
    ]
  const stores = Object.entries(regions.value).map(([code, r]) =>
    s3Checks(
      {
        endpoint: r.endpoint,
        bucket: r.bucket,
        accessKey: r.accessKeyId,
        secretKey: r.secretAccessKey,
        region: r.region,
      },
      { region: code },
    ),
  )
  return (await Promise.all(stores)).flat()
}
