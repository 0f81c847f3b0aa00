// THIRD_PARTY_NOTICES.md: current with the lockfile, complete for production, free of dev tools and
// only permissive licenses; then the rules themselves on a small made-up project in a temp folder.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { givesEach } from '../helpers/cases.js'
import {
  collectPackages,
  isPermissive,
  nonPermissive,
  NOTICES_FILE,
  renderNotices,
  runNotices,
  type LockEntry,
} from '../../licenses/notices.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const committed = existsSync(join(ROOT, NOTICES_FILE)) ? readFileSync(join(ROOT, NOTICES_FILE), 'utf8') : ''
const rows = new Set(
  committed
    .split('\n')
    .filter((l) => l.startsWith('| '))
    .map((l) => l.split(' | ').slice(0, 2).join(' | ') + ' |'),
)
const row = (name: string, version: string) => `| ${name} | ${version} |`
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>
}
const nameOf = (path: string, e: LockEntry) => e.name ?? path.slice(path.lastIndexOf('node_modules/') + 13)
const entries = Object.entries(lock.packages).filter(([path]) => path.includes('node_modules/'))

t.test(`${NOTICES_FILE} is what renderNotices gives now`, async (t) => {
  t.ok(
    committed === renderNotices(ROOT),
    `${NOTICES_FILE} is stale or missing: dependencies changed, run npm run licenses:notices`,
  )
})

t.test('every production package in package-lock.json is listed', async (t) => {
  // Worked out here from the lockfile alone, not with the script's rules.
  const prod = entries.filter(([path, e]) => !e.dev && !e.link && existsSync(join(ROOT, path, 'package.json')))
  t.ok(prod.length > 100, `${prod.length} installed production entries`)
  const missing = prod.filter(([path, e]) => !rows.has(row(nameOf(path, e), e.version!))).map(([path]) => path)
  t.same(missing, [], 'run npm run licenses:notices')
  for (const direct of ['fastify', 'pino', 'ink', 'react', 'tsx', 'esbuild', '@electric-sql/pglite'])
    t.ok(
      [...rows].some((r) => r.startsWith(`| ${direct} |`)),
      direct,
    )
})

t.test('no dev-only package is listed', async (t) => {
  const prodIds = new Set(entries.filter(([, e]) => !e.dev).map(([path, e]) => `${nameOf(path, e)}@${e.version}`))
  const devOnly = entries.filter(([path, e]) => e.dev && !prodIds.has(`${nameOf(path, e)}@${e.version}`))
  t.ok(devOnly.length > 100, `${devOnly.length} dev-only entries`)
  t.same(
    devOnly.filter(([path, e]) => rows.has(row(nameOf(path, e), e.version!))).map(([path]) => path),
    [],
  )
  for (const name of [
    'tap',
    'autocannon',
    'oidc-provider',
    'typescript',
    'tap-parser',
    'ink-testing-library',
    'react-dom',
  ]) {
    t.notOk(
      [...rows].some((r) => r.startsWith(`| ${name} |`)),
      `${name} is not listed`,
    )
  }
})

t.test('every production package has a permissive license', async (t) => {
  const flagged = nonPermissive(collectPackages(ROOT)).map((p) => `${p.name} ${p.version}: ${p.license}`)
  t.same(flagged, [], 'review these licenses before shipping; do not just widen the allow-list')
})

t.test('SPDX expressions: AND needs both, OR either; exceptions and unknowns fail', async (t) => {
  givesEach(t, isPermissive, [
    [
      true,
      [
        'MIT',
        'mit',
        'Apache-2.0',
        '(MIT OR CC0-1.0)',
        'MIT AND BSD-3-Clause',
        '(MIT AND Zlib) OR Apache-2.0',
        'GPL-3.0-only OR MIT',
      ],
    ],
    [
      false,
      [
        'GPL-3.0-only',
        'MIT AND GPL-2.0',
        'Apache-2.0 WITH LLVM-exception',
        'UNKNOWN',
        'SEE LICENSE IN LICENSE',
        'LicenseRef-Proprietary',
        '(MIT',
        'MIT OR',
        '',
        'MIT MIT',
      ],
    ],
  ])
})

