// The air-gap kit: the images of config/images.ts saved, loaded and pushed with the real docker
// command lines (docker stands in as a script that records its calls; test/compose/site.test.ts
// runs the kit on a real engine), and the checksum that guards every load.
import { appendFileSync, chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { IMAGES, imageRef } from '../../../config/images.js'
import { registryProblem } from '../../../config/images.js'
import { checksumPath, kitProblem, loadCommands, pushCommands, saveCommands, selectImages, writeChecksum } from '../../../installer/deploy/airgap.js'
import { installer } from '../../helpers/installer.js'
import { tempDir } from '../../helpers/platform.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

const line = (c: { file: string; args: string[] }) => `${c.file} ${c.args.join(' ')}`

t.test('save pulls each image the engine does not hold and writes one tarball; load reads it back', async (t) => {
  const save = saveCommands('/media/kit/atrium-images.tar')
  t.same(
    save.slice(0, -1).map((c) => [line(c), Boolean(c.probe)]),
    IMAGES.flatMap((i) => [
      [`docker image inspect --format {{.Id}} ${imageRef(i)}`, true],
      [`docker pull ${imageRef(i)}`, false],
    ]),
    'a pull only where the look-up before it fails',
  )
  const cmds = save.map(line)
  t.equal(cmds.at(-1), `docker save --output /media/kit/atrium-images.tar ${IMAGES.map((i) => imageRef(i)).join(' ')}`)
  t.same(loadCommands('/media/kit/atrium-images.tar').map(line), ['docker load --input /media/kit/atrium-images.tar'])
})

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
  t.match(selectImages('atrium-server,mongo').problem, /--only takes image names from `images list` \(atrium-server, postgres/)
  t.match(selectImages(',').problem, /--only takes/)
})

t.test('the checksum file: written beside the tarball in sha256sum format, and a load refused unless the tarball matches it', async (t) => {
  const dir = tempDir(t)
  const tarball = join(dir, 'atrium-images.tar')
  t.match(await kitProblem(tarball), /does not exist/)
  writeFileSync(tarball, 'image layers')
  t.match(await kitProblem(tarball), /no checksum file beside it \(.*atrium-images\.tar\.sha256/)
  const kit = await writeChecksum(tarball)
  t.match(kit, { path: tarball, checksumFile: `${tarball}.sha256`, sha256: /^[0-9a-f]{64}$/, bytes: 12 })
  t.equal(readFileSync(checksumPath(tarball), 'utf8'), `${kit.sha256}  atrium-images.tar\n`, 'sha256sum -c reads it')
  t.equal(await kitProblem(tarball), null)
  appendFileSync(tarball, '!')
  t.match(await kitProblem(tarball), /is damaged or incomplete: its SHA-256 is [0-9a-f]{64}, atrium-images\.tar\.sha256 says [0-9a-f]{64}; copy it again/)
  writeFileSync(checksumPath(tarball), 'not a checksum\n')
  t.match(await kitProblem(tarball), /holds no SHA-256 checksum/)
  rmSync(checksumPath(tarball))
})

t.test('push retags each image under the private registry, keeping its path, then pushes it', async (t) => {
  const cmds = pushCommands('registry.corp.example:5000', '/media/kit/atrium-images.tar').map(line)
  t.equal(cmds[0], 'docker load --input /media/kit/atrium-images.tar')
  const server = IMAGES.find((i) => i.name === 'atrium-server')!
  t.ok(cmds.includes(`docker tag ${imageRef(server)} registry.corp.example:5000/${server.repository}:${server.tag}`))
  t.ok(cmds.includes(`docker push registry.corp.example:5000/${server.repository}:${server.tag}`))
  t.equal(cmds.length, 1 + IMAGES.length * 2)
  t.equal(registryProblem('registry.corp.example:5000/atrium'), null)
  t.match(registryProblem('https://registry.corp.example'), /without a scheme/)
})

t.test('the images command: list, a dry run, a real run through docker, and clear refusals', async (t) => {
  const list = await installer(['images', 'list'])
  t.equal(list.code, 0, list.stderr)
  t.same(
    list.stdout.trim().split('\n'),
    IMAGES.map((i) => imageRef(i)),
  )

  const bin = tempDir(t)
  // Holds every image (inspect succeeds) and writes what save is asked to.
  writeFileSync(join(bin, 'docker'), `#!/bin/sh\necho "docker $*" >> "${bin}/calls.log"\n[ "$1" = save ] && echo layers > "$3"\nexit 0\n`)
  chmodSync(join(bin, 'docker'), 0o755)
  const env = { PATH: `${bin}:${process.env.PATH}` }
  const dry = await installer(['images', 'push', '--registry', 'reg.local:5000', '--dry-run'], env)
  t.equal(dry.code, 0, dry.stderr)
  t.match(dry.stdout, /^docker tag /)
  const kit = join(bin, 'kit.tar')
  const saved = await installer(['images', 'save', '--only', 'atrium-server', '--output', kit, '--json'], env)
  t.equal(saved.code, 0, saved.stderr)
  const report = JSON.parse(saved.stdout)
  t.match(report.kit, { path: kit, checksumFile: `${kit}.sha256`, bytes: 7 })
  t.same(
    report.steps.map((s: { command: string; skipped: boolean }) => [s.command.split(' ')[1], s.skipped]),
    [
      ['image', false],
      ['pull', true],
      ['save', false],
    ],
    'the held image is not pulled; only it is saved',
  )
  const pushed = await installer(['images', 'push', '--registry', 'reg.local:5000', '--images', kit, '--json'], env)
  t.equal(pushed.code, 0, pushed.stderr)
  t.equal(JSON.parse(pushed.stdout).ok, true)
  const calls = readFileSync(join(bin, 'calls.log'), 'utf8').trim().split('\n')
  t.equal(calls.at(-(1 + IMAGES.length * 2)), `docker load --input ${kit}`)
  t.equal(calls.length, 2 + 1 + IMAGES.length * 2, 'the dry run called nothing')
  appendFileSync(kit, 'truncated copy')
  const damaged = await installer(['images', 'load', '--images', kit], env)
  t.equal(damaged.code, 1)
  t.match(damaged.stderr, /is damaged or incomplete/)
  t.equal(readFileSync(join(bin, 'calls.log'), 'utf8').trim().split('\n').length, calls.length, 'and nothing was loaded')
  t.equal((await installer(['images', 'save', '--output', kit, '--only', 'mongo'])).code, 2, 'an unknown image is bad input')

  t.equal((await installer(['images', 'save'])).code, 2, 'save needs --output')
  const bad = await installer(['images', 'push', '--registry', 'http://x'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /without a scheme/)
  t.equal((await installer(['images', 'burn'])).code, 2)
})
