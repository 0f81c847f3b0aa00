// The air-gap kit: the images of config/images.ts saved, loaded and pushed with the real docker
// command lines (docker stands in as a script that records its calls: no engine runs here).
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { IMAGES, imageRef } from '../../../config/images.js'
import { loadCommands, pushCommands, registryProblem, saveCommands } from '../../../installer/deploy/airgap.js'
import { installer } from '../../helpers/installer.js'
import { tempDir } from '../../helpers/platform.js'

const line = (c: { file: string; args: string[] }) => `${c.file} ${c.args.join(' ')}`

t.test('save pulls every image and writes one tarball; load reads it back', async (t) => {
  const cmds = saveCommands('/media/kit/atrium-images.tar').map(line)
  t.same(
    cmds.slice(0, -1),
    IMAGES.map((i) => `docker pull ${imageRef(i)}`),
  )
  t.equal(cmds.at(-1), `docker save --output /media/kit/atrium-images.tar ${IMAGES.map((i) => imageRef(i)).join(' ')}`)
  t.same(loadCommands('/media/kit/atrium-images.tar').map(line), ['docker load --input /media/kit/atrium-images.tar'])
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
  writeFileSync(join(bin, 'docker'), `#!/bin/sh\necho "docker $*" >> "${bin}/calls.log"\n`)
  chmodSync(join(bin, 'docker'), 0o755)
  const env = { PATH: `${bin}:${process.env.PATH}` }
  const dry = await installer(['images', 'push', '--registry', 'reg.local:5000', '--dry-run'], env)
  t.equal(dry.code, 0, dry.stderr)
  t.match(dry.stdout, /^docker tag /)
  const pushed = await installer(['images', 'push', '--registry', 'reg.local:5000', '--images', '/media/kit.tar', '--json'], env)
  t.equal(pushed.code, 0, pushed.stderr)
  t.equal(JSON.parse(pushed.stdout).ok, true)
  const calls = readFileSync(join(bin, 'calls.log'), 'utf8').trim().split('\n')
  t.equal(calls[0], 'docker load --input /media/kit.tar')
  t.equal(calls.length, 1 + IMAGES.length * 2, 'the dry run called nothing')

  t.equal((await installer(['images', 'save'])).code, 2, 'save needs --output')
  const bad = await installer(['images', 'push', '--registry', 'http://x'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /without a scheme/)
  t.equal((await installer(['images', 'burn'])).code, 2)
})
