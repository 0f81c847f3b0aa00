// The image, for real (test/dockerfile.test.ts checks the recipe statically): built from the
// Dockerfile on the Node base image that .ci/engine.sh makes from Debian packages (public image
// registries are out of reach here), migrated by its own migrate command, and run as the chart and
// the Compose bundle run it, on the host network against the test services. Runs where a container
// engine and that base image are (CI prepares both); elsewhere it skips and says why.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { CONTAINER_CLI, CONTAINER_FIXED } from '../config/bundles.js'
import { halfSentPost } from './helpers/cli.js'
import {
  buildImage,
  docker,
  engine,
  envFile,
  hardening,
  seconds,
  stepTimer,
  TEST_IMAGE,
  trustingImage,
} from './helpers/engine.js'
import { testLicense, testVendor } from './helpers/license.js'
import { freePort, freshBucket, freshDatabase, services, suffix } from './helpers/platform.js'

/**
 * `docker stop -t`: shorter than both the chart's terminationGracePeriodSeconds and Compose's stop_grace_period (40 s).
 */
const GRACE_SECONDS = 20

const found = await engine()
// A cold build (npm ci inside) took 54-110 s on this 2-core machine; tap's 180 s per file is too tight.
if ('base' in found) t.setTimeout(600_000)

t.test(
  'the image builds, migrates, serves hardened, runs the admin CLI inside and drains on SIGTERM',
  { skip: 'skip' in found ? found.skip : false },
  async (t) => {
    const base = 'base' in found ? found.base : ''
    const { step, record } = stepTimer(t, `timings (base ${base})`)

    const built = await step('docker build', () => buildImage(t, base))
    if ('error' in built) return t.fail(built.error)
    const { image } = built
    const [size, user] = (await docker(['image', 'inspect', image, '--format', '{{.Size}} {{.Config.User}}'])).stdout
      .trim()
      .split(' ')
    t.equal(user, '10001:10001', 'the image runs as uid 10001')
    t.comment(`image ${TEST_IMAGE}: ${Math.round(Number(size) / 1e6)} MB`)

    const flags = hardening(t)
    const databaseUrl = await freshDatabase(t)
    const port = await freePort()
    const vendor = testVendor()
    // The image trusts only the vendor's shipped key, whose private half exists nowhere; the test is
    // its own vendor, and its containers run the image with its public key in place of that one.
    const trusting = `${TEST_IMAGE}-trusting`
    await trustingImage(t, image, vendor, trusting)
    t.teardown(() => docker(['image', 'rm', '--force', trusting]))
    const env = {
      ...CONTAINER_FIXED, // as the bundles run it (migrations by the migrate command)
      PORT: String(port), // on the host network: a free port rather than 8080, which the host may use
      LOG_LEVEL: 'info',
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      DATABASE_URL: databaseUrl,
      REDIS_URL: services.redisUrl,
      R2_ENDPOINT: services.s3Endpoint,
      R2_BUCKET: await freshBucket(t),
      R2_ACCESS_KEY_ID: services.s3AccessKey,
      R2_SECRET_ACCESS_KEY: services.s3SecretKey,
      ENCRYPTION_MASTER_KEY: randomBytes(32).toString('base64'),
      LICENSE_KEY: await testLicense(vendor),
    }
    const run = [...flags, '--network', 'host', '--env-file', envFile(t, env)]

    const migrated = await step('migrate', () => docker(['run', '--rm', ...run, trusting, 'migrate']))
    t.equal(migrated.code, 0, `migrate: ${migrated.stderr}`)
    t.ok(
      (JSON.parse(migrated.stdout) as { applied: number[] }).applied.length > 0,
      'the migrations are applied by the image',
    )
    const again = await docker(['run', '--rm', ...run, trusting, 'migrate'])
    t.same(JSON.parse(again.stdout), { applied: [] }, 'a second run has nothing to do')

    const name = `atrium-image-test-${suffix()}`
    t.teardown(() => docker(['rm', '--force', '--volumes', name]))
    const serving = performance.now()
    const started = await docker(['run', '--detach', '--name', name, ...run, trusting])
    t.equal(started.code, 0, `docker run --detach: ${started.stderr}`)
    const api = `http://127.0.0.1:${port}`
    const ready = await step('start to /readyz 200', async () => {
      while (seconds(serving) < 90) {
        const r = await fetch(`${api}/readyz`).catch(() => null)
        if (r?.status === 200) return r.json() as Promise<{ data: { checks: Record<string, { mode?: string }> } }>
        const state = await docker(['inspect', name, '--format', '{{.State.Running}} {{.State.ExitCode}}'])
        if (!state.stdout.startsWith('true')) break
        await new Promise((r) => setTimeout(r, 250))
      }
      return null
    })
    if (!ready) {
      const logs = await docker(['logs', name])
      return t.fail(
        `the container never answered /readyz 200:\n${logs.stdout.slice(-3000)}\n${logs.stderr.slice(-3000)}`,
      )
    }
    t.match(
      ready.data.checks,
      { db: { mode: 'postgres' }, cache: { mode: 'redis' }, blobs: { mode: 's3' } },
      'on the real services',
    )

    // What the container actually got: the kernel's view of its main process.
    const status = (await docker(['exec', name, 'cat', '/proc/1/status'])).stdout
    t.match(status, /^Uid:\s+10001\s/m, 'runs as uid 10001')
    t.match(status, /^CapEff:\s+0+$/m, 'with no capabilities')
    t.match(status, /^NoNewPrivs:\s+1$/m, 'and no new privileges')
    const write = await docker([
      'exec',
      name,
      'node',
      '-e',
      "require('fs').writeFileSync('/app/server/changed.js', '')",
    ])
    t.match(write.stderr, /EROFS|read-only file system/, 'the root filesystem is read-only')
    t.equal(
      (await docker(['exec', name, 'node', '-e', "require('fs').writeFileSync('/tmp/scratch', 'x')"])).code,
      0,
      '/tmp is writable',
    )

    // The start-up hint names the admin CLI as it runs in the container, and the test runs exactly that.
    const logs = await docker(['logs', name])
    const hint = /^ {2}(.+) create-tenant --name /m.exec(logs.stderr)
    t.equal(hint?.[1], CONTAINER_CLI.join(' '), 'the start-up hint names node /app/server/cli.js')
    const password = 'correct horse battery staple'
    const created = await step('create-tenant in the container', () =>
      docker(
        [
          'exec',
          '-i',
          name,
          ...(hint?.[1] ?? CONTAINER_CLI.join(' ')).split(' '),
          'create-tenant',
          '--name',
          'Image Test',
          '--email',
          'a@example.com',
          '--password-stdin',
        ],
        60_000,
        `${password}\n`,
      ),
    )
    t.equal(created.code, 0, `create-tenant: ${created.stderr}`)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }
    const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
    const made = await fetch(`${api}/api/v1/projects`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'From the host', language: 'typescript' }),
    })
    t.equal(made.status, 201, 'the printed key works against the API from the host')
    const listed = (await (await fetch(`${api}/api/v1/projects`, { headers: auth })).json()) as {
      data: { name: string }[]
    }
    t.same(
      listed.data.map((p) => p.name),
      ['From the host'],
      'and lists what it made',
    )
    const login = await fetch(`${api}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'a@example.com', password }),
    })
    t.equal(login.status, 200, 'the owner signs in with the password given to the CLI')

    await new Promise((r) => setTimeout(r, 3000)) // idle: nothing asked of it for a moment
    const memory = (await docker(['stats', '--no-stream', '--format', '{{.MemUsage}}', name])).stdout.trim()
    const rss = /^VmRSS:\s+(\d+) kB$/m.exec((await docker(['exec', name, 'cat', '/proc/1/status'])).stdout)?.[1]
    t.comment(`idle: docker stats ${memory}; the server's RSS ${Math.round(Number(rss) / 1024)} MiB`)

    // SIGTERM while a request is in flight (half its body sent): the server drains, the request
    // finishes, the process exits 0 before the engine would kill it.
    const body = JSON.stringify({ name: 'Created while stopping', description: 'x'.repeat(2000) })
    const post = halfSentPost(`${api}/api/v1/projects`, auth, body)
    // Connected, and a moment for the server to take the request in before the signal.
    await post.connected
    await new Promise((r) => setTimeout(r, 500))
    const stopping = performance.now()
    const stopped = docker(['stop', '--time', String(GRACE_SECONDS), name], (GRACE_SECONDS + 30) * 1000)
    const draining = await step('SIGTERM to draining', async () => {
      while (seconds(stopping) < GRACE_SECONDS / 2) {
        if ((await docker(['logs', name])).stdout.includes('"msg":"draining')) return true
        await new Promise((r) => setTimeout(r, 100))
      }
      return false
    })
    t.ok(draining, 'the server began draining with the request in flight')
    post.finish()
    const r = await post.response
    t.equal(r.status, 201, 'the in-flight request completed')
    t.match(JSON.parse(r.text), { data: { name: 'Created while stopping' } }, 'with its answer')
    const stop = await stopped
    const stopSeconds = seconds(stopping)
    record(`SIGTERM to exit: ${stopSeconds} s`)
    t.equal(stop.code, 0, `docker stop: ${stop.stderr}`)
    t.ok(stopSeconds < GRACE_SECONDS, `stopped within the ${GRACE_SECONDS} s grace period (${stopSeconds} s)`)
    const exit = await docker(['inspect', name, '--format', '{{.State.ExitCode}} {{.State.OOMKilled}}'])
    t.equal(exit.stdout.trim(), '0 false', 'exited 0 on its own, not killed')
    t.match((await docker(['logs', name])).stdout, /"msg":"stopped"/, 'after logging that it stopped')
  },
)
