// Two Compose sites on one real engine, each with its own name, port, data path, database and
// bucket, installed, upgraded and uninstalled independently by the installer as an admin runs it:
// while one is upgraded (installed again with a changed setting) or uninstalled, the other is
// probed on /readyz every 200 ms and must not miss once. Also what keeps them apart: a volume of a
// site's name bound elsewhere is refused before anything is deployed, a third site asking for a
// port the first publishes fails its preflight naming that site, and uninstall --delete-data with
// a wrong name exits 2 with the data still there. Runs where test/helpers/engine.ts finds an engine
// (CI prepares one); elsewhere it skips and says why. The sites run the test's own PostgreSQL,
// Redis and S3 (the engine may hold no image of the bundled ones).
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { imageNamed, imageRef } from '../../config/images.js'
import { siteVolumes } from '../../installer/core/site.js'
import {
  bridgeGateway,
  buildImage,
  docker,
  engine,
  ownServicesConfig,
  stepTimer,
  trustingImage,
  probeReady,
} from '../helpers/engine.js'
import { faultProxy } from '../helpers/fault-proxy.js'
import { acceptUnmet, installer } from '../helpers/installer.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { freePort, freshBucket, freshDatabase, services, suffix, tempDir } from '../helpers/platform.js'
import { needsCompose } from '../helpers/tools.js'

const found = await engine()
const skip = 'skip' in found ? found.skip : needsCompose()
if (!skip) t.setTimeout(1_500_000)

const SERVER = imageNamed('atrium-server')
/** A tag of this run's own (ATRIUM_VERSION): another test's image under the release tag is left alone. */
const TAG = `${SERVER.tag}-sites-${suffix()}`

interface Site {
  name: string
  port: number
  url: string
  answers: string
  dataPath: string
  env: Record<string, string>
}

/** The engine's parts named for a site: its containers (by service), networks and volumes. */
async function parts(name: string) {
  const ls = async (args: string[]) => (await docker(args)).stdout.split('\n').filter(Boolean).sort()
  return {
    containers: await ls([
      'ps',
      '--all',
      '--filter',
      `label=com.docker.compose.project=${name}`,
      '--format',
      '{{.Label "com.docker.compose.service"}}',
    ]),
    networks: await ls(['network', 'ls', '--filter', `name=^${name}_`, '--format', '{{.Name}}']),
    volumes: await ls(['volume', 'ls', '--filter', `name=^${name}-`, '--format', '{{.Name}}']),
  }
}