/** A made-up project: a lockfile and the node_modules folders it names, in a temp folder removed afterwards. */
function fixture(t: Test) {
  const root = mkdtempSync(join(tmpdir(), 'atrium-notices-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  const packages: Record<string, LockEntry & Record<string, unknown>> = { '': { name: 'fixture', version: '1.0.0' } }
  const add = (
    path: string,
    entry: LockEntry,
    files: Record<string, string> | null,
    manifest: Record<string, unknown> = {},
  ) => {
    packages[path] = entry
    if (!files) return
    const dir = join(root, path)
    mkdirSync(dir, { recursive: true })
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: nameOf(path, entry), version: entry.version, ...manifest }),
    )
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text)
  }
  const writeLock = () =>
    writeFileSync(join(root, 'package-lock.json'), JSON.stringify({ name: 'fixture', lockfileVersion: 3, packages }))
  mkdirSync(join(root, 'licenses'))
  return { root, add, writeLock, packages }
}

const MIT_A = 'MIT License\r\n\r\nCopyright (c) Alpha   \r\n'
t.test('on a made-up project: dev packages left out, LICENSE and NOTICE found, a missing text said', async (t) => {
  const { root, add, writeLock } = fixture(t)
  add('node_modules/alpha', { version: '1.0.0', license: 'MIT' }, { LICENSE: MIT_A, 'index.js': '' })
  add('node_modules/alpha/node_modules/delta', { version: '0.9.0', license: 'MIT' }, { 'license.md': MIT_A })
  add('node_modules/delta', { version: '0.10.0', license: 'ISC' }, { 'LICENCE.txt': 'ISC License, Delta' })
  add(
    'node_modules/beta',
    { version: '2.0.0', license: 'Apache-2.0' },
    { 'LICENSE.md': 'Apache License 2.0 text', NOTICE: 'Beta\nCopyright 2024 Beta Corp' },
  )
  add('node_modules/legacy', { version: '1.0.0', license: 'MIT' }, { LICENSE: MIT_A })
  add(
    'node_modules/alpha/node_modules/legacy',
    { version: '1.0.0-rc.1' },
    {},
    { licenses: [{ type: 'MIT' }, { type: 'Apache-2.0' }] },
  )
  add(
    'node_modules/gamma',
    { version: '1.0.0' },
    { 'README.md': 'no license here' },
    { license: { type: 'BSD-3-Clause' } },
  )
  add('node_modules/devtool', { version: '3.0.0', license: 'MIT', dev: true }, { LICENSE: 'DEVTOOL LICENSE' })
  add(
    'node_modules/devplat',
    { version: '3.0.0', license: 'MIT', dev: true, optional: true },
    { LICENSE: 'DEVPLAT LICENSE' },
  )
  add('node_modules/plat-other', { version: '1.0.0', license: 'MIT', optional: true }, null)
  add('node_modules/plat-here', { version: '1.0.0', license: 'MIT', optional: true }, { COPYING: 'Plat here text' })
  add(
    'node_modules/types',
    { version: '1.0.0', license: 'MIT', devOptional: true },
    { 'license-mit': 'Types MIT', 'license-cc0': 'Types CC0' },
  )
  writeLock()

  const out = renderNotices(root)
  t.equal(renderNotices(root), out, 'deterministic')
  t.notMatch(out, root, 'no absolute paths')
  t.notMatch(out, /devtool|devplat|DEVTOOL|DEVPLAT/, 'dev packages, optional or not, are left out')
  t.notMatch(out, /plat-other/, 'an optional package not installed here is left out')
  const table = out.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| Package'))
  t.same(
    table,
    [
      '| alpha | 1.0.0 | MIT | [Text 1](#text-1) |',
      '| beta | 2.0.0 | Apache-2.0 | [Text 2](#text-2) |',
      '| delta | 0.9.0 | MIT | [Text 1](#text-1) |',
      '| delta | 0.10.0 | ISC | [Text 3](#text-3) |',
      '| gamma | 1.0.0 | BSD-3-Clause | none in the package; declared license: BSD-3-Clause |',
      '| legacy | 1.0.0-rc.1 | (MIT OR Apache-2.0) | none in the package; declared license: (MIT OR Apache-2.0) |',
      '| legacy | 1.0.0 | MIT | [Text 1](#text-1) |',
      '| plat-here | 1.0.0 | MIT | [Text 4](#text-4) |',
      '| types | 1.0.0 | MIT | [Text 5](#text-5) |',
    ],
    'sorted by name then version (0.9.0 before 0.10.0, a prerelease first); license from the lockfile, else package.json',
  )
  t.match(out, '9 packages. Licenses: MIT (5), (MIT OR Apache-2.0) (1), Apache-2.0 (1), BSD-3-Clause (1), ISC (1).')
  t.match(
    out,
    '### Text 1\n\nUsed by: alpha 1.0.0, delta 0.9.0, legacy 1.0.0.\n\n```text\nMIT License\n\nCopyright (c) Alpha\n```',
    'the same text (CRLF and trailing spaces aside) once, for both',
  )
  t.match(
    out,
    '```text\n--- LICENSE.md ---\n\nApache License 2.0 text\n\n--- NOTICE ---\n\nBeta\nCopyright 2024 Beta Corp\n```',
    'NOTICE after the license',
  )
  t.match(out, '--- license-cc0 ---\n\nTypes CC0\n\n--- license-mit ---\n\nTypes MIT')
  t.match(out, 'npm run licenses:notices')

  const log: string[] = []
  t.equal(
    runNotices([], root, (l) => log.push(l)),
    0,
  )
  t.equal(readFileSync(join(root, NOTICES_FILE), 'utf8'), out, 'the script writes what renderNotices gives')
  t.match(log.join('\n'), /9 production packages:\n\s+5 {2}MIT\n/)
  t.match(log.join('\n'), '2 ship no license text: gamma 1.0.0 (BSD-3-Clause), legacy 1.0.0-rc.1 ((MIT OR Apache-2.0))')
  log.length = 0
  t.equal(
    runNotices(['--check'], root, (l) => log.push(l)),
    0,
    'check passes on a fresh file',
  )
  t.match(log[0], 'is up to date')
})

