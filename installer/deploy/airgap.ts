// The air-gap kit: every image the bundles use (config/images.ts) saved to one tarball on a machine
// with internet, carried in, then loaded into the local engine (Compose) or pushed to the site's
// private registry (Helm, with global.imageRegistry pointing there). The commands go through the
// one command runner like every other.
import { resolve } from 'node:path'
import { IMAGES, imageRef, REGISTRY_RE, type Image } from '../../config/images.js'
import type { Command } from './deploy.js'

const WAIT = 30 * 60_000

/** Pull each image, then save them all into one tarball (run where the internet is reachable). */
export function saveCommands(output: string, images: readonly Image[] = IMAGES): Command[] {
  return [
    ...images.map((i) => ({ file: 'docker', args: ['pull', imageRef(i)], title: `Pull ${imageRef(i)}`, timeoutMs: WAIT })),
    { file: 'docker', args: ['save', '--output', resolve(output), ...images.map((i) => imageRef(i))], title: `Save ${images.length} images to ${output}`, timeoutMs: WAIT },
  ]
}

/** Load the tarball into this machine's engine. */
export function loadCommands(tarball: string): Command[] {
  return [{ file: 'docker', args: ['load', '--input', resolve(tarball)], title: `Load the images from ${tarball}`, timeoutMs: WAIT }]
}

/**
 * Retag each image for the private registry and push it there (after loading the tarball when one
 * is given). The path after the registry is kept, so global.imageRegistry / ATRIUM_REGISTRY is all
 * a bundle needs to find them.
 */
export function pushCommands(registry: string, tarball?: string, images: readonly Image[] = IMAGES): Command[] {
  return [
    ...(tarball ? loadCommands(tarball) : []),
    ...images.flatMap((i) => [
      { file: 'docker', args: ['tag', imageRef(i), imageRef(i, registry)], title: `Tag ${i.name} for ${registry}` },
      { file: 'docker', args: ['push', imageRef(i, registry)], title: `Push ${imageRef(i, registry)}`, timeoutMs: WAIT },
    ]),
  ]
}

/** A registry as global.imageRegistry takes it: host[:port][/path], no scheme. */
export function registryProblem(registry: string): string | null {
  return REGISTRY_RE.test(registry) ? null : `--registry must be host[:port][/path] without a scheme (got "${registry}")`
}