t.test('two sites on one engine: installed, upgraded and uninstalled independently', { skip }, async (t: Test) => {
  const base = 'base' in found ? found.base : ''
  const { step, record } = stepTimer(t, 'timings')
  const vendor = testVendor()
  const built = await step('docker build', () => buildImage(t, base))
  if ('error' in built) return t.fail(built.error)
  const image = imageRef({ ...SERVER, tag: TAG })
  await step('the image, trusting the test vendor', () => trustingImage(t, built.image, vendor, image))
  t.teardown(() => docker(['image', 'rm', '--force', image]))

  const gateway = await bridgeGateway()
  const [db, redis, s3] = await Promise.all([
    faultProxy(t, services.databaseUrl, gateway),
    faultProxy(t, services.redisUrl, gateway),
    faultProxy(t, services.s3Endpoint, gateway),
  ])
  const run = suffix()
  const site = async (letter: string, redisDb: number): Promise<Site> => {
    const dir = tempDir(t)
    const name = `t${run}${letter}`
    const port = await freePort()
    const answers = join(dir, 'answers.yaml')
    const dataPath = join(dir, 'data')
    // A site's name is its own: whatever this test leaves behind (a failure half-way) goes when it ends.
    t.teardown(async () => {
      await docker(
        ['compose', '--project-name', name, 'down', '--volumes', '--remove-orphans', '--timeout', '10'],
        120_000,
      )
      await docker(['volume', 'rm', '--force', ...siteVolumes({ site: name, dataPath }).map((v) => v.name)])
    })
    const url = `http://127.0.0.1:${port}`
    writeFileSync(
      answers,
      [
        'target: compose',
        'mode: air-gapped',
        `site: ${name}`,
        `dataPath: ${dataPath}`,
        `outputDir: ${join(dir, 'out')}`,
        'config:',
        `  PORT: "${port}"`,
        `  PUBLIC_URL: "${url}"`,
        // Each its own database, bucket and Redis database.
        ...ownServicesConfig({
          redisUrl: redis.via(services.redisUrl).replace(/\/?$/, `/${redisDb}`),
          s3Endpoint: s3.via(services.s3Endpoint),
          bucket: await freshBucket(t),
          gateway,
        }),
      ].join('\n') + '\n',
    )
    const env = {
      SITE_DATABASE_URL: db.via(await freshDatabase(t)),
      SITE_S3_SECRET: services.s3SecretKey,
      SITE_LICENSE_KEY: await testLicense(vendor),
      ATRIUM_VERSION: TAG,
      // Two sites publish two /metrics ports (Compose takes the environment's over .env's, as for ATRIUM_VERSION).
      ATRIUM_METRICS_PORT: String(await freePort()),
    }
    return { name, port, url, answers, dataPath, env }
  }
  const [a, b] = [await site('a', 11), await site('b', 12)]
  // This machine is smaller than production asks (2 cores, under 100 GB free) and the installer trusts only the
  // shipped license key; every other check must pass.
  const install = (s: Site, ...more: string[]) =>
    installer(['install', '--answers', s.answers, '--yes', ...acceptUnmet, '--json', ...more], s.env)
  const installed = async (s: Site, what: string, ...more: string[]) => {
    const r = await step(what, () => install(s, ...more))
    const report = JSON.parse(r.stdout || '{}')
    t.equal(r.code, 0, `${what}: ${report.error ?? r.stderr}`)
    return report as { checks: { id: string; status: string; found: string }[]; upgrade: unknown; steps: unknown[] }
  }

  // A volume of B's name left bound elsewhere: refused before anything is deployed, whatever checks are ignored.
  const stray = join(tempDir(t), 'another-site', 'data')
  t.equal(
    (
      await docker([
        'volume',
        'create',
        ...['--driver', 'local', '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${stray}`],
        `${b.name}-data`,
      ])
    ).code,
    0,
  )
  const refused = await step('install refused (volume bound elsewhere)', () => install(b))
  const refusal = JSON.parse(refused.stdout)
  // The preflight's volumes check fails, and no acceptance lets a deploy past it (the install step refuses it too).
  t.equal(refused.code, 3, 'refused at the checks')
  t.match(
    refusal.checks.find((c: { id: string }) => c.id === 'volumes'),
    {
      status: 'fail',
      found: `${b.name}-data bound to ${stray}, not ${join(b.dataPath, 'data')}`,
      fix: new RegExp(`docker volume rm ${b.name}-data`),
    },
  )
  t.match(refusal, { stopped: 'checks', written: false })
  t.same(
    await parts(b.name),
    { containers: [], networks: [], volumes: [`${b.name}-data`] },
    'nothing of B on the engine but the stray volume',
  )
  t.notOk(existsSync(stray), 'nor anything where it points')
  t.equal((await docker(['volume', 'rm', `${b.name}-data`])).code, 0)

  // Both installed, each under its own name.
  await installed(a, 'install A')
  await installed(b, 'install B')
  for (const s of [a, b]) {
    t.equal((await fetch(`${s.url}/readyz`)).status, 200, `${s.name} answers`)
    t.same(
      await parts(s.name),
      {
        containers: ['migrate', 'server'],
        networks: [`${s.name}_default`],
        // Its own PostgreSQL, Redis and S3: the data volume alone (no bundled service's).
        volumes: [`${s.name}-data`],
      },
      `${s.name}: its project, network and volumes carry its name`,
    )
    t.equal(
      (await docker(['volume', 'inspect', '--format', '{{index .Options "device"}}', `${s.name}-data`])).stdout.trim(),
      join(s.dataPath, 'data'),
      `${s.name}-data is bound under its own data path`,
    )
  }

  // A third site asking for A's port fails its preflight naming A, not taking A's Atrium for its own.
  const cDir = tempDir(t)
  const c = readFileSync(b.answers, 'utf8')
    .replace(`site: ${b.name}`, `site: t${run}c`)
    .replace(/^outputDir: .*$/m, `outputDir: ${join(cDir, 'out')}`)
    .replace(`PORT: "${b.port}"`, `PORT: "${a.port}"`)
  const cAnswers = join(cDir, 'answers.yaml')
  writeFileSync(cAnswers, c)
  const pre = await step('preflight C on A’s port', () =>
    installer(['preflight', '--answers', cAnswers, '--json'], b.env),
  )
  t.match(
    JSON.parse(pre.stdout).checks.find((x: { id: string }) => x.id === 'ports'),
    {
      status: 'fail',
      found: new RegExp(`^port ${a.port} is in use by the Compose project ${a.name} \\(its server\\), Atrium `),
    },
  )

  // A upgraded (a changed setting recreates its server) while B is probed: B never misses.
  writeFileSync(a.answers, readFileSync(a.answers, 'utf8').replace('config:\n', 'config:\n  LOG_LEVEL: debug\n'))
  const serverOf = async (name: string) =>
    (
      await docker([
        'ps',
        '--filter',
        `label=com.docker.compose.project=${name}`,
        '--filter',
        'label=com.docker.compose.service=server',
        '--format',
        '{{.ID}}',
      ])
    ).stdout.trim()
  const before = await serverOf(a.name)
  const watchB = probeReady(b.url)
  const upgraded = await installed(a, 'upgrade A (B probed)', '--skip-backup')
  const duringUpgrade = await watchB.stop()
  record(`B during A's upgrade: ${duringUpgrade.ok} answers, ${duringUpgrade.failed} missed`)
  t.match(
    upgraded.checks.find((x) => x.id === 'ports'),
    {
      status: 'pass',
      found: new RegExp(`^${a.port} in use by this site's server \\(Atrium .*\\), which the install replaces`),
    },
  )
  t.match(upgraded, { upgrade: { from: /^\d/, backup: null } }, 'an upgrade of A, from the version A runs')
  t.not(await serverOf(a.name), before, "A's server was replaced")
  t.equal(
    (await docker(['exec', await serverOf(a.name), 'printenv', 'LOG_LEVEL'])).stdout.trim(),
    'debug',
    'with the changed setting',
  )
  t.equal(duringUpgrade.failed, 0, 'B answered every probe during A’s upgrade')
  t.ok(duringUpgrade.ok > 5, `B was probed throughout (${duringUpgrade.ok} times)`)
  t.equal((await fetch(`${a.url}/readyz`)).status, 200, 'A answers after its upgrade')

  // B uninstalled while A is probed: A never misses; B's containers and network go, its volumes and data stay.
  const watchA = probeReady(a.url)
  const gone = await step('uninstall B (A probed)', () =>
    installer(['uninstall', '--answers', b.answers, '--yes', '--json'], b.env),
  )
  const duringUninstall = await watchA.stop()
  record(`A during B's uninstall: ${duringUninstall.ok} answers, ${duringUninstall.failed} missed`)
  t.equal(gone.code, 0, `uninstall B: ${gone.code ? gone.stderr || JSON.parse(gone.stdout).error : 'done'}`)
  t.equal(duringUninstall.failed, 0, 'A answered every probe during B’s uninstall')
  t.same(await parts(b.name), {
    containers: [],
    networks: [],
    // Its own PostgreSQL, Redis and S3: its data volume is all it had.
    volumes: [`${b.name}-data`],
  })
  const bData = join(b.dataPath, 'data')
  t.ok(existsSync(bData), "B's data folder is still there")

  // Deleting B's data takes B's name typed back: a wrong one exits 2 and removes nothing.
  const wrong = await step('uninstall B --delete-data, wrong name', () =>
    installer(
      ['uninstall', '--answers', b.answers, '--yes', '--delete-data', '--confirm-delete', a.name, '--json'],
      b.env,
    ),
  )
  t.equal(wrong.code, 2)
  t.match(JSON.parse(wrong.stdout), { failure: 'bad-input', problems: [/is not the site's name/] })
  t.same((await parts(b.name)).volumes, [`${b.name}-data`], "B's volume is still there")
  t.ok(existsSync(bData), 'and its data')
  const deleted = await step('uninstall B --delete-data', () =>
    installer(
      ['uninstall', '--answers', b.answers, '--yes', '--delete-data', '--confirm-delete', b.name, '--json'],
      b.env,
    ),
  )
  t.equal(
    deleted.code,
    0,
    `uninstall B --delete-data: ${deleted.code ? deleted.stderr || JSON.parse(deleted.stdout).error : 'done'}`,
  )
  t.same(await parts(b.name), { containers: [], networks: [], volumes: [] })
  t.notOk(existsSync(bData), "B's data folder is gone")
  t.same((await parts(a.name)).containers, ['migrate', 'server'], "A's containers were never touched")
  t.equal((await fetch(`${a.url}/readyz`)).status, 200, 'A still answers')
})
