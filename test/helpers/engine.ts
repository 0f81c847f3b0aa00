// The container engine for the tests that run the real image (test/image.test.ts, test/compose/):
// whether this machine has one (CI prepares it with .ci/engine.sh), the image built from the
// Dockerfile, and the ways a container reaches the test's services. Elsewhere those tests skip and
// say why.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { parse } from 'yaml'
import { ROOT, type Ran } from './cli.js'
import { faultProxy } from './fault-proxy.js'
import type { Vendor } from './license.js'
import { freshDatabase, services, tempDir } from './platform.js'
import { runTool } from './tools.js'

/** What .ci/engine.sh names its base images. */
const BASE_REPOSITORY = 'atrium-node-base'
/** The tag the image tests build the Dockerfile under (.ci/run builds it first, so theirs is a cache hit). */
export const TEST_IMAGE = 'atrium-server:test'

/** `input` is the command's standard input (`docker exec -i`: a password for --password-stdin). */
export const docker = (args: string[], timeoutMs = 60_000, input?: string): Promise<Ran> =>
  runTool('docker', args, { timeoutMs, input })

/**
 * An image to test instead of building one (a site re-running the tests against the image it
 * installs: docs/air-gap.md): then no base image is needed.
 */
const GIVEN_IMAGE = process.env.TEST_SERVER_IMAGE ?? ''

/** Why this machine cannot run the engine tests, or the base image to build on. */
export async function engine(): Promise<{ skip: string } | { base: string }> {
  if (process.env.TEST_ENGINE_UNAVAILABLE)
    return { skip: `no container engine: ${process.env.TEST_ENGINE_UNAVAILABLE}` }
  const info = await docker(['info', '--format', '{{.ServerVersion}}'], 15_000)
  if (info.code !== 0)
    return {
      skip: `no container engine: \`docker info\` failed (${(info.stderr.trim().split('\n')[0] ?? '') || `exit ${info.code}`}); bash .ci/engine.sh prepares one`,
    }
  let base = process.env.TEST_NODE_IMAGE ?? ''
  if (GIVEN_IMAGE) {
    if ((await docker(['image', 'inspect', GIVEN_IMAGE])).code !== 0)
      return { skip: `TEST_SERVER_IMAGE=${GIVEN_IMAGE} is not in the engine (docker load it first)` }
  } else if (!base) {
    const found = await docker(['image', 'ls', BASE_REPOSITORY, '--format', '{{.Repository}}:{{.Tag}}'])
    base = found.stdout.split('\n')[0]?.trim() ?? ''
    if (!base)
      return {
        skip: `no base image: TEST_NODE_IMAGE is not set and the engine has no ${BASE_REPOSITORY} image (bash .ci/engine.sh makes one)`,
      }
  } else if ((await docker(['image', 'inspect', base])).code !== 0)
    return { skip: `the base image TEST_NODE_IMAGE=${base} is not in the engine (bash .ci/engine.sh makes it)` }
  const missing = Object.entries({
    TEST_DATABASE_URL: services.databaseUrl,
    TEST_REDIS_URL: services.redisUrl,
    TEST_S3_ENDPOINT: services.s3Endpoint,
  }).filter(([, v]) => !v)
  if (missing.length)
    return {
      skip: `the image runs in production mode, which needs PostgreSQL, Redis and S3: set ${missing.map(([k]) => k).join(', ')}`,
    }
  return { base }
}

const LOCK = join(tmpdir(), 'atrium-image-build.lock')
/** A lock older than this is left over from a killed run. */
const STALE_MS = 15 * 60_000

/**
 * One image build at a time on this machine: a second test file's build then reuses every cached layer instead of
 * repeating npm ci beside the first.
 */
async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      mkdirSync(LOCK)
      break
    } catch {
      const age = (() => {
        try {
          return Date.now() - statSync(LOCK).mtimeMs
        } catch {
          return 0
        }
      })()
      if (age > STALE_MS) rmSync(LOCK, { recursive: true, force: true })
      await new Promise((r) => setTimeout(r, 500))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}

/**
 * `docker build` of the repository's Dockerfile on the base image, as TEST_IMAGE: the image's id, or the build's
 * output. TEST_SERVER_IMAGE instead, when given.
 */
