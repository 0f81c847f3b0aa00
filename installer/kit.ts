// The vendor's air-gap kit builder, run on a connected machine that holds the signing key:
//   npm run kit -- --output DIR --private-key FILE --kid KID [--platform linux/amd64] [--only a,b]
// It writes one folder that a site with no registry and no network installs from:
//   atrium-installer, installer/, licenses/, config/, compose/   the installer as one file (Node.js
//                            is all it needs) and the Compose bundle (installer/build.ts)
//   charts/atrium-<version>.tgz   the chart, packaged (helm package)
//   atrium-images.tar, images.json   every image, pinned (installer/deploy/airgap.ts)
//   README.md, docs/              what an admin reads at the site (KIT_DOCS)
//   SHA256SUMS, SHA256SUMS.sig    every file's checksum, signed with the license key (EdDSA)
// At the site: ./atrium-installer images load --images . (Compose) or images push (Helm), then
// install --images . as docs/air-gap.md says. --unsigned makes a kit for a test bench only: a site
// refuses it unless told --allow-unsigned.
import { cpSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import type { KeyObject } from 'node:crypto'
import { isMain } from '../common/is-main.js'
import { ROOT } from '../common/bundle.js'
import { IMAGES, type Image } from '../config/images.js'
import { readPrivateKey, runVendorTool, UsageError } from '../licenses/issue.js'
import { signSums, verifySums } from '../licenses/kit-signature.js'
import { buildInstaller } from './build.js'
import {
  KIT,
  newFolderProblem,
  platformProblem,
  recordImages,
  saveCommands,
  selectImages,
  writeSums,
} from './deploy/airgap.js'
import { deploy, failedStep } from './deploy/deploy.js'
import { run, type Runner } from './core/run.js'

export const USAGE = `usage:
  npm run kit -- --output DIR --private-key FILE --kid KID [--platform OS/ARCH] [--only NAME,...]
  npm run kit -- --output DIR --unsigned [...]     (a test bench's kit: sites refuse it by default)
DIR must be new or empty. FILE is the vendor's Ed25519 private key (as for licenses/issue.ts).`

export interface KitOptions {
  output: string
  platform?: string
  images?: readonly Image[]
  /** The vendor's key; without it the kit is unsigned. */
  signer?: { privateKey: KeyObject; kid: string }
  runner?: Runner
  /** Each step as it ends, for the console. */
  onStep?: (line: string) => void
}

/**
 * What an admin reads at the site, copied into the kit as they are in this package (and listed in
 * SHA256SUMS like every file): how to install, air-gapped, and run the site day to day.
 */
export const KIT_DOCS = ['README.md', 'docs/installer.md', 'docs/air-gap.md', 'docs/operations.md'] as const

/**
 * Builds the kit into `output` (new or empty); returns its folder and how many files SHA256SUMS lists. It is built in a
 * new folder beside `output` and renamed to it when whole: a failed build leaves nothing behind.
 */
export async function buildKit(o: KitOptions): Promise<{ dir: string; files: number; signedBy: string | null }> {
  const dir = resolve(o.output)
  const notNew = newFolderProblem(dir)
  if (notNew) throw new UsageError(notNew)
  mkdirSync(dirname(dir), { recursive: true })
  const work = mkdtempSync(join(dirname(dir), `.${basename(dir)}.partial-`))
  try {
    const built = await buildInto(work, o)
    // rename(2) replaces an empty folder: an --output made empty beforehand is taken over.
    renameSync(work, dir)
    return { ...built, dir }
  } catch (err) {
    rmSync(work, { recursive: true, force: true })
    throw err
  }
}

async function buildInto(dir: string, o: KitOptions): Promise<{ files: number; signedBy: string | null }> {
  const runner = o.runner ?? run
  const say = o.onStep ?? (() => {})
  const installer = await buildInstaller(dir)
  for (const doc of KIT_DOCS) cpSync(join(ROOT, doc), join(dir, doc))
  say(`installer: ${installer.modules} modules in one file of ${installer.bytes} bytes`)
  const chart = await runner('helm', ['package', join(ROOT, 'charts/atrium'), '--destination', join(dir, 'charts')], {
    timeoutMs: 120_000,
  })
  if (chart.exitCode !== 0) throw new Error(`helm package failed: ${chart.stderr || chart.stdout}`)
  say(`chart: ${chart.stdout.trim().replaceAll(dir, resolve(o.output))}`)
  const images = o.images ?? IMAGES
  const saved = await deploy(saveCommands(dir, images, o.platform), runner)
  if (!saved.ok) throw new Error(`saving the images failed at: ${failedStep(saved.steps, 2000)}`)
  const manifest = await recordImages(dir, images, runner)
  say(`images: ${manifest.images.map((i) => `${i.ref} ${i.digest ?? i.id} ${i.platform}`).join('; ')}`)
  const sums = await writeSums(dir)
  if (o.signer) {
    const signature = await signSums(sums, o.signer.privateKey, o.signer.kid)
    writeFileSync(join(dir, KIT.signature), `${signature}\n`)
    // Sites trust the keys of licenses/keys.ts: a kit signed with another key (or the wrong kid) is one every site
    // refuses.
    const trusted = await verifySums(sums, signature)
    say(
      'problem' in trusted
        ? `WARNING: sites will refuse this kit: ${trusted.problem}`
        : `signed with ${trusted.kid}, fingerprint ${trusted.fingerprint}: publish it for sites to compare`,
    )
  }
  return { files: sums.split('\n').filter(Boolean).length, signedBy: o.signer?.kid ?? null }
}

export async function cli(argv: string[], runner?: Runner): Promise<string> {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      output: { type: 'string' },
      'private-key': { type: 'string' },
      kid: { type: 'string' },
      platform: { type: 'string' },
      only: { type: 'string' },
      unsigned: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  if (v.help) return USAGE
  const problems = [
    !v.output && 'missing --output DIR',
    !v.unsigned &&
      !(v['private-key'] && v.kid) &&
      'missing --private-key FILE and --kid KID (the vendor signs every kit; --unsigned for a test bench)',
    v.platform && platformProblem(v.platform),
    selectImages(v.only).problem,
  ].filter((p): p is string => Boolean(p))
  if (problems.length) throw new UsageError(problems.join('\n'))
  const signer = v.unsigned ? undefined : { privateKey: readPrivateKey(v['private-key']!), kid: v.kid!.trim() }
  const r = await buildKit({
    output: v.output!,
    platform: v.platform,
    images: selectImages(v.only).images,
    signer,
    runner,
    onStep: (l) => process.stderr.write(`${l}\n`),
  })
  return `wrote the air-gap kit ${r.dir}: ${r.files} files in SHA256SUMS, ${r.signedBy ? `signed with ${r.signedBy}` : 'UNSIGNED'}`
}

if (isMain(import.meta.url)) runVendorTool((argv) => cli(argv), false)
