// The Compose bundle, checked by the real Compose v2 (`docker compose config`): it validates with
// and without the air-gapped variant, and holds what a datacenter expects of it. test/compose/site.test.ts
// runs it on a real engine.
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { CONTAINER_FIXED } from '../../config/bundles.js'
import { IMAGES, imageRef } from '../../config/images.js'
import { VERSION } from '../../common/version.js'
import { ROOT } from '../helpers/cli.js'
import { freePort, tempDir } from '../helpers/platform.js'
import { compose, needs, needsCompose, runTool } from '../helpers/tools.js'

const skip = needsCompose()
const DIR = join(ROOT, 'compose')
const BASE = ['-f', join(DIR, 'compose.yaml')]
const AIRGAP = [...BASE, '-f', join(DIR, 'compose.airgap.yaml')]

/** compose/.env.example with its blanks filled, as an admin does by hand. */
function envFile(t: Test, extra: Record<string, string> = {}, drop: string[] = []): string {
  const fill: Record<string, string> = {
    POSTGRES_PASSWORD: 'pg-secret',
    REDIS_PASSWORD: 'redis-secret',
    MINIO_ROOT_PASSWORD: 'minio-secret',
    MINIO_ATRIUM_PASSWORD: 'minio-atrium-secret',
    DATABASE_URL: 'postgres://atrium:pg-secret@postgres:5432/atrium',
    REDIS_URL: 'redis://:redis-secret@redis:6379',
    R2_ENDPOINT: 'http://minio:9000',
    R2_ACCESS_KEY_ID: 'atrium-server',
    R2_SECRET_ACCESS_KEY: 'minio-atrium-secret',
    ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'),
    ...extra,
  }
  const text = readFileSync(join(DIR, '.env.example'), 'utf8')
    .split('\n')
    .filter((l) => !drop.some((d) => l.startsWith(`${d}=`)))
    .map((l) => {
      const m = /^([A-Z0-9_]+)=/.exec(l)
      return m && fill[m[1]!] ? `${m[1]}=${fill[m[1]!]}` : l
    })
  const path = join(tempDir(t), '.env')
  writeFileSync(path, text.join('\n'))
  return path
}

const config = async (env: string, files: string[], extra: Record<string, string> = {}) => {
  const r = await compose(['--env-file', env, ...files, 'config'], { env: extra })
  return { ...r, doc: r.code === 0 ? parse(r.stdout) : null }
}

t.test('the bundle validates, with and without the air-gapped variant', { skip }, async (t) => {
  const env = envFile(t)
  for (const files of [BASE, AIRGAP]) {
    const r = await compose(['--env-file', env, ...files, 'config', '--quiet'])
    t.equal(r.code, 0, r.stderr)
    t.equal(r.stderr.trim(), '', 'no warnings either')
  }
})