export async function buildImage(t: Test, base: string): Promise<{ image: string } | { error: string }> {
  if (GIVEN_IMAGE) return { image: GIVEN_IMAGE }
  const iid = join(tempDir(t), 'iid')
  const build = await withBuildLock(() =>
    docker(['build', '--build-arg', `NODE_IMAGE=${base}`, '--iidfile', iid, '-t', TEST_IMAGE, '.'], 480_000),
  )
  if (build.code !== 0)
    return { error: `docker build failed:\n${build.stdout.slice(-3000)}\n${build.stderr.slice(-3000)}` }
  // Containers run the image this build made (its id), whatever another run tags meanwhile.
  return { image: readFileSync(iid, 'utf8').trim() }
}

/**
 * The image with the test vendor's public key in place of the shipped one (licenses/keys.ts, built,
 * is all it changes), tagged `tag`: production refuses to start without a license, and nobody holds
 * the shipped key's private half. A layer rather than a mounted file, so that Compose runs the
 * bundle as shipped.
 */
export async function trustingImage(t: Test, image: string, vendor: Vendor, tag: string): Promise<void> {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'keys.js'), `export const TRUSTED_KEYS = ${JSON.stringify(vendor.keys)}\n`, { mode: 0o644 })
  writeFileSync(join(dir, 'Dockerfile'), `FROM ${image}\nCOPY keys.js /app/licenses/keys.js\n`)
  const r = await docker(['build', '-t', tag, dir], 120_000)
  if (r.code !== 0) throw new Error(`docker build of the trusting image failed: ${r.stderr}`)
}

/**
 * The host's address on the engine's default bridge: containers reach a listener there (their
 * loopback is their own). The bridge's IPAM does not always name its gateway (engine 20.10
 * does not), so it is the host's own address inside the bridge's subnet.
 */
export async function bridgeGateway(): Promise<string> {
  const r = await docker(['network', 'inspect', 'bridge', '--format', '{{(index .IPAM.Config 0).Subnet}}'])
  const [net, bits] = r.stdout.trim().split('/')
  if (r.code !== 0 || !net || !bits)
    throw new Error(`the engine's bridge network has no subnet: ${r.stderr || r.stdout}`)
  const toInt = (ip: string) => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0)
  const mask = Number(bits) === 0 ? 0 : (0xffffffff << (32 - Number(bits))) >>> 0
  // `ip`, not os.networkInterfaces(): that leaves out a bridge that is down (no container on it yet).
  const addresses = [
    ...(await runTool('ip', ['-4', '-o', 'addr', 'show'])).stdout.matchAll(/ inet (\d+\.\d+\.\d+\.\d+)\//g),
  ].map((m) => m[1]!)
  const inside = addresses.find((a) => (toInt(a) & mask) >>> 0 === (toInt(net) & mask) >>> 0)
  if (!inside) throw new Error(`no address of this host inside the engine's bridge subnet ${net}/${bits}`)
  return inside
}

/**
 * The site's own PostgreSQL (a fresh database), Redis and S3 where its containers or pods reach them: proxies on
 * `address` (the engine's bridge, the cluster's) in front of the test's. The database URL carries a password, which
 * the site's secrets are searched for, also where the test's PostgreSQL trusts the host and needs none.
 */
export async function siteServices(t: Test, address: string) {
  const database = await freshDatabase(t)
  const [db, redis, s3] = await Promise.all([
    faultProxy(t, database, address),
    faultProxy(t, services.redisUrl, address),
    faultProxy(t, services.s3Endpoint, address),
  ])
  const siteDb = new URL(db.via(database))
  if (!siteDb.password) siteDb.password = randomBytes(12).toString('hex')
  return {
    database,
    databaseUrl: siteDb.toString(),
    redisUrl: redis.via(services.redisUrl),
    s3Endpoint: s3.via(services.s3Endpoint),
  }
}

/**
 * `docker run` options for what the chart and the Compose bundle both demand of the server's
 * container, read from them: the chart's default pod and container securityContext (values.yaml) and the bundle's
 * x-hardened block. A difference between the two fails the test.
 */
