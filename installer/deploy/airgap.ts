// The air-gap kit: one folder carried into a site with no internet. The vendor's kit
// (installer/kit.ts) holds the installer as one file, the Compose bundle, the packaged chart and
// every image the bundles use (config/images.ts); `images save` writes the images part of it.
//   atrium-images.tar   the images (docker save), loaded into the local engine (Compose) or pushed
//                       to the site's private registry (Helm, global.imageRegistry pointing there)
//   images.json         each image pinned: its ID (the sha256 of its configuration, the same after
//                       save, load and push), its registry digest (repo@sha256:...) and platform
//   SHA256SUMS          every file's SHA-256, in sha256sum's format (`sha256sum -c` checks it too)
//   SHA256SUMS.sig      the vendor's Ed25519 signature of SHA256SUMS (licenses/kit-signature.ts)
// Nothing is loaded from a kit whose signature, checksums or images do not match. The commands go
// through the one command runner like every other.
import { createHash } from 'node:crypto'
import { createReadStream, existsSync, lstatSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { VERSION } from '../../common/version.js'
import { IMAGES, imageRef, type Image } from '../../config/images.js'
import type { TrustedKey } from '../../licenses/keys.js'
import { verifySums } from '../../licenses/kit-signature.js'
import type { Command, Runner } from '../core/run.js'
import type { Kit, KitImage } from '../core/report.js'

const WAIT = 30 * 60_000

/** The kit's files by role. */
export const KIT = {
  images: 'atrium-images.tar',
  manifest: 'images.json',
  sums: 'SHA256SUMS',
  signature: 'SHA256SUMS.sig',
} as const

export interface KitManifest {
  version: string
  images: KitImage[]
}

/** The kit's folder, given the folder or the images tarball in it. */
export const kitDir = (path: string): string =>
  existsSync(path) && statSync(path).isDirectory() ? resolve(path) : dirname(resolve(path))

/** The images' platform as docker names it: os/architecture. */
const PLATFORM_RE = /^[a-z0-9]+\/[a-z0-9_]+(\/[a-z0-9]+)?$/

/** Null when `platform` is one docker can pull (linux/amd64, linux/arm64, linux/arm/v7); else what is wrong. */
export const platformProblem = (platform: string): string | null =>
  PLATFORM_RE.test(platform)
    ? null
    : `--platform must be os/architecture as docker names it, e.g. linux/amd64 or linux/arm64 (got "${platform}")`

/**
 * Pull each image this engine does not hold yet (tags are pinned, so a held one is the same image;
 * with a platform, one held for another platform is pulled again), then save them all into the
 * kit's tarball. Run where the images can be had.
 */
export function saveCommands(dir: string, images: readonly Image[] = IMAGES, platform?: string): Command[] {
  return [
    ...images.flatMap((i): Command[] => [
      platform
        ? {
            file: 'docker',
            args: ['image', 'inspect', '--format', '{{.Os}}/{{.Architecture}}', imageRef(i)],
            title: `Look for ${imageRef(i)} (${platform}) in this engine`,
            probe: true,
            expect: platform,
          }
        : {
            file: 'docker',
            args: ['image', 'inspect', '--format', '{{.Id}}', imageRef(i)],
            title: `Look for ${imageRef(i)} in this engine`,
            probe: true,
          },
      {
        file: 'docker',
        args: ['pull', ...(platform ? ['--platform', platform] : []), imageRef(i)],
        title: `Pull ${imageRef(i)}`,
        timeoutMs: WAIT,
      },
    ]),
    {
      file: 'docker',
      args: ['save', '--output', join(resolve(dir), KIT.images), ...images.map((i) => imageRef(i))],
      title: `Save ${images.length} images to ${join(dir, KIT.images)}`,
      timeoutMs: WAIT,
    },
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
  if (unknown.length || !names.length)
    return {
      images: [],
      problem: `--only takes image names from \`images list\` (${IMAGES.map((i) => i.name).join(', ')}); got ${only}`,
    }
  return { images: IMAGES.filter((i) => names.includes(i.name)), problem: null }
}

/** What `docker image inspect` says of an image, one line: ID, platform, registry digests. */
const INSPECT = '{{.Id}} {{.Os}}/{{.Architecture}} {{json .RepoDigests}}'

/** The registry digests `{{json .RepoDigests}}` prints (repo@sha256:...); none when it printed no list. */
function repoDigests(json: string): string[] {
  try {
    const list = JSON.parse(json) as unknown
    return Array.isArray(list) ? list.filter((d): d is string => typeof d === 'string') : []
  } catch {
    return []
  }
}

/** Null when `dir` is a folder a kit may be written into (new or empty: SHA256SUMS covers all of it); else why not. */
export const newFolderProblem = (dir: string): string | null =>
  existsSync(dir) && readdirSync(dir).length
    ? `--output ${dir} is not empty: a kit is written into a new folder, which SHA256SUMS then covers`
    : null

/**
 * Pins each saved image (ID, digest, platform) in the kit's images.json; throws with docker's words when one cannot be
 * read.
 */
export async function recordImages(dir: string, images: readonly Image[], runner: Runner): Promise<KitManifest> {
  const pinned: KitImage[] = []
  for (const image of images) {
    const ref = imageRef(image)
    const r = await runner('docker', ['image', 'inspect', '--format', INSPECT, ref])
    const m = /^(sha256:[0-9a-f]{64}) (\S+) (.*)$/.exec(r.stdout.trim())
    if (r.exitCode !== 0 || !m)
      throw new Error(`could not read ${ref} from the engine to pin it: ${r.stderr || r.stdout}`)
    const digests = repoDigests(m[3]!)
    const repo = `${image.registry}/${image.repository}`
    // docker names Docker Hub's images without docker.io/ (and official ones without library/).
    const own = digests.find((d) => [repo, repo.replace(/^docker\.io\/(library\/)?/, '')].includes(d.split('@')[0]!))
    pinned.push({
      name: image.name,
      ref,
      id: m[1]!,
      digest: own ? `${repo}@${own.split('@')[1]}` : null,
      platform: m[2]!,
    })
  }
  const manifest = { version: VERSION, images: pinned }
  writeFileSync(join(dir, KIT.manifest), `${JSON.stringify(manifest, null, 2)}\n`)
  return manifest
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256')
  await pipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

/** Every file under `dir` but the sums and their signature, as paths relative to it, sorted. */
function kitFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .filter((f) => f !== KIT.sums && f !== KIT.signature)
    .sort()
}

/** Writes SHA256SUMS over every file of the kit; returns its text. */
export async function writeSums(dir: string): Promise<string> {
  const lines: string[] = []
  for (const f of kitFiles(dir)) lines.push(`${await sha256(join(dir, f))}  ${f}`)
  const sums = `${lines.join('\n')}\n`
  writeFileSync(join(dir, KIT.sums), sums)
  return sums
}

export interface KitTrust {
  /** The keys to trust (tests); the shipped vendor keys otherwise. */
  keys?: readonly TrustedKey[]
  /** Accept a kit without the vendor's signature: one the admin saved with `images save`. */
  allowUnsigned?: boolean
}

/**
 * The kit at `path` (its folder or its tarball), checked before anything is loaded from it: the
 * vendor's signature over SHA256SUMS, then every file it lists, then the images' pins. What is
 * wrong, in words an admin acts on, when it does not hold.
 */
export async function openKit(
  path: string,
  trust: KitTrust = {},
): Promise<{ kit: Kit; problem: null } | { kit: null; problem: string }> {
  const fail = (problem: string) => ({ kit: null, problem })
  if (!existsSync(path)) return fail(`the air-gap kit ${resolve(path)} does not exist`)
  // The folder, or its tarball by name: another file would quietly stand for the folder it is in.
  if (!statSync(path).isDirectory() && basename(path) !== KIT.images)
    return fail(`--images takes the air-gap kit's folder (or its ${KIT.images}); got ${resolve(path)}`)
  const dir = kitDir(path)
  const sumsPath = join(dir, KIT.sums)
  if (!existsSync(sumsPath))
    return fail(`the air-gap kit in ${dir} has no ${KIT.sums} (written with the kit): copy the whole kit folder`)
  const sums = readFileSync(sumsPath, 'utf8')
  let signedBy: string | null = null
  let fingerprint: string | null = null
  const sigPath = join(dir, KIT.signature)
  if (existsSync(sigPath)) {
    const v = await verifySums(sums, readFileSync(sigPath, 'utf8'), trust.keys)
    if ('problem' in v) return fail(`${v.problem}; get the kit again from the vendor`)
    signedBy = v.kid
    fingerprint = v.fingerprint
  } else if (!trust.allowUnsigned) {
    return fail(
      `the air-gap kit in ${dir} is not signed by the vendor (no ${KIT.signature}); a kit you saved yourself with \`images save\` loads with --allow-unsigned`,
    )
  }
  const listed = new Map<string, string>()
  for (const line of sums.split('\n').filter(Boolean)) {
    const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line)
    if (!m || m[2]!.split('/').includes('..'))
      return fail(`${sumsPath} has a line that is not "<sha256>  <file>" inside the kit: ${line.slice(0, 120)}`)
    listed.set(m[2]!, m[1]!)
  }
  for (const required of [KIT.images, KIT.manifest])
    if (!listed.has(required)) return fail(`${sumsPath} does not list ${required}: this is not an air-gap kit`)
  for (const [file, expected] of listed) {
    const at = join(dir, file)
    if (!existsSync(at))
      return fail(`the air-gap kit is incomplete: ${file} is missing from ${dir}; copy the whole kit folder`)
    // A plain file only: a link could point elsewhere after the check, a folder or a pipe is no file to hash.
    if (!lstatSync(at).isFile())
      return fail(`${file} in the air-gap kit is not a plain file (a link, a folder or a device): copy the kit again`)
    const actual = await sha256(at)
    if (actual !== expected)
      return fail(
        `${file} in the air-gap kit is damaged or incomplete: its SHA-256 is ${actual}, ${KIT.sums} says ${expected}; copy it again`,
      )
  }
  const manifest = readManifest(join(dir, KIT.manifest))
  if ('problem' in manifest) return fail(manifest.problem)
  // The kit's images are those this installer's bundles name: another release's would run unchecked.
  if (manifest.version !== VERSION)
    return fail(
      `the air-gap kit is for Atrium ${manifest.version}, and this installer deploys ${VERSION}: run the installer that came with the kit (./atrium-installer in its folder)`,
    )
  const tarball = join(dir, KIT.images)
  return {
    kit: { dir, path: tarball, bytes: statSync(tarball).size, images: manifest.images, signedBy, fingerprint },
    problem: null,
  }
}

/** images.json read and checked for the shape it is written in; what is wrong otherwise. */
function readManifest(path: string): KitManifest | { problem: string } {
  const bad = (why: string) => ({ problem: `${KIT.manifest} in the air-gap kit ${why}; get the kit again` })
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'))
  } catch {
    return bad('is not JSON')
  }
  const m = parsed as Partial<KitManifest>
  const isImage = (i: unknown) => {
    const x = i as Partial<KitImage> | null
    return (
      Boolean(x) &&
      typeof x!.name === 'string' &&
      typeof x!.ref === 'string' &&
      /^sha256:[0-9a-f]{64}$/.test(String(x!.id)) &&
      typeof x!.platform === 'string'
    )
  }
  if (typeof m?.version !== 'string' || !Array.isArray(m.images) || !m.images.every(isImage))
    return bad(
      'does not pin its images as the installer writes them ({version, images: [{name, ref, id, digest, platform}]})',
    )
  return m as KitManifest
}