t.test('every image is pinned and from config/images.ts; ATRIUM_REGISTRY moves them all', { skip }, async (t) => {
  const env = envFile(t)
  const expected = IMAGES.filter((i) => i.usedBy.includes('compose'))
  const { doc } = await config(env, BASE)
  const images = new Set(Object.values(doc.services).map((s: any) => s.image)) // eslint-disable-line @typescript-eslint/no-explicit-any -- parsed Compose YAML
  t.same([...images].sort(), expected.map((i) => imageRef(i)).sort())
  const moved = await config(envFile(t, { ATRIUM_REGISTRY: 'registry.corp.example:5000' }), AIRGAP)
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed Compose YAML
  for (const [name, s] of Object.entries(moved.doc.services) as [string, any][])
    t.match(s.image, /^registry\.corp\.example:5000\//, name)
  t.same(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed Compose YAML
    new Set(Object.values(moved.doc.services).map((s: any) => s.image)),
    new Set(expected.map((i) => imageRef(i, 'registry.corp.example:5000'))),
  )
  t.match(
    readFileSync(join(DIR, 'compose.yaml'), 'utf8'),
    `ATRIUM_VERSION:-${VERSION}}`,
    'the server image defaults to this release',
  )
})

t.test('start-up order: services are healthy or done before the ones that need them', { skip }, async (t) => {
  const { doc } = await config(envFile(t), BASE)
  const s = doc.services
  for (const name of ['postgres', 'redis', 'minio', 'server'])
    t.ok(s[name].healthcheck?.test, `${name} has a healthcheck`)
  t.match(s.migrate.depends_on, { postgres: { condition: 'service_healthy', required: false } })
  t.match(s['minio-init'].depends_on, { minio: { condition: 'service_healthy', required: true } })
  t.match(s.server.depends_on, {
    migrate: { condition: 'service_completed_successfully', required: true },
    'minio-init': { condition: 'service_completed_successfully', required: false },
    redis: { condition: 'service_healthy', required: false },
  })
  t.match(s.server.healthcheck.test.join(' '), /\/readyz/)
})

t.test('COMPOSE_PROFILES starts the bundled services a site uses and none of its own', { skip }, async (t) => {
  const services = async (profiles: string) => {
    const r = await compose(['--env-file', envFile(t, {}, ['COMPOSE_PROFILES']), ...BASE, 'config', '--services'], {
      env: { COMPOSE_PROFILES: profiles },
    })
    t.equal(r.code, 0, r.stderr)
    return r.stdout.trim().split('\n').sort()
  }
  t.same(
    await services('postgres,redis,s3'),
    ['migrate', 'minio', 'minio-init', 'postgres', 'redis', 'server'],
    'all bundled (.env.example)',
  )
  t.same(await services('redis,s3'), ['migrate', 'minio', 'minio-init', 'redis', 'server'], 'its own PostgreSQL')
  t.same(await services(''), ['migrate', 'server'], 'its own PostgreSQL, Redis and S3: only Atrium')
  t.match(
    readFileSync(join(DIR, '.env.example'), 'utf8'),
    /^COMPOSE_PROFILES=postgres,redis,s3$/m,
    'a hand-made .env starts with all of them',
  )
})

t.test(
  'the server runs hardened with the fixed container settings, and the volumes survive down -v',
  { skip },
  async (t) => {
    const { doc } = await config(envFile(t, { LOG_LEVEL: 'debug', PORT: '8443' }), BASE)
    const server = doc.services.server
    t.equal(server.read_only, true)
    t.same(server.cap_drop, ['ALL'])
    t.same(server.security_opt, ['no-new-privileges:true'])
    t.match(server.environment, {
      ...CONTAINER_FIXED,
      LOG_LEVEL: 'debug',
      DATABASE_URL: 'postgres://atrium:pg-secret@postgres:5432/atrium',
    })
    t.match(
      server.ports,
      [{ published: 8443, target: 8080 }],
      'PORT is where the API is published; inside it is always 8080',
    )
    // Every store keeps its data in a named volume of its own, made outside Compose.
    t.same(Object.keys(doc.volumes ?? {}).sort(), ['atrium-data', 'atrium-minio', 'atrium-postgres', 'atrium-redis'])
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed Compose YAML
    for (const [name, v] of Object.entries(doc.volumes) as [string, any][])
      t.equal(v.external, true, `${name} is external`)
    t.equal(doc.services.redis.command.join(' ').includes('noeviction'), true)
  },
)

t.test(
  "the site's name (ATRIUM_SITE) names the project, its network and every volume; without it, atrium as before",
  { skip },
  async (t) => {
    const volumes = (doc: { volumes: Record<string, { name: string }> }) =>
      Object.values(doc.volumes)
        .map((v) => v.name)
        .sort()
    const named = (await config(envFile(t, { ATRIUM_SITE: 'blue' }), BASE)).doc
    t.equal(named.name, 'blue')
    t.equal(named.networks.default.name, 'blue_default')
    t.same(volumes(named), ['blue-data', 'blue-minio', 'blue-postgres', 'blue-redis'])
    const before = (await config(envFile(t, {}, ['ATRIUM_SITE']), BASE)).doc
    t.equal(before.name, 'atrium', 'a .env written before sites were named')
    t.same(volumes(before), ['atrium-data', 'atrium-minio', 'atrium-postgres', 'atrium-redis'])
  },
)

t.test(
  "every service's log is rotated, and ATRIUM_BIND_ADDRESS says where the API and MinIO are published",
  { skip },
  async (t) => {
    const open = (await config(envFile(t), BASE, { COMPOSE_PROFILES: 'postgres,redis,s3' })).doc
    for (const [name, service] of Object.entries(open.services) as [string, { logging?: unknown }][]) {
      t.same(
        service.logging,
        { driver: 'json-file', options: { 'max-size': '10m', 'max-file': '5' } },
        `${name}'s log is rotated`,
      )
    }
    t.match(open.services.server.ports, [{ host_ip: '0.0.0.0', published: 8080 }], 'every interface by default')
    const local = (
      await config(envFile(t, { ATRIUM_BIND_ADDRESS: '127.0.0.1' }), BASE, { COMPOSE_PROFILES: 'postgres,redis,s3' })
    ).doc
    t.match(local.services.server.ports, [{ host_ip: '127.0.0.1', published: 8080, target: 8080 }])
    t.match(local.services.minio.ports, [{ host_ip: '127.0.0.1', published: 9000, target: 9000 }])
    t.notOk(
      JSON.stringify(local.services.server.environment).includes('minio-secret'),
      "the server never gets MinIO's administrator password",
    )
    t.match(local.services.server.environment, { R2_ACCESS_KEY_ID: 'atrium-server' })
  },
)

t.test('the air-gapped variant turns outside features off and never pulls', { skip }, async (t) => {
  const { doc } = await config(envFile(t), AIRGAP)
  t.equal(doc.services.server.environment.AIR_GAPPED, 'true')
  t.equal(doc.services.migrate.environment.AIR_GAPPED, 'true')
  const text = readFileSync(join(DIR, 'compose.airgap.yaml'), 'utf8')
  for (const name of Object.keys(doc.services))
    t.match(text, new RegExp(`  ${name}:\\n    pull_policy: never`), `${name} never pulls`)
})

const PASSWORDS = ['POSTGRES_PASSWORD', 'REDIS_PASSWORD', 'MINIO_ROOT_PASSWORD', 'MINIO_ATRIUM_PASSWORD']

t.test(
  'a site with its own PostgreSQL, Redis and S3 needs no bundled password: Compose reads the bundle without them',
  { skip },
  async (t) => {
    const r = await config(envFile(t, {}, [...PASSWORDS, 'COMPOSE_PROFILES']), BASE, { COMPOSE_PROFILES: '' })
    t.equal(r.code, 0, r.stderr)
    t.same(Object.keys(r.doc.services).sort(), ['migrate', 'server'])
  },
)

t.test(
  'a bundled service started without its password stops, naming it: Redis never runs open, nor the bucket job',
  { skip },
  async (t) => {
    const { doc } = await config(envFile(t, {}, [...PASSWORDS, 'COMPOSE_PROFILES']), BASE, {
      COMPOSE_PROFILES: 'postgres,redis,s3',
    })
    // As the container's shell receives them (Compose turns $$ into $); redis-server a stand-in that says how it was
    // started.
    const [shell, flag, command] = (doc.services.redis.command as string[]).map((a) => a.replaceAll('$$', '$'))
    const bin = tempDir(t)
    writeFileSync(join(bin, 'redis-server'), '#!/bin/sh\necho "redis-server $*"\ncat\n')
    chmodSync(join(bin, 'redis-server'), 0o755)
    const path = `${bin}:${process.env.PATH}`
    const open = await runTool(shell!, [flag!, command!], { env: { PATH: path, REDIS_PASSWORD: '' } })
    t.not(open.code, 0, 'exits with an error')
    t.match(open.stderr, /REDIS_PASSWORD: set REDIS_PASSWORD in \.env/)
    t.equal(open.stdout, '', 'redis-server never started')
    const guarded = await runTool(shell!, [flag!, command!], { env: { PATH: path, REDIS_PASSWORD: 'redis-secret' } })
    t.equal(guarded.code, 0, guarded.stderr)
    t.match(guarded.stdout, /^redis-server - --appendonly yes/m, 'its configuration on standard input')
    t.match(guarded.stdout, /^requirepass redis-secret$/m)

    const [sh, flags, script] = (doc.services['minio-init'].entrypoint as string[]).map((a) => a.replaceAll('$$', '$'))
    for (const missing of ['MINIO_ROOT_PASSWORD', 'MINIO_ATRIUM_PASSWORD']) {
      const env = { PATH: bin, MINIO_ROOT_PASSWORD: 'minio-secret', MINIO_ATRIUM_PASSWORD: 'atrium-secret' }
      const r = await runTool(sh!, [flags!, script!], { env: { ...env, [missing]: '' } })
      t.not(r.code, 0, `the bucket job stops without ${missing}`)
      t.match(r.stderr, new RegExp(`${missing}: set ${missing} in \\.env`))
      t.notMatch(r.stderr, /mc: not found/, 'before mc is called')
    }
  },
)

t.test(
  "the bundled MinIO refuses to start with a user and an empty password (so MINIO_ROOT_PASSWORD needs no guard of Compose's)",
  { skip: needs('minio') },
  async (t) => {
    const r = await runTool(
      'minio',
      [
        'server',
        join(tempDir(t), 'data'),
        '--address',
        `127.0.0.1:${await freePort()}`,
        '--console-address',
        `127.0.0.1:${await freePort()}`,
      ],
      { env: { MINIO_ROOT_USER: 'atrium', MINIO_ROOT_PASSWORD: '' }, timeoutMs: 30_000 },
    )
    t.equal(r.code, 1)
    t.match(`${r.stdout}${r.stderr}`, /Missing credential environment variable, "MINIO_ROOT_PASSWORD"/)
  },
)
