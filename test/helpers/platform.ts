// Each test file gets its own platform: a fresh database on the real PostgreSQL (TEST_DATABASE_URL)
// or an embedded PGlite in a temporary DATA_DIR, the real Redis (TEST_REDIS_URL) or none, a fresh
// bucket on the real S3 store (TEST_S3_ENDPOINT) or a local folder. Everything is removed afterwards.
import { createHash, randomBytes } from 'node:crypto'
import { cpSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { Client } from 'minio'
import postgres from 'postgres'
import type { Test } from 'tap'
import { parseConfig, type Config } from '../../config/schema.js'
import { createLogger } from '../../server/logger.js'
import { openDb, type Db } from '../../server/platform/db.js'
import { loadMigrations, migrate } from '../../server/platform/migrate.js'
import { openPlatform, type Platform, type PlatformOptions } from '../../server/platform/index.js'

export const services = {
  databaseUrl: process.env.TEST_DATABASE_URL ?? '',
  redisUrl: process.env.TEST_REDIS_URL ?? '',
  s3Endpoint: process.env.TEST_S3_ENDPOINT ?? '',
  s3AccessKey: process.env.TEST_S3_ACCESS_KEY ?? 'minioadmin',
  s3SecretKey: process.env.TEST_S3_SECRET_KEY ?? 'minioadmin',
}

export const suffix = () => randomBytes(5).toString('hex')

/**
 * A loopback port free right now (taken, then released): for a server to be told its address before it listens, or a
 * service that is down.
 */
export async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise((resolve) => probe.close(resolve))
  return port
}

