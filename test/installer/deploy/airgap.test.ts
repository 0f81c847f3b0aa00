// The air-gap kit: the images of config/images.ts saved, pinned, loaded and pushed with the real
// docker command lines (docker stands in as a script that records its calls and answers inspect as
// an engine does; test/compose/site.test.ts runs the kit on a real engine), and the vendor's
// signature and checksums that guard every load.
import { appendFileSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { IMAGES, imageRef } from '../../../config/images.js'
import { registryProblem } from '../../../config/images.js'
import { issueLicense } from '../../../licenses/issue.js'
import { signSums } from '../../../licenses/kit-signature.js'
import {
  KIT,
  loadCommands,
  openKit,
  platformProblem,
  pushCommands,
  saveCommands,
  selectImages,
  writeSums,
} from '../../../installer/deploy/airgap.js'
import { deploy } from '../../../installer/deploy/deploy.js'
import type { Runner } from '../../../installer/core/run.js'
import { installer } from '../../helpers/installer.js'
import { fakeDocker, ID, writeKit } from '../../helpers/kit.js'
import { testVendor } from '../../helpers/license.js'
import { tempDir } from '../../helpers/platform.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

const line = (c: { file: string; args: string[] }) => `${c.file} ${c.args.join(' ')}`

/** A test on a fresh unsigned kit in a folder of its own. */
const withKit = (name: string, fn: (t: Test, dir: string) => Promise<void>) =>
  t.test(name, async (t) => {
    const dir = tempDir(t)
    await writeKit(dir)
    await fn(t, dir)
  })

t.test(
  'save pulls each image the engine does not hold (for the platform asked) and writes the kit tarball',
  async (t) => {
    const save = saveCommands('/media/kit')
    t.same(
      save.slice(0, -1).map((c) => [line(c), Boolean(c.probe)]),
      IMAGES.flatMap((i) => [
        [`docker image inspect --format {{.Id}} ${imageRef(i)}`, true],
        [`docker pull ${imageRef(i)}`, false],
      ]),
      'a pull only where the look-up before it fails',
    )
    t.equal(
      line(save.at(-1)!),
      `docker save --output /media/kit/${KIT.images} ${IMAGES.map((i) => imageRef(i)).join(' ')}`,
    )
    const arm = saveCommands('/media/kit', IMAGES.slice(0, 1), 'linux/arm64')
    t.same(
      arm.map((c) => [line(c), c.expect]),
      [
        [`docker image inspect --format {{.Os}}/{{.Architecture}} ${imageRef(IMAGES[0]!)}`, 'linux/arm64'],
        [`docker pull --platform linux/arm64 ${imageRef(IMAGES[0]!)}`, undefined],
        [`docker save --output /media/kit/${KIT.images} ${imageRef(IMAGES[0]!)}`, undefined],
      ],
      'an image held for another platform is pulled again',
    )
    t.equal(platformProblem('linux/arm/v7'), null)
    t.match(platformProblem('arm64'), /--platform must be os\/architecture/)
  },
)

t.test('--only picks images by name, and an unknown name is refused with the list', async (t) => {
  t.same(
    selectImages('atrium-server').images.map((i) => i.name),
    ['atrium-server'],
  )
  t.same(
    selectImages(' redis, atrium-server ').images.map((i) => i.name),
    ['atrium-server', 'redis'],
    'in list order',
  )
  t.equal(selectImages(undefined).images, IMAGES)
  t.match(
    selectImages('atrium-server,mongo').problem,
    /--only takes image names from `images list` \(atrium-server, postgres/,
  )
  t.match(selectImages(',').problem, /--only takes/)
})

t.test('a kit loads only with a trusted vendor signature over SHA256SUMS and every file matching it', async (t) => {
  const vendor = testVendor()
  const trust = { keys: vendor.keys }
  const dir = tempDir(t)
  t.match(await openKit(join(dir, 'nothing')), { kit: null, problem: /does not exist/ })
  t.match(await openKit(dir, trust), {
    problem: /has no SHA256SUMS \(written with the kit\): copy the whole kit folder/,
  })
  const sums = await writeKit(dir)
  t.equal(sums.split('\n').filter(Boolean).length, 3, 'every file, in folders too')
  t.match(
    sums,
    /^[0-9a-f]{64} {2}atrium-images\.tar\n[0-9a-f]{64} {2}images\.json\n[0-9a-f]{64} {2}installer\/cli\.js\n$/,
    "sha256sum's format, sorted",
  )

  t.match(await openKit(dir, trust), {
    problem:
      /is not signed by the vendor \(no SHA256SUMS\.sig\); a kit you saved yourself with `images save` loads with --allow-unsigned/,
  })
  t.match(await openKit(dir, { ...trust, allowUnsigned: true }), {
    problem: null,
    kit: { dir, path: join(dir, KIT.images), bytes: 12, signedBy: null, images: [{ id: ID(1) }] },
  })

  writeFileSync(join(dir, KIT.signature), await signSums(sums, vendor.privateKey, vendor.kid))
  t.match(
    await openKit(dir, trust),
    { problem: null, kit: { signedBy: 'test-1', fingerprint: /^[A-Za-z0-9_-]{43}$/ } },
    'the folder, with the key fingerprint an admin compares',
  )
  t.match(await openKit(join(dir, KIT.images), trust), { problem: null }, 'or the tarball in it')
  t.match(
    await openKit(dir),
    {
      problem:
        /SHA256SUMS is signed by a key this installer does not trust \(kid test-1\); get the kit again from the vendor/,
    },
    'the shipped keys are not the test key',
  )
  const other = testVendor('test-1')
  t.match(
    await openKit(dir, { keys: other.keys }),
    { problem: /SHA256SUMS does not match its signature: the kit was changed after the vendor signed it/ },
    'same kid, another key',
  )

  appendFileSync(join(dir, 'installer/cli.js'), '; and a change')
  t.match(await openKit(dir, trust), {
    problem:
      /installer\/cli\.js in the air-gap kit is damaged or incomplete: its SHA-256 is [0-9a-f]{64}, SHA256SUMS says [0-9a-f]{64}; copy it again/,
  })
  const resummed = await writeSums(dir)
  t.match(
    await openKit(dir, trust),
    { problem: /does not match its signature/ },
    'new sums need a new signature, which only the vendor can make',
  )
  writeFileSync(join(dir, KIT.signature), await signSums(resummed, vendor.privateKey, vendor.kid))
  rmSync(join(dir, 'installer/cli.js'))
  t.match(await openKit(dir, trust), { problem: /the air-gap kit is incomplete: installer\/cli\.js is missing/ })

  // A license is signed by the same key but is not a kit signature.
  const license = await issueLicense({
    privateKey: vendor.privateKey,
    kid: vendor.kid,
    customer: 'A',
    plan: 'enterprise',
    maxTenants: 1,
    features: [],
    airGapAllowed: true,
    issuedAt: new Date(),
    expiresAt: new Date(Date.now() + 1e9),
  })
  writeFileSync(join(dir, KIT.signature), license)
  t.match(await openKit(dir, trust), { problem: /SHA256SUMS\.sig is not a detached signature/ })
  const [h, , s] = license.split('.')
  writeFileSync(join(dir, KIT.signature), `${h}..${s}`)
  t.match(await openKit(dir, trust), {
    problem:
      /SHA256SUMS\.sig is not a kit signature \(typ atrium-license\+jwt, alg EdDSA; expected atrium-kit\+jws, EdDSA\)/,
  })

  t.match(
    await openKit(dir, { ...trust, allowUnsigned: true }),
    { problem: /is not a kit signature/ },
    'a bad signature is never ignored, even where unsigned kits are allowed',
  )
  rmSync(join(dir, KIT.signature))
  writeFileSync(join(dir, KIT.sums), `${'0'.repeat(64)}  ../etc/passwd\n`)
  t.match(await openKit(dir, { allowUnsigned: true }), {
    problem: /has a line that is not "<sha256> {2}<file>" inside the kit/,
  })
  writeFileSync(join(dir, KIT.sums), `${'0'.repeat(64)}  atrium-images.tar\n`)
  t.match(await openKit(dir, { allowUnsigned: true }), {
    problem: /does not list images\.json: this is not an air-gap kit/,
  })
})

withKit(
  'a kit is refused when its pins are not what the installer writes, when it is for another release, or when a listed file is a link',
  async (t, dir) => {
    const unsigned = { allowUnsigned: true }
    t.match(
      await openKit(join(dir, 'images.json'), unsigned),
      { problem: /--images takes the air-gap kit's folder \(or its atrium-images\.tar\); got / },
      'another file of the folder does not stand for it',
    )
    writeFileSync(join(dir, KIT.manifest), '{"version": "0.1.0", "images": [{}]}')
    await writeSums(dir)
    t.match(await openKit(dir, unsigned), {
      problem:
        'images.json in the air-gap kit does not pin its images as the installer writes them ({version, images: [{name, ref, id, digest, platform}]}); get the kit again',
    })
    writeFileSync(join(dir, KIT.manifest), 'not json')
    await writeSums(dir)
    t.match(await openKit(dir, unsigned), { problem: 'images.json in the air-gap kit is not JSON; get the kit again' })
    await writeKit(dir, { version: '0.0.9' })
    t.match(await openKit(dir, unsigned), {
      problem:
        /^the air-gap kit is for Atrium 0\.0\.9, and this installer deploys \d+\.\d+\.\d+: run the installer that came with the kit/,
    })
    await writeKit(dir)
    rmSync(join(dir, 'installer/cli.js'))
    symlinkSync('/etc/hostname', join(dir, 'installer/cli.js'))
    t.match(await openKit(dir, unsigned), {
      problem:
        'installer/cli.js in the air-gap kit is not a plain file (a link, a folder or a device): copy the kit again',
    })
  },
)

withKit(
  'what is loaded is checked against the pins the kit check read, not images.json read again; a push needs no engine of the kit platform',
  async (t, dir) => {
    const opened = await openKit(dir, { allowUnsigned: true })
    writeFileSync(join(dir, KIT.manifest), JSON.stringify({ version: '0.1.0', images: [] }))
    const load = loadCommands(dir, { images: opened.kit!.images }).map(line)
    t.equal(
      load.at(-1),
      `docker image inspect --format {{.Id}} ${imageRef(IMAGES[0]!)}`,
      'the pin stays, though images.json changed after the check',
    )
    const push = pushCommands('reg.local:5000', dir, IMAGES.slice(0, 1), opened.kit!.images).map(line)
    t.notOk(
      push.some((c) => c.startsWith('docker version')),
      'pushing from a machine of another platform is fine',
    )
    t.ok(
      push.includes(`docker image inspect --format {{.Id}} ${imageRef(IMAGES[0]!)}`),
      'the pins are checked before the push',
    )
  },
)

withKit(
  'a load checks the engine runs the kit platform, then that every tag names the image the kit pinned',
  async (t, dir) => {
    t.same(
      loadCommands(dir).map((c) => [line(c), c.expect]),
      [
        ['docker version --format {{.Server.Os}}/{{.Server.Arch}}', 'linux/amd64'],
        [`docker load --input ${join(dir, KIT.images)}`, undefined],
        [`docker image inspect --format {{.Id}} ${imageRef(IMAGES[0]!)}`, ID(1)],
      ],
    )
    // An engine where the tag names another image (it held one of that name before the load).
    const engine: Runner = async (file, args) => ({
      command: [file, ...args].join(' '),
      exitCode: 0,
      stdout: args[0] === 'version' ? 'linux/amd64' : args[0] === 'image' ? ID(2) : '',
      stderr: '',
      notFound: false,
      timedOut: false,
    })
    const r = await deploy(loadCommands(dir), engine)
    t.equal(r.ok, false)
    t.match(r.steps.at(-1)!.result, { exitCode: 1, stderr: `expected ${ID(1)}, found ${ID(2)}` })
    const arm: Runner = async (file, args) => ({ ...(await engine(file, args)), stdout: 'linux/arm64' })
    const wrong = await deploy(loadCommands(dir), arm)
    t.equal(wrong.steps.length, 1, 'nothing loaded into an engine of another platform')
    t.match(wrong.steps[0]!.result, { exitCode: 1, stderr: 'expected linux/amd64, found linux/arm64' })
  },
)

t.test('push retags each image under the private registry, keeping its path, then pushes it', async (t) => {
  const cmds = pushCommands('registry.corp.example:5000', '/media/kit/atrium-images.tar').map(line)
  t.equal(cmds[0], 'docker load --input /media/kit/atrium-images.tar', 'the kit is loaded first')
  const server = IMAGES.find((i) => i.name === 'atrium-server')!
  t.ok(cmds.includes(`docker tag ${imageRef(server)} registry.corp.example:5000/${server.repository}:${server.tag}`))
  t.ok(cmds.includes(`docker push registry.corp.example:5000/${server.repository}:${server.tag}`))
  t.equal(cmds.length, 1 + IMAGES.length * 2)
  t.equal(registryProblem('registry.corp.example:5000/atrium'), null)
  t.match(registryProblem('https://registry.corp.example'), /without a scheme/)
  const withCredentials = registryProblem('robot:hunter2-pw@registry.corp.example:5000')
  t.match(withCredentials, /without credentials .*got "<redacted>@registry\.corp\.example:5000"/)
  t.notMatch(withCredentials, /hunter2|robot/, 'the credentials are not repeated')
})

t.test(
  'the images command: list, save a kit, load and push it unsigned only when told, refuse a damaged one',
  async (t) => {
    const list = await installer(['images', 'list'])
    t.equal(list.code, 0, list.stderr)
    t.same(
      list.stdout.trim().split('\n'),
      IMAGES.map((i) => imageRef(i)),
    )

    const bin = tempDir(t)
    const env = fakeDocker(bin)
    const dry = await installer(['images', 'push', '--registry', 'reg.local:5000', '--dry-run'], env)
    t.equal(dry.code, 0, dry.stderr)
    t.match(dry.stdout, /^docker tag /)
    const kit = join(bin, 'kit')
    const saved = await installer(['images', 'save', '--only', 'atrium-server', '--output', kit, '--json'], env)
    t.equal(saved.code, 0, saved.stderr)
    const report = JSON.parse(saved.stdout)
    t.match(report.kit, { dir: kit, path: join(kit, KIT.images), bytes: 7, signedBy: null })
    t.same(
      report.kit.images,
      [
        {
          name: 'atrium-server',
          ref: imageRef(IMAGES[0]!),
          id: ID(1),
          digest: `docker.io/atrium/atrium-server@${ID(9)}`,
          platform: 'linux/amd64',
        },
      ],
      'pinned by ID and by registry digest',
    )
    t.same(
      report.steps.map((s: { command: string; skipped: boolean }) => [s.command.split(' ')[1], s.skipped]),
      [
        ['image', false],
        ['pull', true],
        ['save', false],
      ],
      'the held image is not pulled; only it is saved',
    )
    t.match(readFileSync(join(kit, KIT.sums), 'utf8'), /atrium-images\.tar\n.*images\.json\n$/)

    const unsigned = await installer(['images', 'load', '--images', kit], env)
    t.equal(unsigned.code, 1)
    t.match(unsigned.stderr, /is not signed by the vendor .* loads with --allow-unsigned/)
    const calls = () => readFileSync(join(bin, 'calls.log'), 'utf8').trim().split('\n')
    const before = calls().length
    const loaded = await installer(['images', 'load', '--images', kit, '--allow-unsigned'], env)
    t.equal(loaded.code, 0, loaded.stderr)
    t.match(
      loaded.stdout,
      /The kit in .* is unsigned \(saved on site\); every file matches SHA256SUMS and every image its pinned ID/,
    )
    t.same(calls().slice(before), [
      'docker version --format {{.Server.Os}}/{{.Server.Arch}}',
      `docker load --input ${join(kit, KIT.images)}`,
      `docker image inspect --format {{.Id}} ${imageRef(IMAGES[0]!)}`,
    ])

    const pushed = await installer(
      [
        'images',
        'push',
        '--only',
        'atrium-server',
        '--registry',
        'reg.local:5000',
        '--images',
        kit,
        '--allow-unsigned',
        '--json',
      ],
      env,
    )
    t.equal(pushed.code, 0, pushed.stderr)
    t.same(
      JSON.parse(pushed.stdout).pushed,
      [{ name: 'atrium-server', ref: `reg.local:5000/atrium/atrium-server@${ID(7)}` }],
      'each image by its digest in the private registry',
    )

    appendFileSync(join(kit, KIT.images), 'truncated copy')
    const n = calls().length
    const damaged = await installer(['images', 'load', '--images', kit, '--allow-unsigned'], env)
    t.equal(damaged.code, 1)
    t.match(damaged.stderr, /atrium-images\.tar in the air-gap kit is damaged or incomplete/)
    t.equal(calls().length, n, 'and nothing was loaded')
    t.equal(
      (await installer(['images', 'save', '--output', kit, '--only', 'mongo'])).code,
      2,
      'an unknown image is bad input',
    )
    const again = await installer(['images', 'save', '--output', kit], env)
    t.equal(again.code, 2)
    t.match(again.stderr, /--output .* is not empty: a kit is written into a new folder/)

    const bad = await installer(['images', 'save', '--platform', 'arm64'])
    t.equal(bad.code, 2)
    t.match(
      bad.stderr,
      /images save needs --output DIR[\s\S]*--platform must be os\/architecture/,
      'every problem at once',
    )
    const scheme = await installer(['images', 'push', '--registry', 'http://x'])
    t.equal(scheme.code, 2)
    t.match(scheme.stderr, /without a scheme/)
    t.equal((await installer(['images', 'burn'])).code, 2)
  },
)
