// The answers file: read strictly, secrets resolved from references, and written back for a
// replay without a single secret inline.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import {
  cidrList,
  loadAnswers,
  parseAnswers,
  renderAnswers,
  requiredVariables,
  resolveConfig,
} from '../../../installer/core/answers.js'
import { answersCommand } from '../../../installer/core/invocation.js'
import { tempDir } from '../../helpers/platform.js'

const text = `
target: helm
mode: air-gapped
dataPath: /srv/atrium
namespace: ai
config:
  PUBLIC_URL: https://atrium.example.com
  RATE_LIMIT_MAX: 500
  AIR_GAPPED: true
  DATABASE_URL: { env: PROD_DB_URL }
  LICENSE_KEY: { file: license.jwt }
`

t.test('an answers file is read with defaults for what it leaves out', async (t) => {
  const { answers, problems } = parseAnswers(text)
  t.same(problems, [])
  t.match(answers, {
    target: 'helm',
    mode: 'air-gapped',
    dataPath: '/srv/atrium',
    namespace: 'ai',
    release: 'atrium',
    outputDir: './atrium',
    site: 'atrium',
  })
  t.same(answers.config, {
    PUBLIC_URL: 'https://atrium.example.com',
    RATE_LIMIT_MAX: '500',
    AIR_GAPPED: 'true',
    DATABASE_URL: { env: 'PROD_DB_URL' },
    LICENSE_KEY: { file: 'license.jwt' },
  })
})

t.test('every mistake in an answers file is reported at once, with where it is', async (t) => {
  const { problems } = parseAnswers(
    'target: swarm\nmode: offline\ncolour: blue\ndataPath: ""\nconfig:\n  NOPE: 1\n  PORT: [1, 2]\n  LICENSE_KEY: { vault: x }\n',
  )
  t.same(problems, [
    'colour: not a known answer (known: target, mode, site, dataPath, outputDir, namespace, release, registry, bindAddress, servicesCidrs, tenantName, adminEmail, config, acceptedChecks)',
    'target: must be one of compose, helm',
    'mode: must be one of connected, air-gapped',
    'dataPath: must be a non-empty string',
    'config.NOPE: not an Atrium setting',
    'config.PORT: must be a value, {env: VARIABLE} or {file: PATH}',
    'config.LICENSE_KEY: must be a value, {env: VARIABLE} or {file: PATH}',
  ])
  t.match(parseAnswers('a: [').problems, [/^not valid YAML/])
  t.same(parseAnswers('- a\n- b').problems, ['the answers file must be a YAML mapping (key: value)'])
})

t.test('references are read from the environment and from files beside the answers file', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'answers.yaml'), text)
  writeFileSync(join(dir, 'license.jwt'), 'eyJ.license.key\n')
  const loaded = loadAnswers(join(dir, 'answers.yaml'))
  t.same(loaded.problems, [])
  const r = resolveConfig(loaded.answers, { env: { PROD_DB_URL: 'postgres://a:b@db/atrium' }, baseDir: loaded.baseDir })
  t.same(r.problems, [])
  t.equal(r.values.DATABASE_URL, 'postgres://a:b@db/atrium')
  t.equal(r.values.LICENSE_KEY, 'eyJ.license.key', 'the trailing newline is dropped')
  const missing = resolveConfig(loaded.answers, { env: {}, baseDir: dir + '/elsewhere' })
  t.match(missing.problems, [/PROD_DB_URL is not set/, /cannot read .*license\.jwt \(ENOENT\)/])
  const replay = resolveConfig(loaded.answers, {
    env: {},
    baseDir: loaded.baseDir,
    existing: { DATABASE_URL: 'postgres://kept@db/atrium' },
  })
  t.equal(
    replay.values.DATABASE_URL,
    'postgres://kept@db/atrium',
    'a replay falls back to the configuration already written',
  )
  t.match(loadAnswers(join(dir, 'none.yaml')).problems, [/cannot read .*none\.yaml \(ENOENT\)/])
})

t.test('the written answers hold no secret inline and replay to the same answers', async (t) => {
  const { answers } = parseAnswers(text)
  answers.config.R2_SECRET_ACCESS_KEY = 'typed-in-secret'
  answers.config.ENCRYPTION_MASTER_KEY = Buffer.alloc(32, 1).toString('base64')
  const written = renderAnswers(answers, ['ENCRYPTION_MASTER_KEY'])
  t.notMatch(written, /typed-in-secret/)
  t.notMatch(written, /ENCRYPTION_MASTER_KEY/, 'the master key stays in the written configuration only')
  t.ok(
    written.startsWith(
      `# Atrium installer answers. Replay: ${answersCommand('install', join(answers.outputDir, 'answers.yaml'))}\n`,
    ),
    'the replay names the file where configure writes it, as this installer is started',
  )
  const again = parseAnswers(written)
  t.same(again.problems, [])
  t.same(again.answers.config.R2_SECRET_ACCESS_KEY, { env: 'ATRIUM_R2_SECRET_ACCESS_KEY' })
  t.same(again.answers.config.DATABASE_URL, { env: 'PROD_DB_URL' }, 'an existing reference is kept')
  t.equal(again.answers.config.PUBLIC_URL, 'https://atrium.example.com')
  t.same(requiredVariables(answers, ['ENCRYPTION_MASTER_KEY']), ['ATRIUM_R2_SECRET_ACCESS_KEY'])
})

