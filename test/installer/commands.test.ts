// The commands act on the context they are given (what is written, the first tenant) and return
// plain reports. Tools answer through a fake runner, so nothing here needs Docker or a cluster.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { BadInput } from '../../installer/commands/command.js'
import { configureCommand } from '../../installer/commands/configure.js'
import { imagesCommand } from '../../installer/commands/images.js'
import { installCommand } from '../../installer/commands/install.js'
import { preflightCommand } from '../../installer/commands/preflight.js'
import type { Progress } from '../../installer/ui/output.js'
import { DEFAULT_ANSWERS, type Answers } from '../../installer/core/answers.js'
import { contextFor, type Resolved } from '../../installer/core/context.js'
import { EXIT } from '../../installer/core/report.js'
import type { Runner } from '../../installer/core/run.js'
import { IMAGES, imageRef } from '../../config/images.js'
import { KIT } from '../../installer/deploy/airgap.js'
import { runInstall } from '../../installer/deploy/install.js'
import { ID, writeKit } from '../helpers/kit.js'
import { testVendor } from '../helpers/license.js'
import { testEnv, tempDir } from '../helpers/platform.js'
import { serverProcess } from '../helpers/cli.js'
import { tools } from '../helpers/installer.js'
import { VERSION } from '../../common/version.js'

/** A compose site in a temporary folder, nothing written yet; no license, so the license check fails. */
function site(t: Parameters<typeof tempDir>[0], over: Partial<Answers> = {}, config: Answers['config'] = {}): Resolved {
  const dir = tempDir(t)
  return contextFor(
    {
      ...DEFAULT_ANSWERS,
      dataPath: join(dir, 'data'),
      outputDir: join(dir, 'out'),
      ...over,
      config: { PUBLIC_URL: 'https://atrium.example.com', ...config },
    },
    { env: {} },
  )
}

t.test('preflight reports its checks, their status and the exit code they make', async (t) => {
  const r = await preflightCommand(site(t), { runner: tools().runner })
  t.match(r, { command: 'preflight', exitCode: EXIT.checkFailed, status: 'fail' })
  t.match(
    r.checks.find((c) => c.id === 'license'),
    { status: 'fail', found: 'missing' },
  )
  t.match(
    r.checks.find((c) => c.id === 'tools.docker'),
    { status: 'pass', found: '99.0.0' },
  )
})

t.test(
  "the preflight checks the bundled MinIO's port as written in .env, and names that setting when the port is taken",
  async (t) => {
    const busy = createServer()
    await new Promise<void>((r) => busy.listen(0, '0.0.0.0', r))
    t.teardown(() => new Promise<void>((r) => busy.close(() => r())))
    const port = (busy.address() as AddressInfo).port
    const first = site(t)
    await configureCommand(first, { runner: tools().runner, ignoreFailed: true })
    // The admin moves MinIO's published port in the written .env; a re-run keeps it and checks it.
    const env = join(first.answers.outputDir, '.env')
    writeFileSync(env, readFileSync(env, 'utf8').replace(/^ATRIUM_S3_PORT=.*$/m, `ATRIUM_S3_PORT=${port}`))
    const again = contextFor(first.answers, { env: {} })
    const r = await preflightCommand(again, { runner: tools().runner })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      {
        status: 'fail',
        found: new RegExp(`port ${port} is in use`),
        fix: new RegExp(`choose another port with ATRIUM_S3_PORT in ${env.replace(/[.]/g, '\\.')}`),
      },
    )
  },
)

t.test(
  'failed checks stop configure before anything is planned; --ignore-failed-checks carries on and says so',
  async (t) => {
    const ctx = site(t)
    const { runner } = tools()
    const stopped = await configureCommand(ctx, { runner })
    t.match(stopped, {
      exitCode: EXIT.checkFailed,
      stopped: 'checks',
      written: false,
      changes: [],
      files: [],
      replay: null,
    })
    t.notOk(existsSync(ctx.answers.outputDir), 'nothing written')
    const written = await configureCommand(ctx, { runner, ignoreFailed: true })
    t.match(written, {
      exitCode: EXIT.ok,
      stopped: null,
      checksIgnored: true,
      written: true,
      files: [ctx.files.answers.replace('answers.yaml', '.env'), ctx.files.answers],
    })
    t.equal(written.replay, `npm run --silent installer -- configure --answers ${ctx.files.answers} --yes`)
    t.ok(existsSync(join(ctx.answers.outputDir, '.env')))
  },
)