export function tempDir(t: Test, prefix = 'atrium-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A new, empty database on the test server; dropped when the test ends. */
export async function freshDatabase(t: Test): Promise<string> {
  const admin = postgres(services.databaseUrl, { max: 1, onnotice: () => {} })
  const name = `atrium_t_${suffix()}`
  await admin.unsafe(`create database ${name}`)
  t.teardown(async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end()
  })
  const url = new URL(services.databaseUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** A client of an S3 store (the test's own by default), for what a test checks behind the server's back. */
export function s3Client(
  endpoint = services.s3Endpoint,
  accessKey = services.s3AccessKey,
  secretKey = services.s3SecretKey,
  region = 'us-east-1',
): Client {
  const url = new URL(endpoint)
  return new Client({
    endPoint: url.hostname,
    port: Number(url.port) || undefined,
    useSSL: url.protocol === 'https:',
    accessKey,
    secretKey,
    region,
  })
}

/** A new bucket on the test object store; emptied and removed when the test ends. */
export async function freshBucket(t: Test): Promise<string> {
  const client = s3Client()
  const bucket = `atrium-t-${suffix()}`
  t.teardown(async () => {
    if (!(await client.bucketExists(bucket))) return // nothing in the test opened blob storage
    const names: string[] = []
    for await (const o of client.listObjectsV2(bucket, '', true)) names.push((o as { name: string }).name)
    if (names.length) await client.removeObjects(bucket, names)
    await client.removeBucket(bucket).catch(() => {})
  })
  return bucket
}

/**
 * A migrated embedded database folder, built once per PGlite version and set of migrations and
 * copied for each test: creating one from nothing costs seconds (initdb), copying it milliseconds.
 */
async function embeddedTemplate(): Promise<string> {
  const pglite = JSON.parse(
    readFileSync(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url), 'utf8'),
  ) as { version: string }
  const key = createHash('sha256')
    .update(pglite.version)
    .update(
      loadMigrations()
        .map((m) => m.checksum)
        .join(),
    )
    .digest('hex')
    .slice(0, 16)
  const template = join(tmpdir(), `atrium-test-pgdata-${key}`)
  if (existsSync(template)) return template
  const build = mkdtempSync(join(tmpdir(), 'atrium-test-pgdata-build-'))
  const db = await openDb({ databaseUrl: '', dataDir: build, poolMax: 1, log: pino({ level: 'silent' }) })
  await migrate(db.sql)
  await db.close()
  try {
    renameSync(join(build, 'pgdata'), template)
  } catch {
    // another test process finished its template first; theirs is as good
  }
  rmSync(build, { recursive: true, force: true })
  return template
}

/**
 * A new embedded cluster, never migrated: no tables, and none of the roles the migrations make, whatever services the
 * run has.
 */
export async function unmigratedEmbeddedDb(t: Test): Promise<Db> {
  const db = await openDb({ databaseUrl: '', dataDir: tempDir(t), poolMax: 1, log: pino({ level: 'silent' }) })
  t.teardown(() => db.close())
  return db
}

/** A temporary DATA_DIR holding a migrated embedded database. */
export async function embeddedDataDir(t: Test): Promise<string> {
  const dir = tempDir(t)
  cpSync(await embeddedTemplate(), join(dir, 'pgdata'), { recursive: true })
  return dir
}

/**
 * Settings for a test server: the real services when configured, embedded defaults otherwise (migrated, unless an empty
 * database is asked for).
 */
export async function testEnv(
  t: Test,
  overrides: Record<string, string> = {},
  opts: { emptyDatabase?: boolean } = {},
): Promise<Record<string, string>> {
  const env: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATA_DIR: tempDir(t),
    PORT: '0',
    HOST: '127.0.0.1',
    ENCRYPTION_MASTER_KEY: randomBytes(32).toString('base64'),
  }
  const embedded = overrides.DATABASE_URL !== undefined ? !overrides.DATABASE_URL : !services.databaseUrl
  if (!embedded) {
    if (overrides.DATABASE_URL === undefined) env.DATABASE_URL = await freshDatabase(t) // empty until migrated
  } else if (!opts.emptyDatabase) {
    cpSync(await embeddedTemplate(), join(env.DATA_DIR!, 'pgdata'), { recursive: true })
  }
  if (services.redisUrl) env.REDIS_URL = services.redisUrl
  if (services.s3Endpoint && overrides.R2_ENDPOINT === undefined) {
    Object.assign(env, {
      R2_ENDPOINT: services.s3Endpoint,
      R2_BUCKET: await freshBucket(t),
      R2_ACCESS_KEY_ID: services.s3AccessKey,
      R2_SECRET_ACCESS_KEY: services.s3SecretKey,
    })
  }
  return { ...env, ...overrides }
}

export function configFrom(env: Record<string, string>): Config {
  const { config, problems } = parseConfig(env)
  if (problems.length) throw new Error(problems.join('\n'))
  return config
}

export interface TestPlatformOptions extends PlatformOptions {
  /**
   * NODE_ENV=production as far as the license goes, on the test's services: parsing
   * NODE_ENV=production itself would refuse the embedded defaults.
   */
  production?: boolean
  /** A database with no schema (with MIGRATE_ON_START=false it stays so). */
  emptyDatabase?: boolean
}

export async function testPlatform(
  t: Test,
  overrides: Record<string, string> = {},
  opts: TestPlatformOptions = {},
): Promise<Platform> {
  const parsed = configFrom(await testEnv(t, overrides, { emptyDatabase: opts.emptyDatabase }))
  const config: Config = opts.production
    ? { ...parsed, NODE_ENV: 'production' as string as Config['NODE_ENV'] }
    : parsed
  const platform = await openPlatform(config, createLogger(config.LOG_LEVEL), opts)
  t.teardown(() => platform.close())
  return platform
}

/** `dir` and what is under it that other local users could read, change or enter, with its mode. */
export const openToOthers = (dir: string): string[] =>
  ['.', ...readdirSync(dir, { recursive: true, encoding: 'utf8' })]
    .map((p) => ({ p, st: lstatSync(join(dir, p)) }))
    .filter(({ st }) => !st.isSymbolicLink() && st.mode & 0o077)
    .map(({ p, st }) => `${p} ${(st.mode & 0o777).toString(8)}`)

/** Counts the cross-tenant transactions (credential lookups among them) the database runs from now on. */
export function countLookups(db: Platform['db']): { lookups: number } {
  const original = db.system.bind(db)
  const counted = { lookups: 0 }
  db.system = ((fn: Parameters<typeof db.system>[0]) => {
    counted.lookups++
    return original(fn)
  }) as typeof db.system
  return counted
}