t.test(
  'accepted checks are written after the settings with who accepted them and when, and read back the same; none, none written',
  async (t) => {
    const { answers } = parseAnswers(text)
    t.same(answers.acceptedChecks, [], 'none unless recorded')
    t.notMatch(renderAnswers(answers), /acceptedChecks/, 'none written when there are none')
    const acceptedChecks = [
      { id: 'cpu', by: 'alice', at: '2026-01-31T09:30:00.000Z' },
      { id: 'license', by: 'bob', at: '2026-02-01T10:00:00.000Z' },
    ]
    const written = renderAnswers({ ...answers, acceptedChecks })
    t.match(
      written,
      /\nacceptedChecks:\n {2}- id: cpu\n {4}by: alice\n {4}at: 2026-01-31T09:30:00\.000Z\n {2}- id: license\n/,
    )
    t.ok(written.indexOf('acceptedChecks:') > written.indexOf('config:'), 'after the settings')
    const again = parseAnswers(written)
    t.same(again.problems, [])
    t.same(again.answers.acceptedChecks, acceptedChecks)
    t.match(parseAnswers('acceptedChecks:\n  - { id: s3.roundtrip, by: alice, at: 2026-01-31T09:30:00Z }\n').problems, [
      /^acceptedChecks\[0\]\.id s3\.roundtrip: cannot be accepted: /,
    ])
  },
)

t.test(
  "the first admin's email is judged by the server's own rule, so create-tenant never refuses it after a deploy",
  async (t) => {
    t.same(parseAnswers('adminEmail: admin@example.com').problems, [])
    t.equal(parseAnswers('adminEmail: admin@example.com').answers.adminEmail, 'admin@example.com')
    t.same(parseAnswers('adminEmail: ""').problems, [], 'empty: no first tenant')
    for (const bad of ['admin@localhost', 'not an email', 'a@b@c.d']) {
      t.match(parseAnswers(`adminEmail: "${bad}"`).problems, [/adminEmail: must be an email address/], bad)
    }
  },
)

t.test(
  'servicesCidrs is a list of CIDRs, as YAML or comma-separated, written back as a list; anything else is named',
  async (t) => {
    const list = parseAnswers('target: helm\nmode: air-gapped\nservicesCidrs: [10.20.0.0/16, "fd00:10::/64"]\n')
    t.same(list.problems, [])
    t.same(list.answers.servicesCidrs, ['10.20.0.0/16', 'fd00:10::/64'])
    t.same(parseAnswers('servicesCidrs: "10.20.0.0/16, 10.30.0.7/32"').answers.servicesCidrs, [
      '10.20.0.0/16',
      '10.30.0.7/32',
    ])
    t.same(parseAnswers('target: helm').answers.servicesCidrs, [], 'none by default')
    t.same(parseAnswers(renderAnswers(list.answers)).answers.servicesCidrs, list.answers.servicesCidrs, 'replayed')
    t.same(parseAnswers('servicesCidrs: [10.20.0.0/16, db.corp.example, 10.1.2.3/33]').problems, [
      'servicesCidrs: not CIDRs: db.corp.example, 10.1.2.3/33 (write e.g. 10.20.0.0/16)',
    ])
    t.same(parseAnswers('servicesCidrs: {a: 1}').problems, [
      'servicesCidrs: must be a list of CIDRs, e.g. [10.20.0.0/16]',
    ])
    t.same(cidrList([1]), { problem: 'must be a list of CIDRs, e.g. [10.20.0.0/16]' })
  },
)

t.test(
  'a site is named as a Compose project and its volumes can be: one that cannot is refused, naming the rule',
  async (t) => {
    for (const good of ['blue', 'site-2', 'a_b', '0ps'])
      t.match(parseAnswers(`site: ${good}`), { answers: { site: good }, problems: [] }, good)
    t.equal(parseAnswers('target: compose').answers.site, 'atrium', 'a site named before sites were: atrium')
    for (const bad of ['Blue', '-blue', 'blue site', 'a.b', '""', 'x'.repeat(41), '[1]'])
      t.match(
        parseAnswers(`site: ${bad}`).problems,
        [/^site: .* cannot name a site: use up to 40 lowercase letters/],
        bad,
      )
    t.match(renderAnswers(parseAnswers('site: blue').answers), /^site: blue$/m, 'written back for a replay')
  },
)