t.test(
  'configure keeps what the context says is written, whatever is on disk: the context is read once, before',
  async (t) => {
    const key = Buffer.alloc(32, 3).toString('base64')
    // Nothing on disk, but the context holds a written configuration: the plan must follow it.
    const ctx = {
      ...site(t),
      existing: {
        ENCRYPTION_MASTER_KEY: key,
        POSTGRES_PASSWORD: 'p'.repeat(48),
        REDIS_PASSWORD: 'r'.repeat(48),
        MINIO_ROOT_PASSWORD: 'm'.repeat(48),
        MINIO_ATRIUM_PASSWORD: 'a'.repeat(48),
      },
    }
    const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
    t.same(r.generated, [], 'no secret made again')
    t.notOk(
      r.changes.some((c) => c.name === 'ENCRYPTION_MASTER_KEY'),
      'the master key is not a change',
    )
    t.match(readFileSync(join(ctx.answers.outputDir, '.env'), 'utf8'), `ENCRYPTION_MASTER_KEY=${key}`)
  },
)

t.test('problems in the context or the configuration stop configure with exit 2, nothing written', async (t) => {
  const ctx = {
    ...site(t, {}, { PORT: 'eighty' }),
    problems: ['config.LICENSE_KEY: the environment variable X is not set'],
  }
  const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
  t.match(r, { exitCode: EXIT.badInput, stopped: 'problems', written: false })
  t.match(r.problems, ['config.LICENSE_KEY: the environment variable X is not set', /PORT must be a whole number/])
  t.notOk(existsSync(ctx.answers.outputDir))
})

