// install: configure, then the deploy, /readyz and the first tenant; over a running Atrium, the
// upgrade (its backup and the rollback are in restore.test.ts). Tools answer through a fake runner,
// so nothing here needs Docker or a cluster.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { BadInput } from '../../../installer/commands/command.js'
import { installCommand } from '../../../installer/commands/install.js'
import type { Progress } from '../../../installer/ui/output.js'
import { EXIT } from '../../../installer/core/report.js'
import type { Runner } from '../../../installer/core/run.js'
import { IMAGES, imageRef } from '../../../config/images.js'
import { KIT } from '../../../installer/deploy/airgap.js'
import { runInstall } from '../../../installer/deploy/install.js'
import { ID, writeKit } from '../../helpers/kit.js'
import { testVendor } from '../../helpers/license.js'
import { testEnv, tempDir } from '../../helpers/platform.js'
import { serverProcess } from '../../helpers/cli.js'
import { NEEDS_SERVICES, realServices, realSettings, tools, UNMET_HERE } from '../../helpers/installer.js'
import { VERSION } from '../../../common/version.js'
import { apiServer, ready, site } from '../fixtures.js'

t.test('install --dry-run lists every command; a first tenant the context knows is not made again', async (t) => {
  const ctx = site(t, { adminEmail: 'admin@example.com' })
  const { runner, calls } = tools()
  const dry = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE, dryRun: true })
  t.match(dry, { command: 'install', exitCode: EXIT.ok, written: false, stage: null, steps: [] })
  t.match(dry.deploy.at(-1), { title: 'Run the admin CLI: create-tenant', command: /.*/ })
  t.ok(dry.deploy.at(-1)!.command.includes('--password-stdin'), 'the password goes on its standard input')
  t.notOk(JSON.stringify(dry).includes('<generated>'), 'and is in no command the plan shows')
  t.notOk(
    // The preflight asks which project publishes a port (docker ps --filter publish=); nothing else.
    calls.some((c) => c.includes('compose') && !c.endsWith('version') && !c.startsWith('docker ps --filter publish=')),
    'a dry run runs no deploy command',
  )
  const known = { ...ctx, firstAdmin: { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com' } }
  const again = await installCommand(known, { runner, acceptCheck: UNMET_HERE, dryRun: true })
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
  const r = await installCommand(site(t), { runner, acceptCheck: UNMET_HERE, images: kit, trustedKeys: vendor.keys })
  t.match(r, {
    exitCode: EXIT.error,
    stage: 'deploy',
    deployed: false,
    error: /^Nothing deployed: atrium-images\.tar in the air-gap kit is damaged or incomplete/,
  })
  t.match(
    r.record.at(-1),
    { name: 'kit', stage: 'deploy', outcome: 'failed' },
    'the record stops at the step that failed',
  )
  const unsigned = tempDir(t)
  await writeKit(unsigned)
  t.match(await installCommand(site(t), { runner, acceptCheck: UNMET_HERE, images: unsigned }), {
    stage: 'deploy',
    error: /^Nothing deployed: the air-gap kit in .* is not signed by the vendor/,
  })
  t.same(
    calls.filter(
      (c) =>
        !c.includes(' version') &&
        !c.startsWith('docker volume inspect ') &&
        !c.startsWith('docker ps --filter publish='),
    ),
    [],
    "no docker command ran (only the preflight read the tools' versions, the site's volumes and its ports' publishers)",
  )
})

/** An engine and a registry where every command works: the kit's image has the pinned ID, and the registry gives it a digest. */
function registryEngine() {
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
  return { runner, calls }
}

t.test(
  'a Helm install from the kit pushes its images to the registry, then pins the chart to the server image there by digest',
  // A Helm site's services are its own (no bundle): their checks cannot be accepted, so they must answer.
  { skip: !realServices && NEEDS_SERVICES },
  async (t) => {
    const { url } = await ready(t)
    const vendor = testVendor()
    const kit = tempDir(t)
    await writeKit(kit, { vendor })
    const ctx = site(
      t,
      { target: 'helm', mode: 'air-gapped', registry: 'reg.local:5000' },
      {
        PUBLIC_URL: url,
        ...(await realSettings(t)),
      },
    )
    const { runner } = registryEngine()
    const plan = await installCommand(ctx, {
      runner,
      acceptCheck: UNMET_HERE,
      images: kit,
      trustedKeys: vendor.keys,
      dryRun: true,
    })
    t.match(plan.deploy.at(-1)!.command.join(' '), /--set image\.digest=<the digest the registry gives>/)
    const r = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE, images: kit, trustedKeys: vendor.keys })
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
    // A registry that records no digest: pinned or not installed at all.
    const undigested: Runner = async (file, args, opts) =>
      args[3] === '{{json .RepoDigests}}'
        ? { ...(await runner(file, args, opts)), stdout: '[]' }
        : runner(file, args, opts)
    const unpinned = await installCommand(ctx, {
      runner: undigested,
      acceptCheck: UNMET_HERE,
      images: kit,
      trustedKeys: vendor.keys,
    })
    t.match(unpinned, {
      exitCode: EXIT.error,
      stage: 'deploy',
      error:
        /^Deploy failed: pushed, but the engine recorded no digest in reg\.local:5000 for the server image; nothing installed\nNothing was changed: the running site was not touched and the configuration files in use are as they were\.$/,
    })
    t.notOk(
      unpinned.steps.some((s) => s.command.startsWith('helm')),
      'no helm upgrade',
    )
  },
)

