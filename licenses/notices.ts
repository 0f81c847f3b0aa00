// Renders licenses/THIRD_PARTY_NOTICES.md: the name, version, license and license text of every
// package a production install (`npm ci --omit=dev`) puts in node_modules, which the vendor ships
// with the container image. `npm run licenses:notices` rewrites the file; `-- --check` exits 1 when
// the file is stale or a package's license is not on the permissive allow-list. A test fails too.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isMain } from '../common/is-main.js'

export const NOTICES_FILE = 'licenses/THIRD_PARTY_NOTICES.md'
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url))

/** Licenses we may ship without review. Anything else, alone or in an expression, is flagged. */
export const PERMISSIVE_LICENSES: readonly string[] = [
  'MIT',
  'ISC',
  'BSD-2-Clause',
  'BSD-3-Clause',
  'Apache-2.0',
  '0BSD',
  'BlueOak-1.0.0',
  'CC0-1.0',
  'Unlicense',
  'Python-2.0',
  'CC-BY-4.0',
]

export type LockEntry = {
  name?: string
  version?: string
  license?: unknown
  dev?: boolean
  optional?: boolean
  devOptional?: boolean
  link?: boolean
}

export type ThirdPartyPackage = {
  name: string
  version: string
  /** SPDX expression as declared, or UNKNOWN when neither the lockfile nor package.json has one. */
  license: string
  /** License files then NOTICE files, joined; null when the package ships none. */
  text: string | null
}

// A license file is LICENSE, LICENCE, COPYING or UNLICENSE with any suffix (LICENSE.md,
// license-mit, LICENSE-MIT.txt); NOTICE files come after them, as Apache-2.0 section 4(d) asks.
const LICENSE_FILE = /^(licen[cs]e|copying|unlicense)([-._].*)?$/i
const NOTICE_FILE = /^notice([-._].*)?$/i

/**
 * Whether npm installs the entry with --omit=dev. Per npm's lockfile docs, `dev` marks packages only
 * the devDependencies tree needs (also when `optional` is set too); `devOptional` marks packages that
 * are dev dependencies *and* optional dependencies of a production package, which npm keeps unless
 * optional ones are omitted as well, so they ship. `optional` ones ship when installed here.
 */
export function isProduction(entry: LockEntry): boolean {
  return entry.dev !== true && entry.link !== true
}

/** The text npm reads a license from: lockfile first, then package.json (`license`, or the old `licenses` list). */
function declaredLicense(entry: LockEntry, manifest: Record<string, unknown>): string {
  const pick = (v: unknown): string | undefined => {
    if (typeof v === 'string' && v.trim()) return v.trim()
    if (v && typeof v === 'object' && 'type' in v && typeof v.type === 'string') return v.type
    return undefined
  }
  const single = pick(entry.license) ?? pick(manifest.license)
  if (single) return single
  if (Array.isArray(manifest.licenses)) {
    const all = manifest.licenses.map(pick).filter((l): l is string => !!l)
    if (all.length) return all.length === 1 ? all[0]! : `(${all.join(' OR ')})`
  }
  return 'UNKNOWN'
}

function normalized(text: string): string {
  return text
    .replace(/^\uFEFF/, '')
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .replace(/^\n+|\n+$/g, '')
}

/** License and notice files in a package folder, in a fixed order; labelled when there are several. */
function licenseText(dir: string): string | null {
  const files = readdirSync(dir)
    .filter((f) => statSync(join(dir, f)).isFile())
    .sort()
  const found = [...files.filter((f) => LICENSE_FILE.test(f)), ...files.filter((f) => NOTICE_FILE.test(f))]
  const parts = found
    .map((f) => ({ file: f, text: normalized(readFileSync(join(dir, f), 'utf8')) }))
    .filter((p) => p.text)
  if (!parts.length) return null
  if (parts.length === 1) return parts[0]!.text
  return parts.map((p) => `--- ${p.file} ---\n\n${p.text}`).join('\n\n')
}

// Versions sort numerically part by part (1.10.0 after 1.9.0), a prerelease before its release.
function compareVersions(a: string, b: string): number {
  const split = (v: string) => {
    const [main = '', pre] = v.split('+')[0]!.split(/-(.*)/s)
    return { main: main.split('.'), pre }
  }
  const x = split(a)
  const y = split(b)
  for (let i = 0; i < Math.max(x.main.length, y.main.length); i++) {
    const d = Number(x.main[i] ?? 0) - Number(y.main[i] ?? 0)
    if (d) return d
  }
  if (x.pre === y.pre) return a < b ? -1 : a > b ? 1 : 0
  if (x.pre === undefined) return 1
  if (y.pre === undefined) return -1
  return x.pre < y.pre ? -1 : 1
}