t.test('install --dry-run lists every command; a first tenant the context knows is not made again', async (t) => {
  const ctx = site(t, { adminEmail: 'admin@example.com' })
  const { runner, calls } = tools()
  const dry = await installCommand(ctx, { runner, ignoreFailed: true, dryRun: true })
  t.match(dry, { command: 'install', exitCode: EXIT.ok, written: false, stage: null, steps: [] })
  t.match(dry.deploy.at(-1), { title: 'Run the admin CLI: create-tenant', command: /.*/ })
  t.ok(dry.deploy.at(-1)!.command.includes('--password=<generated>'), 'the password is not made on a dry run')
  t.notOk(
    calls.some((c) => c.includes('compose') && !c.endsWith('version')),
    'a dry run runs no deploy command',
  )
  const known = { ...ctx, firstAdmin: { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com' } }
  const again = await installCommand(known, { runner, ignoreFailed: true, dryRun: true })
  t.notOk(
    again.deploy.some((c) => c.command.includes('create-tenant')),
    'no second tenant',
  )
})

t.test('install --images refuses a damaged or unsigned kit before it loads or starts anything', async (t) => {
  const kit = tempDir(t)
  const vendor = testVendor()
  await writeKit(kit, { vendor })
  writeFileSync(join(kit, KIT.images), 'layers, cut short')
  const { runner, calls } = tools()
  const r = await installCommand(site(t), { runner, ignoreFailed: true, images: kit, trustedKeys: vendor.keys })
  t.match(r, {
    exitCode: EXIT.error,
    stage: 'deploy',
    deployed: false,
    error: /^Nothing deployed: atrium-images\.tar in the air-gap kit is damaged or incomplete/,
  })
  const unsigned = tempDir(t)
  await writeKit(unsigned)
  t.match(await installCommand(site(t), { runner, ignoreFailed: true, images: unsigned }), {
    stage: 'deploy',
    error: /^Nothing deployed: the air-gap kit in .* is not signed by the vendor/,
  })
  t.same(
    calls.filter((c) => !c.includes(' version')),
    [],
    "no docker command ran (only the preflight read the tools' versions)",
  )
})

t.test(
  'a Helm install from the kit pushes its images to the registry, then pins the chart to the server image there by digest',
  async (t) => {
    const server = createServer((req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end())
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => server.close(() => r())))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const vendor = testVendor()
    const kit = tempDir(t)
    await writeKit(kit, { vendor })
    const ctx = site(
      t,
      { target: 'helm', mode: 'air-gapped', registry: 'reg.local:5000' },
      {
        PUBLIC_URL: url,
        DATABASE_URL: 'postgres://a@10.0.0.5/a',
        REDIS_URL: 'redis://10.0.0.6',
        R2_ENDPOINT: 'http://10.0.0.7:9000',
        R2_BUCKET: 'a',
        R2_ACCESS_KEY_ID: 'a',
        R2_SECRET_ACCESS_KEY: 's',
      },
    )
    const calls: string[] = []
    const runner: Runner = async (file, args) => {
      const command = [file, ...args].join(' ')
      calls.push(command)
      const format = args[3]
      const stdout =
        args[0] === 'version'
          ? 'linux/amd64'
          : format === '{{.Id}}'
            ? ID(1)
            : format === '{{json .RepoDigests}}'
              ? JSON.stringify([`reg.local:5000/atrium/atrium-server@${ID(7)}`])
              : 'version 99.0.0'
      return { command, exitCode: 0, stdout, stderr: '', notFound: false, timedOut: false }
    }
    const plan = await installCommand(ctx, {
      runner,
      ignoreFailed: true,
      images: kit,
      trustedKeys: vendor.keys,
      dryRun: true,
    })
    t.match(plan.deploy.at(-1)!.command.join(' '), /--set image\.digest=<the digest the registry gives>/)
    const r = await installCommand(ctx, { runner, ignoreFailed: true, images: kit, trustedKeys: vendor.keys })
    t.match(r, { exitCode: EXIT.ok, stage: 'done', error: null })
    const ran = r.steps.map((s) => s.command)
    t.same(
      ran.slice(0, 4),
      [
        `docker load --input ${join(kit, KIT.images)}`,
        `docker image inspect --format {{.Id}} ${imageRef(IMAGES[0]!)}`,
        `docker tag ${imageRef(IMAGES[0]!)} reg.local:5000/atrium/atrium-server:${IMAGES[0]!.tag}`,
        `docker push reg.local:5000/atrium/atrium-server:${IMAGES[0]!.tag}`,
      ],
      'only the image the chart runs is pushed (from an engine of any platform)',
    )
    t.match(
      ran.at(-1),
      new RegExp(
        `^helm upgrade --install .* --set global\\.imageRegistry=reg\\.local:5000 --set image\\.digest=${ID(7)} --wait`,
      ),
    )
    await t.rejects(installCommand(site(t, { target: 'helm' }), { runner, images: kit }), {
      message: /a Helm install from the kit \(--images\) pushes its images to the site's registry: add --registry/,
    })
    // The interactive installer deploys through runInstall itself: the same refusal, nothing pushed anywhere.
    const before = calls.length
    t.match(await runInstall(site(t, { target: 'helm' }), {}, { runner, kit, trust: { keys: vendor.keys } }), {
      ok: false,
      error:
        /^Nothing deployed: a Helm install from the kit \(--images\) pushes its images to the site's registry: add --registry/,
    })
    t.equal(calls.length, before)
    // A registry that records no digest: pinned or not installed at all.
    const undigested: Runner = async (file, args, opts) =>
      args[3] === '{{json .RepoDigests}}'
        ? { ...(await runner(file, args, opts)), stdout: '[]' }
        : runner(file, args, opts)
    const unpinned = await installCommand(ctx, {
      runner: undigested,
      ignoreFailed: true,
      images: kit,
      trustedKeys: vendor.keys,
    })
    t.match(unpinned, {
      exitCode: EXIT.error,
      stage: 'deploy',
      error:
        /^Deploy failed: pushed, but the engine recorded no digest in reg\.local:5000 for the server image; nothing installed$/,
    })
    t.notOk(
      unpinned.steps.some((s) => s.command.startsWith('helm')),
      'no helm upgrade',
    )
  },
)

t.test(
  'install over a running Atrium: its port is recognised as the one the install replaces, and the upgrade goes ahead',
  async (t) => {
    const running = await serverProcess(t, await testEnv(t))
    const ctx = site(t, {}, { PORT: String(running.port) })
    const { runner, calls } = tools()
    const r = await installCommand(ctx, { runner, ignoreFailed: true, skipBackup: true })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      {
        status: 'pass',
        found: new RegExp(`^${running.port} in use by Atrium ${VERSION} \\(the install replaces it\\)`),
      },
    )
    t.match(r, { exitCode: EXIT.ok, stage: 'done', ready: true, upgrade: { from: VERSION, backup: null } })
    t.ok(
      calls.some((c) => c.includes(' up --detach')),
      'deployed',
    )
  },
)