t.test('--check fails on a stale file, naming the packages, and on a license off the allow-list', async (t) => {
  const { root, add, writeLock } = fixture(t)
  add('node_modules/alpha', { version: '1.0.0', license: 'MIT' }, { LICENSE: MIT_A })
  writeLock()
  const log: string[] = []
  t.equal(
    runNotices(['--check'], root, (l) => log.push(l)),
    1,
    'no file yet',
  )
  t.match(log[0], 'is missing: run npm run licenses:notices')
  runNotices([], root, () => {})

  add('node_modules/alpha', { version: '1.1.0', license: 'MIT' }, { LICENSE: MIT_A })
  add('node_modules/copyleft', { version: '1.0.0', license: 'GPL-3.0-only' }, { LICENSE: 'GPL text' })
  writeLock()
  log.length = 0
  t.equal(
    runNotices(['--check'], root, (l) => log.push(l)),
    1,
  )
  const said = log.join('\n')
  t.match(said, 'THIRD_PARTY_NOTICES.md is stale: run npm run licenses:notices')
  t.match(said, '- | alpha | 1.0.0 | MIT')
  t.match(said, '+ | alpha | 1.1.0 | MIT')
  t.match(said, '+ | copyleft | 1.0.0 | GPL-3.0-only')
  t.match(said, '1 not on the permissive allow-list (review before shipping):\n  copyleft 1.0.0: GPL-3.0-only')

  log.length = 0
  t.equal(
    runNotices([], root, (l) => log.push(l)),
    0,
    'writing still works, and says what to review',
  )
  t.match(log.join('\n'), 'copyleft 1.0.0: GPL-3.0-only')
  t.equal(
    runNotices(['--check'], root, () => {}),
    1,
    'a fresh file still fails the check while a license is off the list',
  )
})

t.test('a node_modules that does not match the lockfile is refused', async (t) => {
  const { root, add, writeLock, packages } = fixture(t)
  add('node_modules/alpha', { version: '1.0.0', license: 'MIT' }, { LICENSE: MIT_A })
  add('node_modules/missing', { version: '1.0.0', license: 'MIT' }, null)
  writeLock()
  t.throws(() => renderNotices(root), /node_modules\/missing is in package-lock.json but not installed: run npm ci/)
  delete packages['node_modules/missing']
  packages['node_modules/alpha'] = { version: '2.0.0', license: 'MIT' }
  writeLock()
  t.throws(() => renderNotices(root), /node_modules\/alpha is 1.0.0 but package-lock.json says 2.0.0: run npm ci/)
})