/** The kit's images as pinned, for a dry run's plan (nothing is loaded from a kit before openKit has checked it). */
function pinnedImages(dir: string): KitImage[] {
  const m = existsSync(join(dir, KIT.manifest)) ? readManifest(join(dir, KIT.manifest)) : null
  return m && 'images' in m ? m.images : []
}

/**
 * Load the kit's tarball into this machine's engine, after checking that the engine runs the kit's
 * platform (`checkPlatform`: a Compose site runs what it loads; a push from another machine need
 * not); then check that each tag now names the very image the kit pinned (its ID), so a tag that
 * named another image before the load cannot slip through. `images`: the pins openKit checked.
 */
export function loadCommands(
  path: string,
  o: { images?: readonly KitImage[]; checkPlatform?: boolean } = {},
): Command[] {
  const dir = kitDir(path)
  const images = o.images ?? pinnedImages(dir)
  const platforms = [...new Set(images.map((i) => i.platform))]
  return [
    ...(o.checkPlatform !== false && platforms.length === 1
      ? [
          {
            file: 'docker',
            args: ['version', '--format', '{{.Server.Os}}/{{.Server.Arch}}'],
            title: `Check that this engine runs ${platforms[0]}, the kit's platform`,
            expect: platforms[0],
          },
        ]
      : []),
    {
      file: 'docker',
      args: ['load', '--input', join(dir, KIT.images)],
      title: `Load the images from ${join(dir, KIT.images)}`,
      timeoutMs: WAIT,
    },
    ...images.map((i) => ({
      file: 'docker',
      args: ['image', 'inspect', '--format', '{{.Id}}', i.ref],
      title: `Check that ${i.ref} is the kit's image ${i.id.slice(0, 19)}`,
      expect: i.id,
    })),
  ]
}