/**
 * The production packages of the project at `root`, from its package-lock.json and node_modules,
 * one per name and version, sorted by name then version. Throws when node_modules does not match the
 * lockfile, since the notices would then describe something other than what ships.
 */
export function collectPackages(root: string): ThirdPartyPackage[] {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    lockfileVersion?: number
    packages?: Record<string, LockEntry>
  }
  if (!lock.packages || (lock.lockfileVersion ?? 0) < 2)
    throw new Error(
      'package-lock.json has no "packages" map (lockfileVersion 2 or 3 needed): run npm install with npm 7 or later',
    )
  const byId = new Map<string, ThirdPartyPackage>()
  for (const [path, entry] of Object.entries(lock.packages).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // "" is the project itself; paths outside node_modules are workspace folders, also ours.
    if (!path.includes('node_modules/') || !isProduction(entry)) continue
    const dir = join(root, path)
    const manifestPath = join(dir, 'package.json')
    if (!existsSync(manifestPath)) {
      // Platform packages (esbuild's binaries, fsevents) are optional: only this platform's is installed.
      if (entry.optional || entry.devOptional) continue
      throw new Error(`${path} is in package-lock.json but not installed: run npm ci`)
    }
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Record<string, unknown>
    const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)
    const version = entry.version ?? String(manifest.version)
    if (manifest.version !== version)
      throw new Error(`${path} is ${String(manifest.version)} but package-lock.json says ${version}: run npm ci`)
    const id = `${name}@${version}`
    if (!byId.has(id))
      byId.set(id, { name, version, license: declaredLicense(entry, manifest), text: licenseText(dir) })
  }
  return [...byId.values()].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : compareVersions(a.version, b.version),
  )
}

/**
 * Whether an SPDX expression only needs allowed licenses: AND needs both sides, OR either (the
 * licensee picks). WITH exceptions, `+` and LicenseRef-… are not on the list, so they fail.
 */
export function isPermissive(expression: string, allowed: readonly string[] = PERMISSIVE_LICENSES): boolean {
  const ok = new Set(allowed.map((l) => l.toLowerCase()))
  const tokens = expression.match(/\(|\)|[^\s()]+/g) ?? []
  let i = 0
  const peek = () => tokens[i]?.toUpperCase()
  // Recursive descent, AND binding tighter than OR as SPDX says; null means malformed.
  const term = (): boolean | null => {
    const t = tokens[i++]
    if (t === undefined) return null
    if (t === '(') {
      const v = or()
      return tokens[i++] === ')' ? v : null
    }
    if (t === ')' || ['AND', 'OR', 'WITH'].includes(t.toUpperCase())) return null
    if (peek() === 'WITH') {
      i += 2
      return false
    }
    return ok.has(t.toLowerCase())
  }
  const and = (): boolean | null => {
    let v = term()
    while (v !== null && peek() === 'AND') {
      i++
      const r = term()
      v = r === null ? null : v && r
    }
    return v
  }
  const or = (): boolean | null => {
    let v = and()
    while (v !== null && peek() === 'OR') {
      i++
      const r = and()
      v = r === null ? null : v || r
    }
    return v
  }
  const result = or()
  return result === true && i === tokens.length
}

export function nonPermissive(packages: ThirdPartyPackage[]): ThirdPartyPackage[] {
  return packages.filter((p) => !isPermissive(p.license))
}

/** Packages per license, most used first; ties by name so the order never changes. */
export function licenseCounts(packages: ThirdPartyPackage[]): [string, number][] {
  const counts = new Map<string, number>()
  for (const p of packages) counts.set(p.license, (counts.get(p.license) ?? 0) + 1)
  return [...counts].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
}

/** A fence longer than any run of backticks in the text, so a license cannot end the block early. */
function fence(text: string): string {
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((r) => r.length))
  return '`'.repeat(Math.max(3, longest + 1))
}