export function hardening(t: Test): string[] {
  // The chart's defaults (values.yaml), which its helpers render into every Atrium pod and container.
  const values = parse(readFileSync(join(ROOT, 'charts/atrium/values.yaml'), 'utf8')) as {
    podSecurityContext: Record<string, unknown>
    containerSecurityContext: Record<string, unknown>
  }
  const pod = values.podSecurityContext as { runAsUser: number; runAsGroup: number; runAsNonRoot: boolean }
  const container = values.containerSecurityContext as {
    readOnlyRootFilesystem: boolean
    allowPrivilegeEscalation: boolean
    capabilities: { drop: string[] }
  }
  const compose = (
    parse(readFileSync(join(ROOT, 'compose/compose.yaml'), 'utf8')) as {
      'x-hardened': { read_only: boolean; cap_drop: string[]; security_opt: string[]; tmpfs: string[] }
    }
  )['x-hardened']
  t.ok(pod.runAsNonRoot && pod.runAsUser !== 0, 'the chart runs as a non-root user')
  t.equal(container.readOnlyRootFilesystem, compose.read_only, 'both: read-only root filesystem')
  t.same(container.capabilities.drop, compose.cap_drop, 'both: the same capabilities dropped')
  t.equal(
    !container.allowPrivilegeEscalation,
    compose.security_opt.includes('no-new-privileges:true'),
    'both: no privilege escalation',
  )
  return [
    ...['--user', `${pod.runAsUser}:${pod.runAsGroup}`],
    ...(compose.read_only ? ['--read-only'] : []),
    ...compose.cap_drop.flatMap((c) => ['--cap-drop', c]),
    ...compose.security_opt.flatMap((o) => ['--security-opt', o]),
    ...compose.tmpfs.flatMap((p) => ['--tmpfs', p]),
  ]
}

/** The settings as a `docker run --env-file` file (readable by its owner only: it holds secrets). */
export function envFile(t: Test, env: Record<string, string>): string {
  const file = join(tempDir(t), 'env')
  writeFileSync(
    file,
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
    { mode: 0o600 },
  )
  return file
}

export const seconds = (since: number) => Math.round((performance.now() - since) / 100) / 10

/**
 * Times named steps and prints them all when the test ends: `step(name, fn)`, or `record(line)` for one measured
 * otherwise.
 */
export function stepTimer(t: Test, heading: string) {
  const timings: string[] = []
  t.teardown(() => t.comment(`${heading}: ${timings.join('; ')}`))
  return {
    record: (line: string) => timings.push(line),
    async step<T>(name: string, fn: () => Promise<T>): Promise<T> {
      const started = performance.now()
      try {
        return await fn()
      } finally {
        timings.push(`${name}: ${seconds(started)} s`)
      }
    },
  }
}

/**
 * The `config` lines of an air-gapped Compose site whose PostgreSQL, Redis and S3 are the test's own, as its
 * containers reach them (through proxies on the engine's bridge, `gateway`). The secrets are references the installer
 * reads from its environment: SITE_DATABASE_URL, SITE_S3_SECRET and SITE_LICENSE_KEY.
 */
export function ownServicesConfig(o: { redisUrl: string; s3Endpoint: string; bucket: string; gateway: string }) {
  return [
    '  DATABASE_URL: { env: SITE_DATABASE_URL }',
    `  REDIS_URL: "${o.redisUrl}"`,
    `  R2_ENDPOINT: "${o.s3Endpoint.replace(/\/$/, '')}"`,
    `  R2_BUCKET: "${o.bucket}"`,
    `  R2_ACCESS_KEY_ID: "${services.s3AccessKey}"`,
    '  R2_SECRET_ACCESS_KEY: { env: SITE_S3_SECRET }',
    '  LICENSE_KEY: { env: SITE_LICENSE_KEY }',
    `  OUTBOUND_ALLOWED_NETWORKS: "${o.gateway}/32"`,
  ]
}

/**
 * GET <url>/readyz every 200 ms until stopped, as an admin's monitoring would: how many answered 200 within 3 s, how
 * many did not, and the longest run of misses (an outage) in milliseconds. 3 s, not 1: on this 2-core machine, beside
 * other test files building and running sites, a site that serves can be a second slow to answer.
 */
export function probeReady(url: string) {
  let ok = 0
  let failed = 0
  let outageStart: number | null = null
  let longest = 0
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const at = performance.now()
      const answered = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) }).then(
        (r) => r.status === 200,
        () => false,
      )
      if (answered) {
        ok++
        if (outageStart !== null) longest = Math.max(longest, performance.now() - outageStart)
        outageStart = null
      } else {
        failed++
        outageStart ??= at
      }
      await new Promise((r) => setTimeout(r, Math.max(0, 200 - (performance.now() - at))))
    }
  })()
  return {
    async stop() {
      stopped = true
      await loop
      if (outageStart !== null) longest = Math.max(longest, performance.now() - outageStart)
      return { ok, failed, total: ok + failed, longestMs: Math.round(longest) }
    },
  }
}