/**
 * Retag each image for the private registry and push it there (after loading the kit when one is
 * given). The path after the registry is kept, so global.imageRegistry / ATRIUM_REGISTRY is all a
 * bundle needs to find them.
 */
export function pushCommands(
  registry: string,
  kit?: string,
  images: readonly Image[] = IMAGES,
  pins?: readonly KitImage[],
): Command[] {
  return [
    ...(kit ? loadCommands(kit, { images: pins, checkPlatform: false }) : []),
    ...images.flatMap((i) => [
      { file: 'docker', args: ['tag', imageRef(i), imageRef(i, registry)], title: `Tag ${i.name} for ${registry}` },
      {
        file: 'docker',
        args: ['push', imageRef(i, registry)],
        title: `Push ${imageRef(i, registry)}`,
        timeoutMs: WAIT,
      },
    ]),
  ]
}

/**
 * After a push: each image by the digest the private registry gave it (registry/repo@sha256:...),
 * read from the engine, which records it on push. Pinning the chart to the server's
 * (image.digest) makes every node run exactly that image.
 */
export async function pushedDigests(
  registry: string,
  images: readonly Image[],
  runner: Runner,
): Promise<{ name: string; ref: string }[]> {
  const out: { name: string; ref: string }[] = []
  for (const image of images) {
    const r = await runner('docker', [
      'image',
      'inspect',
      '--format',
      '{{json .RepoDigests}}',
      imageRef(image, registry),
    ])
    const repo = `${registry}/${image.repository}`
    const digest = (r.exitCode === 0 ? repoDigests(r.stdout) : []).find((d) => d.startsWith(`${repo}@`))
    if (digest) out.push({ name: image.name, ref: digest })
  }
  return out
}
