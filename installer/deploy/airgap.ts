// The air-gap kit: every image the bundles use (config/images.ts) saved to one tarball on a machine
// with internet, carried in, then loaded into the local engine (Compose) or pushed to the site's
// private registry (Helm, with global.imageRegistry pointing there). The commands go through the
// one command runner like every other.
// The tarball travels with a checksum file beside it (`<tarball>.sha256`, sha256sum's format, so
// `sha256sum -c` checks it too), and nothing is loaded from a tarball that does not match it.
import { createHash } from 'node:crypto'
import { createReadStream, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { IMAGES, imageRef, type Image } from '../../config/images.js'
import type { Command } from './deploy.js'

const WAIT = 30 * 60_000

/**
 * Pull each image this engine does not hold yet (tags are pinned, so a held one is the same
 * image), then save them all into one tarball. Run where the images can be had.
 */
export function saveCommands(output: string, images: readonly Image[] = IMAGES): Command[] {
  return [
    ...images.flatMap((i): Command[] => [
      { file: 'docker', args: ['image', 'inspect', '--format', '{{.Id}}', imageRef(i)], title: `Look for ${imageRef(i)} in this engine`, probe: true },
      { file: 'docker', args: ['pull', imageRef(i)], title: `Pull ${imageRef(i)}`, timeoutMs: WAIT },
    ]),
    { file: 'docker', args: ['save', '--output', resolve(output), ...images.map((i) => imageRef(i))], title: `Save ${images.length} images to ${output}`, timeoutMs: WAIT },
  ]
}

/** The images named (`--only a,b`), in list order; every image when none are. Unknown names are bad input. */
export function selectImages(only: string | undefined): { images: readonly Image[]; problem: string | null } {
  if (!only) return { images: IMAGES, problem: null }
  const names = only
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean)
  const unknown = names.filter((n) => !IMAGES.some((i) => i.name === n))
  if (unknown.length || !names.length) return { images: [], problem: `--only takes image names from \`images list\` (${IMAGES.map((i) => i.name).join(', ')}); got ${only}` }
  return { images: IMAGES.filter((i) => names.includes(i.name)), problem: null }
}

export const checksumPath = (tarball: string): string => `${resolve(tarball)}.sha256`

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256')
  await pipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

export interface Kit {
  path: string
  checksumFile: string
  sha256: string
  bytes: number
}

/** Writes the tarball's checksum file beside it. */
export async function writeChecksum(tarball: string): Promise<Kit> {
  const path = resolve(tarball)
  const digest = await sha256(path)
  writeFileSync(checksumPath(path), `${digest}  ${basename(path)}\n`)
  return { path, checksumFile: checksumPath(path), sha256: digest, bytes: statSync(path).size }
}

/** What is wrong with a tarball before it is loaded: missing, no checksum file, or not the bytes it names. Null when it matches. */
export async function kitProblem(tarball: string): Promise<string | null> {
  const path = resolve(tarball)
  if (!existsSync(path)) return `the images tarball ${path} does not exist`
  const sums = checksumPath(path)
  if (!existsSync(sums)) return `the images tarball has no checksum file beside it (${sums}, written by \`images save\`): copy it together with the tarball`
  const expected = /^([0-9a-f]{64}) {2}/m.exec(readFileSync(sums, 'utf8'))?.[1]
  if (!expected) return `${sums} holds no SHA-256 checksum`
  const actual = await sha256(path)
  return actual === expected ? null : `the images tarball ${path} is damaged or incomplete: its SHA-256 is ${actual}, ${basename(sums)} says ${expected}; copy it again`
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
