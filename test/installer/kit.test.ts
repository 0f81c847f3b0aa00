// The vendor's air-gap kit (installer/kit.ts) as a site gets it: the installer as one file, the
// Compose bundle, the packaged chart (real Helm) and the pinned images (docker stands in as a
// script), signed. Then the kit's own installer run as an air-gapped site runs it: copied to a
// folder with no node_modules anywhere above it, in a network namespace of its own (`unshare -n`:
// not even loopback), trusting the kit's keys.
import { spawn } from 'node:child_process'
import { appendFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import t from 'tap'
import { VERSION } from '../../common/version.js'
import { IMAGES, imageRef } from '../../config/images.js'
import { signSums } from '../../licenses/kit-signature.js'
import { KIT, openKit, writeSums } from '../../installer/deploy/airgap.js'
import type { Runner } from '../../installer/core/run.js'
import { run } from '../../installer/core/run.js'
import { buildKit, cli, KIT_DOCS } from '../../installer/kit.js'
import { finished, ROOT, type Ran } from '../helpers/cli.js'
import { fakeDocker, ID } from '../helpers/kit.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { tempDir } from '../helpers/platform.js'
import { acceptUnmet, NEEDS_SERVICES, realServices, realSettings } from '../helpers/installer.js'
import { findTool, needs } from '../helpers/tools.js'

t.setTimeout(600_000)

const server = IMAGES[0]!
/** docker (saving and inspecting) in process; Helm the real one. */
const runner: Runner = async (file, args, o) => {
  if (file === 'helm') return run(findTool('helm') ?? 'helm', args, o)
  const stdout =
    args[0] === 'save'
      ? (writeFileSync(args[2]!, 'layers'), '')
      : args[0] === 'image'
        ? `${ID(1)} linux/amd64 ["atrium/atrium-server@${ID(9)}"]`
        : ''
  return { command: [file, ...args].join(' '), exitCode: 0, stdout, stderr: '', notFound: false, timedOut: false }
}

/** unshare -n works here (root, or user namespaces allowed). */
const isolated = await finished(spawn('unshare', ['-n', 'true'], { stdio: ['ignore', 'pipe', 'pipe'] })).catch(
  () => null,
)
const noNamespace =
  isolated?.code === 0
    ? false
    : `needs \`unshare -n\` (root or user namespaces) to run the installer with no network: ${isolated?.stderr.trim() || 'not found'}`

t.test(
  'the vendor kit: the installer in one file, the packaged chart, the pinned images, every file signed',
  { skip: needs('helm') || noNamespace },
  async (t) => {
    const vendor = testVendor()
    const dir = join(tempDir(t), 'kit')
    const said: string[] = []
    const built = await buildKit({
      output: dir,
      images: [server],
      signer: { privateKey: vendor.privateKey, kid: vendor.kid },
      runner,
      onStep: (l) => said.push(l),
    })
    t.match(built, { dir, signedBy: vendor.kid })
    t.match(
      said.at(-1),
      /^WARNING: sites will refuse this kit: SHA256SUMS is signed by a key this installer does not trust \(kid test-1\)/,
      'a key the shipped installer does not trust is said at once',
    )
    for (const f of [
      'atrium-installer',
      'installer/cli.js',
      'licenses/keys.js',
      'compose/compose.yaml',
      `charts/atrium-${VERSION}.tgz`,
      KIT.images,
      KIT.manifest,
      KIT.sums,
      KIT.signature,
      ...KIT_DOCS,
    ]) {
      t.ok(existsSync(join(dir, f)), f)
    }
    const listed = readFileSync(join(dir, KIT.sums), 'utf8')
    for (const doc of KIT_DOCS) {
      t.equal(readFileSync(join(dir, doc), 'utf8'), readFileSync(join(ROOT, doc), 'utf8'), `${doc}, as in the package`)
      t.match(listed, new RegExp(`^[0-9a-f]{64}  ${doc.replace('.', '\\.')}$`, 'm'), `${doc} is in SHA256SUMS`)
    }
    t.same(
      readdirSync(dirname(dir)).filter((f) => f.includes('partial')),
      [],
      'the folder it was built in became the kit',
    )
    t.same(JSON.parse(readFileSync(join(dir, KIT.manifest), 'utf8')).images, [
      {
        name: 'atrium-server',
        ref: imageRef(server),
        id: ID(1),
        digest: `docker.io/atrium/atrium-server@${ID(9)}`,
        platform: 'linux/amd64',
      },
    ])
    const opened = await openKit(dir, { keys: vendor.keys })
    t.equal(opened.problem, null)
    t.equal(built.files, readFileSync(join(dir, KIT.sums), 'utf8').trim().split('\n').length)
    await t.rejects(buildKit({ output: dir, runner }), {
      message: /--output .* is not empty: a kit is written into a new folder/,
    })
    await t.rejects(
      cli(['--output', join(dir, 'x')], runner),
      { message: /missing --private-key FILE and --kid KID/ },
      'the vendor signs every kit',
    )

    // The site: the kit copied as it arrives, its installer trusting the test vendor as the shipped
    // one trusts the real vendor (keys.js is part of what the vendor signs).
    const site = join(tempDir(t), 'atrium-kit')
    cpSync(dir, site, { recursive: true })
    writeFileSync(join(site, 'licenses/keys.js'), `export const TRUSTED_KEYS = ${JSON.stringify(vendor.keys)}\n`)
    writeFileSync(join(site, KIT.signature), await signSums(await writeSums(site), vendor.privateKey, vendor.kid))
    const bin = tempDir(t)
    const work = tempDir(t)
    const env = { ...fakeDocker(bin), HOME: work }
    const offline = (args: string[], extra: Record<string, string> = {}): Promise<Ran> =>
      finished(
        spawn('unshare', ['-n', join(site, 'atrium-installer'), ...args], {
          cwd: work,
          env: { ...env, ...extra },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      )

    t.notOk(existsSync(join(site, 'node_modules')), 'no node_modules in the kit')
    const version = await offline(['--version'])
    t.same(version, { code: 0, stdout: `Atrium installer ${VERSION}\n`, stderr: '' })

    const loaded = await offline(['images', 'load', '--images', site, '--json'])
    t.equal(loaded.code, 0, loaded.stderr)
    const load = JSON.parse(loaded.stdout)
    t.match(load, { ok: true, kit: { dir: site, signedBy: vendor.kid } })
    t.same(
      load.steps.map((s: { command: string }) => s.command),
      [
        'docker version --format {{.Server.Os}}/{{.Server.Arch}}',
        `docker load --input ${join(site, KIT.images)}`,
        `docker image inspect --format {{.Id}} ${imageRef(server)}`,
      ],
    )

    // configure, offline: the license is judged by the kit's keys; the Compose .env is written.
    writeFileSync(
      join(work, 'answers.yaml'),
      [
        'target: compose',
        'mode: air-gapped',
        'outputDir: ./out',
        'dataPath: ./data',
        'config:',
        '  LICENSE_KEY: { env: SITE_LICENSE }',
      ].join('\n') + '\n',
    )
    const configured = await offline(['configure', '--answers', 'answers.yaml', '--yes', ...acceptUnmet, '--json'], {
      SITE_LICENSE: await testLicense(vendor),
    })
    t.equal(configured.code, 0, configured.stderr)
    const report = JSON.parse(configured.stdout)
    t.match(
      report.checks.find((c: { id: string }) => c.id === 'license'),
      { status: 'pass' },
    )
    t.match(readFileSync(join(work, 'out/.env'), 'utf8'), /^AIR_GAPPED=true$/m)

    // Helm from the kit deploys the packaged chart. A Helm site's services are its own, and with no
    // network they cannot answer: their checks cannot be accepted, so the install is refused before
    // anything is planned. With the test's real services (and the network), the same installer plans it.
    const helm = (services: Record<string, string>) =>
      [
        'target: helm',
        'mode: air-gapped',
        'registry: registry.corp.example:5000',
        'outputDir: ./helm',
        'config:',
        '  PUBLIC_URL: "https://atrium.corp.example"',
        ...Object.entries(services).map(([k, v]) => `  ${k}: "${v}"`),
        '  LICENSE_KEY: { env: SITE_LICENSE }',
      ].join('\n') + '\n'
    writeFileSync(
      join(work, 'helm.yaml'),
      helm({
        DATABASE_URL: 'postgres://atrium@10.0.0.5:5432/atrium',
        REDIS_URL: 'redis://10.0.0.6:6379',
        R2_ENDPOINT: 'http://10.0.0.7:9000',
        R2_BUCKET: 'atrium',
        R2_ACCESS_KEY_ID: 'atrium',
        R2_SECRET_ACCESS_KEY: 'not-a-real-secret',
      }),
    )
    const helmInstall = ['install', '--answers', 'helm.yaml', '--yes', '--dry-run', ...acceptUnmet, '--json']
    const refused = await offline(helmInstall, { SITE_LICENSE: await testLicense(vendor) })
    t.equal(refused.code, 3, refused.stderr)
    const stopped = JSON.parse(refused.stdout)
    t.match(stopped, { stopped: 'checks', accepted: [], deploy: [] })
    t.match(
      stopped.checks.find((c: { id: string }) => c.id === 'postgres.connect'),
      { status: 'fail' },
    )
    await t.test(
      'the same installer, with the real services, plans the packaged chart',
      { skip: !realServices && NEEDS_SERVICES },
      async (t) => {
        writeFileSync(join(work, 'helm.yaml'), helm(await realSettings(t)))
        const plan = await finished(
          spawn(join(site, 'atrium-installer'), helmInstall, {
            cwd: work,
            env: { ...env, SITE_LICENSE: await testLicense(vendor) },
            stdio: ['ignore', 'pipe', 'pipe'],
          }),
        )
        t.equal(plan.code, 0, plan.stderr)
        const upgrade = JSON.parse(plan.stdout).deploy.find((c: { command: string[] }) => c.command[0] === 'helm')
        t.match(upgrade.command.slice(0, 4), ['helm', 'upgrade', '--install', 'atrium'])
        t.equal(upgrade.command[4], join(site, `charts/atrium-${VERSION}.tgz`))
      },
    )

    // A changed file in the kit: nothing is loaded.
    appendFileSync(join(site, 'compose/compose.yaml'), '# changed\n')
    const calls = readFileSync(join(bin, 'calls.log'), 'utf8')
    const changed = await offline(['images', 'load', '--images', site])
    t.equal(changed.code, 1)
    t.match(changed.stderr, /compose\/compose\.yaml in the air-gap kit is damaged or incomplete/)
    t.equal(readFileSync(join(bin, 'calls.log'), 'utf8'), calls, 'and docker was not called')
  },
)

t.test(
  'a kit build that fails at a step leaves nothing behind: no half-written kit, no work folder; an empty --output stays empty',
  async (t) => {
    const parent = tempDir(t)
    // The images cannot be saved (a full disk, a registry down): the last step before the checksums.
    const failing: Runner = async (file, args, o) =>
      file === 'docker' && args[0] === 'save'
        ? {
            command: [file, ...args].join(' '),
            exitCode: 1,
            stdout: '',
            stderr: 'no space left on device',
            notFound: false,
            timedOut: false,
          }
        : runner(file, args, o)
    const steps: string[] = []
    await t.rejects(
      buildKit({ output: join(parent, 'kit'), images: [server], runner: failing, onStep: (l) => steps.push(l) }),
      { message: /saving the images failed at: .*no space left on device/s },
    )
    t.match(steps, [/^installer: /, /^chart: /], 'it got as far as the images')
    t.same(readdirSync(parent), [], 'no kit folder and no work folder')

    mkdirSync(join(parent, 'empty'))
    await t.rejects(buildKit({ output: join(parent, 'empty'), images: [server], runner: failing }))
    t.same(readdirSync(parent), ['empty'])
    t.same(readdirSync(join(parent, 'empty')), [], 'an empty --output is left as it was')
  },
)