export function renderPackages(packages: ThirdPartyPackage[]): string {
  // Identical texts are printed once and numbered by first use, so the output only moves when a dependency does.
  const texts = new Map<string, { n: number; users: ThirdPartyPackage[] }>()
  for (const p of packages) {
    if (p.text === null) continue
    const group = texts.get(p.text) ?? { n: texts.size + 1, users: [] }
    group.users.push(p)
    texts.set(p.text, group)
  }
  const lines = [
    '# Third-party notices',
    '',
    'Atrium includes the open-source packages below: every package that a production install',
    '(`npm ci --omit=dev`) puts in `node_modules`, which ships in the Atrium container image. Each is',
    'listed with its version, its declared license and the license text (with any NOTICE file) that it',
    'ships. Packages with the same text share one copy, under "License texts".',
    '',
    'This file is generated from `package-lock.json` and `node_modules` by `licenses/notices.ts`: do not',
    'edit it by hand. After changing dependencies, run `npm ci` then `npm run licenses:notices`;',
    '`npm run licenses:notices -- --check` fails when it is out of date. Optional platform packages',
    "(such as esbuild's binary) are listed only when installed, so generate it on linux x64, as the image.",
    '',
    `${packages.length} packages. Licenses: ${licenseCounts(packages)
      .map(([l, n]) => `${l} (${n})`)
      .join(', ')}.`,
    '',
    '## Packages',
    '',
    '| Package | Version | License | License text |',
    '|---|---|---|---|',
  ]
  for (const p of packages) {
    const text =
      p.text === null
        ? `none in the package; declared license: ${p.license}`
        : `[Text ${texts.get(p.text)!.n}](#text-${texts.get(p.text)!.n})`
    lines.push(`| ${p.name} | ${p.version} | ${p.license} | ${text} |`)
  }
  lines.push('', '## License texts')
  for (const [text, { n, users }] of texts) {
    const f = fence(text)
    lines.push(
      '',
      `### Text ${n}`,
      '',
      `Used by: ${users.map((u) => `${u.name} ${u.version}`).join(', ')}.`,
      '',
      `${f}text`,
      text,
      f,
    )
  }
  return lines.join('\n') + '\n'
}

/** THIRD_PARTY_NOTICES.md as it should be for the project at `root`. Reads files, writes none. */
export function renderNotices(root: string): string {
  return renderPackages(collectPackages(root))
}

/** Package rows one file has and the other lacks, to say what changed when the file is stale. */
function changedRows(before: string, after: string): string[] {
  const rows = (s: string) => new Set(s.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| Package |')))
  const old = rows(before)
  const now = rows(after)
  return [
    ...[...old].filter((r) => !now.has(r)).map((r) => `- ${r}`),
    ...[...now].filter((r) => !old.has(r)).map((r) => `+ ${r}`),
  ]
}

/** The script: writes the file (or with --check compares it), prints a summary; returns the exit code. */
export function runNotices(
  args: string[],
  root: string = REPO_ROOT,
  log: (line: string) => void = console.log,
): number {
  const packages = collectPackages(root)
  const rendered = renderPackages(packages)
  const file = join(root, NOTICES_FILE)
  let code = 0
  if (args.includes('--check')) {
    const onDisk = existsSync(file) ? readFileSync(file, 'utf8') : null
    if (onDisk === null) {
      log(`${NOTICES_FILE} is missing: run npm run licenses:notices`)
      code = 1
    } else if (onDisk !== rendered) {
      const rows = changedRows(onDisk, rendered)
      log(`${NOTICES_FILE} is stale: run npm run licenses:notices`)
      for (const r of rows.length ? rows : ['(package list unchanged: license texts or header differ)']) log(`  ${r}`)
      code = 1
    } else {
      log(`${NOTICES_FILE} is up to date`)
    }
  } else {
    writeFileSync(file, rendered)
    log(`wrote ${NOTICES_FILE}`)
  }
  log(`${packages.length} production packages:`)
  for (const [license, n] of licenseCounts(packages)) log(`  ${String(n).padStart(4)}  ${license}`)
  const flagged = nonPermissive(packages)
  if (flagged.length) {
    log(`${flagged.length} not on the permissive allow-list (review before shipping):`)
    for (const p of flagged) log(`  ${p.name} ${p.version}: ${p.license}`)
    if (args.includes('--check')) code = 1
  }
  const missing = packages.filter((p) => p.text === null)
  if (missing.length)
    log(
      `${missing.length} ship no license text: ${missing.map((p) => `${p.name} ${p.version} (${p.license})`).join(', ')}`,
    )
  return code
}

if (isMain(import.meta.url)) process.exitCode = runNotices(process.argv.slice(2))
