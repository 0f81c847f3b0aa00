// An air-gap kit folder as `images save` writes it (a tarball, images.json, SHA256SUMS), with files
// that stand in for layers, and the vendor's signature over it when a test vendor is given.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { VERSION } from '../../common/version.js'
import { IMAGES, imageRef } from '../../config/images.js'
import { signSums } from '../../licenses/kit-signature.js'
import { KIT, writeSums } from '../../installer/deploy/airgap.js'
import type { KitImage } from '../../installer/core/report.js'
import type { Vendor } from './license.js'

/** An image ID (or digest) made of one repeated digit. */
export const ID = (n: number) => `sha256:${String(n).repeat(64).slice(0, 64)}`

export const SERVER_PIN: KitImage = {
  name: 'atrium-server',
  ref: imageRef(IMAGES[0]!),
  id: ID(1),
  digest: null,
  platform: 'linux/amd64',
}

/** Writes the kit into `dir`; returns its SHA256SUMS text. */
export async function writeKit(
  dir: string,
  o: { images?: KitImage[]; vendor?: Vendor; version?: string } = {},
): Promise<string> {
  mkdirSync(join(dir, 'installer'), { recursive: true })
  writeFileSync(join(dir, KIT.images), 'image layers')
  writeFileSync(
    join(dir, KIT.manifest),
    JSON.stringify({ version: o.version ?? VERSION, images: o.images ?? [SERVER_PIN] }),
  )
  writeFileSync(join(dir, 'installer/cli.js'), 'the installer')
  const sums = await writeSums(dir)
  if (o.vendor) writeFileSync(join(dir, KIT.signature), await signSums(sums, o.vendor.privateKey, o.vendor.kid))
  return sums
}

/**
 * docker as a script: records each call; holds every image (ID n+1 in list order, and a registry
 * digest named as docker names Docker Hub's, without docker.io/); a pushed one gets a digest there.
 */
export function fakeDocker(bin: string) {
  const images = Object.fromEntries(
    IMAGES.map((i, n) => [
      imageRef(i),
      { id: ID(n + 1), digest: `${i.registry}/${i.repository}`.replace(/^docker\.io\/(library\/)?/, '') + `@${ID(9)}` },
    ]),
  )
  const script = `
const { appendFileSync, writeFileSync } = require('node:fs')
const args = process.argv.slice(2)
appendFileSync(${JSON.stringify(join(bin, 'calls.log'))}, 'docker ' + args.join(' ') + '\\n')
const images = ${JSON.stringify(images)}
const [cmd, , , format, ref] = args
if (cmd === 'save') writeFileSync(args[2], 'layers\\n')
if (cmd === 'version') console.log('linux/amd64')
if (cmd === 'image' && format === '{{json .RepoDigests}}') console.log(JSON.stringify([ref.replace(/:[^:/]+$/, '@${ID(7)}')]))
else if (cmd === 'image') {
  const i = images[ref.replace(/^reg\\.local:5000\\//, 'docker.io/')] ?? images[ref]
  console.log(format === '{{.Id}}' ? i.id : i.id + ' linux/amd64 ' + JSON.stringify([i.digest]))
}
`
  writeFileSync(join(bin, 'docker'), `#!${process.execPath}\n${script}`)
  chmodSync(join(bin, 'docker'), 0o755)
  return { PATH: `${bin}:${process.env.PATH}` }
}