t.test(
  'a Compose upgrade that goes back a version or skips one is refused before anything changes, unless --allow-skip',
  async (t) => {
    // An Atrium newer than this installer, as its public endpoints say.
    const newer = createServer((req, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify(
            req.url === '/healthz' ? { data: { status: 'ok' } } : { info: { title: 'Atrium API', version: '99.1.0' } },
          ),
        ),
    )
    await new Promise<void>((r) => newer.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => newer.close(() => r())))
    const port = (newer.address() as AddressInfo).port
    const ctx = site(t, {}, { PORT: String(port) })
    const { runner, calls } = tools()
    const r = await installCommand(ctx, { runner, ignoreFailed: true })
    t.match(r, {
      exitCode: EXIT.error,
      stage: 'deploy',
      deployed: false,
      error: `Nothing deployed: upgrade guard: going back from 99.1.0 to ${VERSION} is not supported (database migrations only go forward); restore a backup taken before the upgrade instead`,
    })
    t.notOk(
      calls.some((c) => c.includes(' up ') || c.includes('volume create')),
      'nothing deployed',
    )
    const allowed = await installCommand(ctx, { runner, ignoreFailed: true, allowSkip: true, skipBackup: true })
    t.match(allowed, { stage: 'done', deployed: true }, 'let through: deployed')
  },
)

t.test('install shows its configuration before the deploy starts, then deploys and waits for /readyz', async (t) => {
  const server = createServer((req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end())
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const port = (server.address() as AddressInfo).port
  const ctx = site(t, {}, { PORT: String(port) })
  const events: string[] = []
  const progress: Progress = {
    configured: (r) => events.push(`configured ${r.written}`),
    step: (s) => events.push(`${s.result ? 'end' : 'start'} ${s.command.title}`),
  }
  const r = await installCommand(ctx, { runner: tools().runner, ignoreFailed: true }, progress)
  t.equal(events[0], 'configured true', 'the configuration part first')
  t.match(events.slice(1, 3), [
    'start Validate the Compose files with the configuration',
    'end Validate the Compose files with the configuration',
  ])
  t.match(r, {
    exitCode: EXIT.ok,
    stage: 'done',
    deployed: true,
    ready: true,
    url: 'https://atrium.example.com',
    firstAdmin: null,
    error: null,
  })
  t.ok(
    r.steps.length > 0 && r.steps.every((s) => s.exitCode === 0 || s.skipped),
    'every step ran or was made unnecessary',
  )
  t.match(r.summary, ['Atrium is ready at https://atrium.example.com.', /No first tenant was created/])
})

t.test('images: list, a dry run, a run with each step, and bad input for what is missing', async (t) => {
  const list = await imagesCommand('list')
  t.equal(list.images.length, IMAGES.length)
  t.match(list.images[0], { ref: /:/ })
  const { runner, calls } = tools()
  const dir = tempDir(t)
  const vendor = testVendor()
  await writeKit(dir, { vendor, images: [] })
  const tarball = join(dir, KIT.images)
  const dry = await imagesCommand('load', { images: dir, dryRun: true, runner })
  t.same(dry.commands, [{ title: `Load the images from ${tarball}`, command: ['docker', 'load', '--input', tarball] }])
  t.same(calls, [], 'a dry run runs nothing')
  const loaded = await imagesCommand('load', { images: dir, runner, trustedKeys: vendor.keys })
  t.match(loaded, {
    action: 'load',
    ok: true,
    exitCode: EXIT.ok,
    steps: [{ command: `docker load --input ${tarball}`, exitCode: 0, skipped: false }],
    kit: { dir, signedBy: vendor.kid },
  })
  const failing: Runner = async (file, args) => ({
    command: [file, ...args].join(' '),
    exitCode: 1,
    stdout: '',
    stderr: 'no space left',
    notFound: false,
    timedOut: false,
  })
  t.match(await imagesCommand('load', { images: dir, runner: failing, trustedKeys: vendor.keys }), {
    ok: false,
    exitCode: EXIT.error,
    error: `Failed at: docker load --input ${tarball}\nno space left`,
  })
  const unchecked = await imagesCommand('load', { images: '/media/kit', runner })
  t.match(unchecked, {
    ok: false,
    exitCode: EXIT.error,
    error: /the air-gap kit \/media\/kit does not exist/,
    steps: [],
  })
  const missing = await imagesCommand('save').catch((err: unknown) => err)
  t.ok(missing instanceof BadInput, 'bad input (exit 2), not an error of the installer')
  t.match(missing, { problems: ['images save needs --output DIR (the kit folder to write)'] })
  await t.rejects(imagesCommand('push', { registry: 'https://x' }), { message: /without a scheme/ })
  await t.rejects(imagesCommand('burn'), { message: /unknown images command burn/ })
})
