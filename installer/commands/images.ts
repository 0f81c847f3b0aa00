// images: the air-gap kit: list, save (connected side), load or push (air-gapped side) every image.
import { mkdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { IMAGES, imageRef, registryProblem } from '../../config/images.js'
import { EXIT, imagesReport, type ImagesReport, type KitImage } from '../core/report.js'
import { run, type Command as Program } from '../core/run.js'
import {
  KIT,
  loadCommands,
  newFolderProblem,
  openKit,
  platformProblem,
  pushCommands,
  pushedDigests,
  recordImages,
  saveCommands,
  selectImages,
  writeSums,
} from '../deploy/airgap.js'
import { deploy, failedStep } from '../deploy/deploy.js'
import { BadInput, command, planned, stepReport, trustOf, type FlagValues, type Hooks } from './command.js'
import type { Progress } from '../ui/output.js'
import { allowUnsigned, dryRun, images as kit, json, output, registry, stringFlag } from './flags.js'

const flags = {
  json,
  dryRun,
  output,
  images: kit,
  registry,
  allowUnsigned,
  platform: stringFlag('OS/ARCH', 'images save: pull for this platform (linux/amd64, linux/arm64)'),
  only: stringFlag('NAME,...', 'images save and push: only these (names from images list)'),
}

export type ImagesOptions = FlagValues<typeof flags> & Hooks

/**
 * The commands of an images action other than list (load and push with the pins of the kit opened); bad input when its
 * flags are missing.
 */
function imageCommands(action: string, o: ImagesOptions, pins?: readonly KitImage[]): Program[] {
  const { images, problem } = selectImages(o.only)
  if (problem) throw new BadInput(problem)
  if (action === 'save') {
    const problems = [
      !o.output && 'images save needs --output DIR (the kit folder to write)',
      o.platform && platformProblem(o.platform),
    ].filter((p): p is string => Boolean(p))
    if (problems.length) throw new BadInput(problems)
    const notNew = newFolderProblem(o.output!)
    if (notNew) throw new BadInput(notNew)
    return saveCommands(o.output!, images, o.platform)
  }
  if (action === 'load') {
    if (!o.images)
      throw new BadInput('images load needs --images DIR (the air-gap kit, from the vendor or images save)')
    return loadCommands(o.images, { images: pins })
  }
  if (action === 'push') {
    if (!o.registry) throw new BadInput('images push needs --registry HOST[:PORT][/PATH]')
    const problem = registryProblem(o.registry)
    if (problem) throw new BadInput(problem)
    return pushCommands(o.registry, o.images, images, pins)
  }
  throw new BadInput(`unknown images command ${action} (list, save, load, push)`)
}

/** The air-gap kit: list, save (connected side), load or push (air-gapped side) every image. */
export async function imagesCommand(
  action = 'list',
  o: ImagesOptions = {},
  progress: Progress = {},
): Promise<ImagesReport> {
  if (action === 'list') return { ...imagesReport('list'), images: IMAGES.map((i) => ({ ...i, ref: imageRef(i) })) }
  const planned0 = imageCommands(action, o)
  const named = imagesReport(action as ImagesReport['action'])
  if (o.dryRun) return { ...named, commands: planned0.map(planned) }
  const runner = o.runner ?? run
  // A kit that is not the vendor's, or damaged, is refused before anything is loaded from it; what
  // is loaded is then checked against the pins read in that check, not read again.
  const opened = action !== 'save' && o.images ? await openKit(o.images, trustOf(o)) : null
  if (opened?.problem) return { ...named, exitCode: EXIT.error, ok: false, error: opened.problem }
  const commands = opened?.kit ? imageCommands(action, o, opened.kit.images) : planned0
  if (action === 'save') mkdirSync(o.output!, { recursive: true })
  const r = await deploy(commands, runner, progress.step)
  if (!r.ok)
    return {
      ...named,
      exitCode: EXIT.error,
      ok: false,
      steps: r.steps.map(stepReport),
      error: `Failed at: ${failedStep(r.steps, 2000)}`,
    }
  const steps = r.steps.map(stepReport)
  if (action === 'save') {
    const { images } = selectImages(o.only)
    const manifest = await recordImages(o.output!, images, runner)
    await writeSums(o.output!)
    const path = join(resolve(o.output!), KIT.images)
    return {
      ...named,
      steps,
      kit: {
        dir: resolve(o.output!),
        path,
        bytes: statSync(path).size,
        images: manifest.images,
        signedBy: null,
        fingerprint: null,
      },
    }
  }
  const pushed = action === 'push' ? await pushedDigests(o.registry!, selectImages(o.only).images, runner) : []
  return { ...named, steps, kit: opened?.kit ?? null, pushed }
}

export const images = command({
  name: 'images',
  summary: 'the air-gap kit',
  actions: {
    list: 'every container image the bundles use (the air-gap kit)',
    save: 'save them into a kit folder (--output DIR): the tarball, images.json pinning\neach image, SHA256SUMS; where they can be pulled (held images are not pulled again)',
    load: "check the kit (the vendor's signature, every checksum), load it, and check\neach image against its pin (--images DIR)",
    push: 'tag and push them to a private registry (--registry HOST, --images DIR to\nload first); prints each image by its digest there',
  },
  flags,
  run: ({ flags, action, progress }) => imagesCommand(action, flags, progress),
})