t.test(
  "a Helm install from the kit without the site's registry is refused before anything is configured or pushed",
  async (t) => {
    const vendor = testVendor()
    const kit = tempDir(t)
    await writeKit(kit, { vendor })
    const { runner, calls } = registryEngine()
    await t.rejects(installCommand(site(t, { target: 'helm' }), { runner, images: kit }), {
      message: /a Helm install from the kit \(--images\) pushes its images to the site's registry: add --registry/,
    })
    t.same(calls, [], 'refused before any check or command ran')
    // Credentials in the registry would go on docker's and helm's command lines: refused, not echoed, nothing run.
    const refused = await installCommand(site(t, { target: 'helm' }), {
      runner,
      images: kit,
      registry: 'robot:hunter2-pw@reg.local:5000',
    }).catch((err: Error) => err)
    t.type(refused, BadInput, 'bad input (exit 2)')
    t.match(refused, { message: /--registry must be host\[:port\]\[\/path\], without credentials/ })
    t.notMatch((refused as Error).message, /hunter2|robot/)
    t.same(calls, [], 'nothing ran')
    // The interactive installer deploys through runInstall itself: the same refusal, nothing pushed anywhere.
    t.match(await runInstall(site(t, { target: 'helm' }), {}, { runner, kit, trust: { keys: vendor.keys } }), {
      ok: false,
      error:
        /^Nothing deployed: a Helm install from the kit \(--images\) pushes its images to the site's registry: add --registry/,
    })
    t.same(calls, [])
  },
)

t.test(
  "install over a running Atrium: its port, published by the site's own project, is the one the install replaces, and the upgrade goes ahead",
  async (t) => {
    const running = await serverProcess(t, await testEnv(t))
    const ctx = site(t, {}, { PORT: String(running.port) })
    const { runner, calls } = tools({ published: { [running.port]: 'atrium' } })
    const r = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE, skipBackup: true })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      {
        status: 'pass',
        found: new RegExp(
          `^${running.port} in use by this site's server \\(Atrium ${VERSION}\\), which the install replaces`,
        ),
      },
    )
    t.match(r, { exitCode: EXIT.ok, stage: 'done', ready: true, upgrade: { from: VERSION, backup: null } })
    t.ok(
      calls.some((c) => c.includes(' up --detach')),
      'deployed',
    )

    // Another site's Atrium on the port is in the way, and not an upgrade of this site: no backup is asked for.
    const other = tools({ published: { [running.port]: 'green' } })
    const r2 = await installCommand(site(t, {}, { PORT: String(running.port) }), {
      runner: other.runner,
      acceptCheck: UNMET_HERE,
    })
    t.match(
      r2.checks.find((c) => c.id === 'ports'),
      {
        status: 'fail',
        found: `port ${running.port} is in use by the Compose project green (its server), Atrium ${VERSION}`,
      },
    )
    t.match(r2, { upgrade: null }, "the other site's version is not this site's")
    t.match(
      r2.record.find((s) => s.name === 'backup'),
      { outcome: 'skipped' },
    )
  },
)

t.test(
  'a Compose upgrade that goes back a version or skips one is refused before anything changes, unless --allow-skip',
  async (t) => {
    // An Atrium newer than this installer, as its public endpoints say.
    const { port } = await apiServer(t, 'Atrium API', '99.1.0')
    const ctx = site(t, {}, { PORT: String(port) })
    const { runner, calls } = tools({ published: { [port]: 'atrium' } })
    const r = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE })
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
    const allowed = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE, allowSkip: true, skipBackup: true })
    t.match(allowed, { stage: 'done', deployed: true }, 'let through: deployed')
  },
)

t.test('install shows its configuration before the deploy starts, then deploys and waits for /readyz', async (t) => {
  const { port } = await ready(t)
  const ctx = site(t, {}, { PORT: String(port) })
  const events: string[] = []
  const progress: Progress = {
    configured: (r) => events.push(`configured ${r.written}`),
    step: (s) => events.push(`${s.result ? 'end' : 'start'} ${s.command.title}`),
  }
  const r = await installCommand(ctx, { runner: tools().runner, acceptCheck: UNMET_HERE }, progress)
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
  // What --json prints and the text's table is made of: every step the runner reached, in order.
  t.same(
    r.record.map((s) => [s.name, s.outcome]),
    [
      ['bundle', 'done'],
      ['kit', 'done'],
      ['volumes', 'done'],
      ['running-version', 'done'],
      ['upgrade-guard', 'skipped'],
      ['backup', 'skipped'],
      ['data-folders', 'done'],
      ['push-kit', 'done'],
      ['prepare', 'done'],
      ['images', 'done'],
      ['migrate', 'done'],
      ['switch', 'done'],
      ['ready', 'done'],
      ['commit', 'done'],
      ['first-tenant', 'skipped'],
    ],
    'each step with its outcome; a first install has no upgrade and, without adminEmail, no first tenant',
  )
  t.ok(
    r.record.every((s) => s.ms >= 0 && (s.outcome !== 'skipped' || s.ms === 0)),
    'each step timed',
  )
})
