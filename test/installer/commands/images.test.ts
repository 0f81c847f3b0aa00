// images: the air-gap kit's images listed, saved, loaded and pushed. Docker answers through a fake
// runner, so nothing here needs it.
import { join } from 'node:path'
import t from 'tap'
import { BadInput } from '../../../installer/commands/command.js'
import { imagesCommand } from '../../../installer/commands/images.js'
import { EXIT } from '../../../installer/core/report.js'
import type { Runner } from '../../../installer/core/run.js'
import { IMAGES } from '../../../config/images.js'
import { KIT } from '../../../installer/deploy/airgap.js'
import { writeKit } from '../../helpers/kit.js'
import { testVendor } from '../../helpers/license.js'
import { tempDir } from '../../helpers/platform.js'
import { tools } from '../../helpers/installer.js'

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
