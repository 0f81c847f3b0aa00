// A Compose site for real, on a real engine, as an air-gapped admin runs it with their own
// PostgreSQL, Redis and S3: the air-gap kit saved and pinned (images.json, SHA256SUMS), the image removed from the
// engine, `installer install --images` loading the kit and bringing the shipped compose.yaml up with
// the air-gapped overlay and no pull, the first tenant and the printed sign-in working; then
// `down` and `up` keeping every datum, and an upgrade to a newer image tag running the migration
// service once before the new server starts. Runs where test/helpers/engine.ts finds an engine
// (CI prepares one); elsewhere it skips and says why. Throughout, every command line on the machine
// (sampled every 100 ms) and `docker events` are recorded: no secret of the site may appear in them.
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { imageNamed, imageRef } from '../../config/images.js'
import { composeArgs } from '../../installer/core/compose-bundle.js'
import { KIT } from '../../installer/deploy/airgap.js'
import { DEFAULT_SITE, siteVolumes } from '../../installer/core/site.js'
import { parseAnswers } from '../../installer/core/answers.js'
import { readEnvFile } from '../../installer/core/config-file.js'
import {
  bridgeGateway,
  buildImage,
  docker,
  engine,
  ownServicesConfig,
  siteServices,
  stepTimer,
  trustingImage,
} from '../helpers/engine.js'
import { installer } from '../helpers/installer.js'
import { configSecrets, secretsIn, watchCommandLines, watchDockerEvents } from '../helpers/leaks.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { freePort, freshBucket, services, tempDir } from '../helpers/platform.js'
import { needsCompose, runTool } from '../helpers/tools.js'
import { unzip } from '../helpers/zip.js'

const SERVER = imageNamed('atrium-server')
/** The tag the bundle runs (ATRIUM_VERSION's default) and the kit carries. */
const RELEASED = imageRef(SERVER)
/** A later release: the same server with one more migration. */
const NEXT_TAG = `${SERVER.tag}-next`
const NEXT = imageRef({ ...SERVER, tag: NEXT_TAG })
const PROBE_MIGRATION = { version: 999, file: '0999_compose_upgrade_probe.sql', table: 'compose_upgrade_probe' }

/** The default site's volumes (this test's answers name no site). */
const VOLUMES = siteVolumes({ site: DEFAULT_SITE, dataPath: '/' }).map((v) => v.name)

const found = await engine()
const skip = 'skip' in found ? found.skip : needsCompose()
if (!skip) t.setTimeout(900_000)

/**
 * The site's containers, network and volumes gone (--volumes: the containers' anonymous ones; Compose never removes
 * external volumes, hence the rm).
 */
async function removeSite(): Promise<void> {
  await docker(
    ['compose', '--project-name', DEFAULT_SITE, 'down', '--volumes', '--remove-orphans', '--timeout', '10'],
    120_000,
  )
  await docker(['volume', 'rm', '--force', ...VOLUMES])
}

/**
 * The bundle's volumes and project have fixed names (one Atrium per engine). Leftovers of an
 * earlier run of this test (volumes bound under the temp folder) are removed; anything else is a
 * real site, which the test must not touch.
 */
async function engineFreeForASite(): Promise<string | null> {
  for (const name of VOLUMES) {
    const v = await docker(['volume', 'inspect', '--format', '{{index .Options "device"}}', name])
    if (v.code !== 0) continue
    if (!v.stdout.trim().startsWith(join(tmpdir(), 'atrium-test-')))
      return `the engine holds the volume ${name} of a real site (${v.stdout.trim()})`
  }
  await removeSite()
  return null
}

interface Container {
  Service: string
  State: string
  ExitCode: number
  ID: string
}
async function containers(args: string[]): Promise<Container[]> {
  const r = await docker([...args, 'ps', '--all', '--format', 'json'])
  return r.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Container)
}
async function times(id: string): Promise<{ started: number; finished: number }> {
  const [started, finished] = (
    await docker(['inspect', '--format', '{{.State.StartedAt}} {{.State.FinishedAt}}', id])
  ).stdout
    .trim()
    .split(' ')
  return { started: Date.parse(started!), finished: Date.parse(finished!) }
}

t.test('an air-gapped Compose site: kit, install, first tenant, down and up, upgrade', { skip }, async (t: Test) => {
  const base = 'base' in found ? found.base : ''
  const { step } = stepTimer(t, 'timings')
  const busy = await engineFreeForASite()
  if (busy) return t.fail(`${busy}; this test installs a site under the same names`)
  // The image's VOLUME gives the migration containers anonymous volumes, which a recreate (the
  // upgrade) leaves behind and `down -v` does not find: the ones this test left are removed too.
  // Anonymous ones only (named by a 64-hex id): another test's site has named volumes that are
  // dangling from their creation until its containers start, and removing them failed its install.
  const dangling = async () =>
    (await docker(['volume', 'ls', '--quiet', '--filter', 'dangling=true'])).stdout
      .split('\n')
      .filter((v) => /^[0-9a-f]{64}$/.test(v))
  const danglingBefore = new Set(await dangling())
  t.teardown(async () => {
    await removeSite()
    const left = (await dangling()).filter((v) => !danglingBefore.has(v))
    if (left.length) await docker(['volume', 'rm', ...left])
  })

  const dir = tempDir(t)
  const vendor = testVendor()
  const built = await step('docker build', () => buildImage(t, base))
  if ('error' in built) return t.fail(built.error)
  await step('the release image (trusting the test vendor)', () => trustingImage(t, built.image, vendor, RELEASED))
  t.teardown(() => docker(['image', 'rm', '--force', RELEASED, NEXT]))

  // The kit: saved and pinned, then the image is gone from the engine as on a site that never had it.
  const kit = join(dir, 'kit')
  const saved = await step('images save', () =>
    installer(['images', 'save', '--only', 'atrium-server', '--output', kit, '--json']),
  )
  t.equal(saved.code, 0, saved.stderr)
  const kitReport = JSON.parse(saved.stdout) as {
    kit: { bytes: number; images: { id: string }[] }
    steps: { command: string; skipped: boolean }[]
  }
  t.same(
    kitReport.kit.images.map((i) => i.id),
    [(await docker(['image', 'inspect', '--format', '{{.Id}}', RELEASED])).stdout.trim()],
    'images.json pins the image by its ID',
  )
  t.match(
    readFileSync(join(kit, KIT.sums), 'utf8'),
    /^[0-9a-f]{64} {2}atrium-images\.tar\n[0-9a-f]{64} {2}images\.json\n$/,
    'SHA256SUMS lists both',
  )
  t.ok(
    kitReport.steps.some((s) => s.command.startsWith('docker pull') && s.skipped),
    'the image this engine holds is not pulled',
  )
  t.comment(`kit: ${Math.round(kitReport.kit.bytes / 1e6)} MB`)
  t.equal((await docker(['image', 'rm', RELEASED])).code, 0, 'the image is removed from the engine')
  t.not((await docker(['image', 'inspect', RELEASED])).code, 0, 'and is not there')

  // The site's own services, where containers reach them: on the engine's bridge, in front of the test's.
  const gateway = await bridgeGateway()
  const { databaseUrl, redisUrl, s3Endpoint } = await siteServices(t, gateway)
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const answers = join(dir, 'answers.yaml')
  writeFileSync(
    answers,
    [
      'target: compose',
      'mode: air-gapped',
      `dataPath: ${join(dir, 'data')}`,
      `outputDir: ${join(dir, 'out')}`,
      'tenantName: Compose Site',
      'adminEmail: admin@example.com',
      'config:',
      `  PORT: "${port}"`,
      `  PUBLIC_URL: "${api}"`,
      ...ownServicesConfig({
        redisUrl,
        s3Endpoint,
        bucket: await freshBucket(t),
        gateway,
      }),
    ].join('\n') + '\n',
  )
  const env = {
    SITE_DATABASE_URL: databaseUrl,
    SITE_S3_SECRET: services.s3SecretKey,
    SITE_LICENSE_KEY: await testLicense(vendor),
  }
  const args = composeArgs(parseAnswers(readFileSync(answers, 'utf8')).answers, join(dir, 'out', '.env'))

  // From here on, what other users of the machine and the engine's event stream see is recorded.
  const events = await watchDockerEvents()
  const processes = watchCommandLines(100)
  let watched: { events: string[]; commandLines: string[]; samples: number } | null = null
  const stopWatching = async () => (watched ??= { ...processes.stop(), events: await events.stop() })
  t.teardown(stopWatching)

  // The install: the installer trusts only the shipped license key (the server in the image trusts
  // the test's), and this machine is smaller than production asks (2 cores, under 100 GB free);
  // every other check (services, tools, ports) must pass.
  const install = (...extra: string[]) =>
    installer(
      [
        'install',
        '--answers',
        answers,
        '--yes',
        '--images',
        kit,
        '--allow-unsigned',
        ...['cpu', 'memory', 'disk', 'license'].flatMap((id) => ['--accept-check', id]),
        ...extra,
      ],
      env,
    )
  const installed = await step('installer install', () => install('--json'))
  const report = JSON.parse(installed.stdout || '{}') as {
    exitCode: number
    error: string | null
    checks: { id: string; status: string }[]
    steps: { command: string; exitCode: number | null }[]
    firstAdmin: { email: string; password: string; apiKey: string; tenantId: string } | null
    summary: string[]
  }
  if (installed.code !== 0) {
    const logs = await docker([...args, 'logs', '--no-color', '--tail', '60'])
    return t.fail(
      `install failed (exit ${installed.code}): ${report.error ?? installed.stderr}\n${logs.stdout.slice(-4000)}`,
    )
  }
  const failed = report.checks.filter((c) => c.status === 'fail').map((c) => c.id)
  t.same(
    failed.filter((id) => !['cpu', 'memory', 'disk', 'license'].includes(id)),
    [],
    `only the machine's size and the shipped-key license fail (${failed.join(', ')})`,
  )
  const commands = report.steps.map((s) => s.command)
  t.same(
    commands.slice(0, 3),
    [
      'docker version --format {{.Server.Os}}/{{.Server.Arch}}',
      `docker load --input ${join(kit, KIT.images)}`,
      `docker image inspect --format {{.Id}} ${RELEASED}`,
    ],
    'the kit is loaded first, on an engine of its platform, and the image checked against its pin',
  )
  t.ok(
    commands.some((c) => c.includes('/compose.airgap.yaml ') && c.includes(' up ') && c.endsWith('--pull never')),
    'up with the air-gapped overlay, never pulling',
  )
  const ran = await containers(args)
  t.same(
    ran.map((c) => c.Service).sort(),
    ['migrate', 'server'],
    'the site has its own PostgreSQL, Redis and S3: no bundled one started',
  )
  t.match(
    ran.find((c) => c.Service === 'migrate'),
    { State: 'exited', ExitCode: 0 },
  )
  const airGapped = (
    await docker([...args, 'exec', '-T', 'server', 'node', '-e', 'console.log(process.env.AIR_GAPPED)'])
  ).stdout.trim()
  t.equal(airGapped, 'true', 'the server runs air-gapped')
  // The support bundle finds the project the installer deployed (its name and files).
  const supportZip = join(tempDir(t), 'support.zip')
  const support = await step('support-bundle', () =>
    installer(['support-bundle', '--answers', answers, '--output', supportZip, '--json'], env),
  )
  t.equal(support.code, 0, support.stderr)
  const supportFiles = await unzip(readFileSync(supportZip))
  t.match(
    supportFiles['logs/compose-ps.txt'],
    /--project-name atrium [^\n]*\n\(exit code 0\)\n[\s\S]*server/,
    'docker compose ps lists the running server',
  )
  t.match(supportFiles['logs/compose.txt'], /\(exit code 0\)\n[\s\S]*server-1 +\|/, "and the logs hold the server's")

  // The first tenant as the summary prints it: the sign-in and the key work.
  const admin = report.firstAdmin!
  t.ok(
    report.summary.some((l) => l.includes(admin.password)),
    'the summary shows the password once',
  )
  const login = async () =>
    (
      await fetch(`${api}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: admin.email, password: admin.password }),
      })
    ).status
  t.equal(await login(), 200, 'the printed email and password sign in')
  const auth = { authorization: `Bearer ${admin.apiKey}`, 'content-type': 'application/json' }
  const made = await fetch(`${api}/api/v1/projects`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'Kept across restarts', language: 'typescript' }),
  })
  t.equal(made.status, 201, 'the printed API key works')

  // The installer's upgrade over the running site (the same release): the site backed up first, no second tenant.
  const passphrase = join(dir, 'passphrase')
  writeFileSync(passphrase, `${randomBytes(18).toString('base64url')}\n`, { mode: 0o600 })
  const again = await step('installer install again (an upgrade)', () =>
    install('--passphrase-file', passphrase, '--json'),
  )
  t.equal(again.code, 0, again.code ? again.stderr || again.stdout.slice(-3000) : 'the upgrade through the installer')
  t.match(JSON.parse(again.stdout || '{}'), {
    upgrade: { backup: { path: String } },
    firstAdmin: { tenantId: admin.tenantId },
  })
  const listed = async () =>
    (
      (await (await fetch(`${api}/api/v1/projects`, { headers: auth })).json()) as { data: { name: string }[] }
    ).data.map((p) => p.name)

  // down -v and up: every datum kept (the volumes are external, which down -v never removes), nothing applied twice.
  const down = await step('down -v', () => docker([...args, 'down', '--volumes', '--timeout', '30'], 120_000))
  t.equal(down.code, 0, down.code ? down.stderr : 'down')
  t.same(await containers(args), [], 'down removed the containers')
  const up = await step('up again', () => runUp(args))
  t.equal(up.code, 0, up.code ? up.stderr : 'up again')
  t.same(await listed(), ['Kept across restarts'], 'the project is still there')
  t.equal(await login(), 200, 'the admin still signs in')
  t.match(
    (await docker([...args, 'logs', '--no-color', 'migrate'])).stdout,
    /\{"applied":\[\]\}/,
    'the migration service found nothing to do',
  )

  // An upgrade: a newer tag with one more migration. The migration service runs it once, and the
  // new server starts only after it finished.
  const next = tempDir(t)
  writeFileSync(join(next, PROBE_MIGRATION.file), `create table ${PROBE_MIGRATION.table} (id integer primary key);\n`)
  writeFileSync(
    join(next, 'Dockerfile'),
    `FROM ${RELEASED}\nCOPY ${PROBE_MIGRATION.file} /app/server/platform/migrations/\n`,
  )
  t.equal((await docker(['build', '-t', NEXT, next], 120_000)).code, 0, 'the newer image builds')
  const before = (await containers(args)).find((c) => c.Service === 'server')!
  const upgraded = await step('upgrade', () => runUp(args, { ATRIUM_VERSION: NEXT_TAG }))
  t.equal(upgraded.code, 0, upgraded.code ? upgraded.stderr : 'up with the newer tag')
  const after = await containers(args)
  const migrate = after.filter((c) => c.Service === 'migrate')
  const server = after.find((c) => c.Service === 'server')!
  t.equal(migrate.length, 1, 'one migration container')
  t.match(migrate[0], { State: 'exited', ExitCode: 0 })
  t.not(server.ID, before.ID, 'the server was replaced')
  const migrateLog = (await docker(['logs', migrate[0]!.ID])).stdout
  t.match(migrateLog, new RegExp(`\\{"applied":\\[${PROBE_MIGRATION.version}\\]\\}`), 'the new migration was applied')
  t.equal((await docker(['inspect', '--format', '{{.RestartCount}}', migrate[0]!.ID])).stdout.trim(), '0', 'once')
  const [m, s] = [await times(migrate[0]!.ID), await times(server.ID)]
  t.ok(
    s.started >= m.finished,
    `the server started after the migration finished (${(s.started - m.finished) / 1000} s later)`,
  )
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  t.teardown(() => sql.end())
  t.same(
    await sql`select version from atrium_migrations where version = ${PROBE_MIGRATION.version}`,
    [{ version: PROBE_MIGRATION.version }],
    'recorded once',
  )
  t.same(await listed(), ['Kept across restarts'], 'and the data is still there after the upgrade')

  // No secret, generated or given, on any command line or in any engine event during all of it.
  const seen = await stopWatching()
  const secrets = {
    ...configSecrets(readEnvFile(join(dir, 'out', '.env'))!.values),
    "the first admin's password": admin.password,
    "the first admin's API key": admin.apiKey,
    'the backup passphrase': readFileSync(passphrase, 'utf8').trim(),
    ...env,
  }
  t.ok(
    Object.keys(secrets).length >= 10,
    `looked for ${Object.keys(secrets).length} secrets: ${Object.keys(secrets).join(', ')}`,
  )
  t.ok(
    seen.events.some((e) => /exec_create: .*create-tenant .*--password-stdin/.test(e)),
    `the events hold the first tenant's exec (${seen.events.length} events)`,
  )
  t.ok(
    seen.commandLines.some((l) => l.includes('create-tenant')),
    `the process list was read ${seen.samples} times and saw the first tenant made`,
  )
  t.same(secretsIn(seen.events, secrets), [], 'no secret in docker events')
  t.same(secretsIn(seen.commandLines, secrets), [], 'no secret on a command line')
})

/** `up --wait` as the installer runs it, with extra variables (ATRIUM_VERSION for an upgrade). */
function runUp(args: string[], env: Record<string, string> = {}) {
  return runTool('docker', [...args, 'up', '--detach', '--wait', '--wait-timeout', '300', '--pull', 'never'], {
    env,
    timeoutMs: 360_000,
  })
}
