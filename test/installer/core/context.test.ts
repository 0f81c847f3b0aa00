// The context a command acts on is read once: the answers file with the command line's overrides,
// its references, the configuration already written for the target and the first tenant's record.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import {
  configFiles,
  contextFor,
  interactiveAnswersPath,
  loadContext,
  preflightValues,
  siteConfig,
} from '../../../installer/core/context.js'
import { DEFAULT_ANSWERS, parseAnswers, renderAnswers, type Answers } from '../../../installer/core/answers.js'
import { applyAnswer, checkAnswer, promptsFor } from '../../../installer/core/prompts.js'
import { tempDir } from '../../helpers/platform.js'

function site(t: Parameters<typeof tempDir>[0], target: 'compose' | 'helm') {
  const dir = tempDir(t)
  const out = join(dir, 'out')
  mkdirSync(out)
  const answers = join(dir, 'answers.yaml')
  writeFileSync(
    answers,
    [
      `target: ${target}`,
      `outputDir: ${out}`,
      'config:',
      '  PUBLIC_URL: https://atrium.example.com',
      '  DATABASE_URL: { env: ATRIUM_TEST_DB }',
      '  LICENSE_KEY: { file: license.jwt }',
    ].join('\n'),
  )
  writeFileSync(join(dir, 'license.jwt'), 'eyJ.license\n')
  return { dir, out, answers }
}

t.test(
  'a Compose site keeps the name it was written under: answers naming another are refused, before anything runs',
  async (t) => {
    const s = site(t, 'compose')
    const written = (name: string | null) =>
      writeFileSync(
        join(s.out, '.env'),
        `DATABASE_URL=postgres://kept@db/atrium\n${name ? `ATRIUM_SITE=${name}\n` : ''}`,
      )
    const named = (name: string) => {
      writeFileSync(s.answers, `site: ${name}\n` + readFileSync(s.answers, 'utf8').replace(/^site: .*\n/, ''))
      return loadContext({ answersPath: s.answers, env: { ATRIUM_TEST_DB: 'postgres://a@db/atrium' } }).problems
    }
    written('blue')
    t.same(named('blue'), [], 'the same name: a re-run or an upgrade')
    t.match(named('green'), [
      `site: ${join(s.out, '.env')} is the site blue, and a site keeps its name (its containers and volumes carry it): answer site: blue, or give the site green an outputDir of its own`,
    ])
    written(null)
    t.same(named('atrium'), [], 'a .env written before sites were named is the site atrium')
    t.match(named('blue'), [/is the site atrium, and a site keeps its name/])
    rmSync(join(s.out, '.env'))
    t.same(named('green'), [], 'nothing written yet: any name')
  },
)

t.test('a compose site: answers, references, the written .env and the first tenant, in one object', async (t) => {
  const s = site(t, 'compose')
  writeFileSync(join(s.out, '.env'), 'DATABASE_URL=postgres://kept@db/atrium\nENCRYPTION_MASTER_KEY=a2VwdA==\n')
  writeFileSync(
    join(s.out, 'state.json'),
    JSON.stringify({ firstAdmin: { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com' } }),
  )
  const ctx = loadContext({ answersPath: s.answers, env: {} })
  t.same(ctx.problems, [])
  t.equal(ctx.baseDir, s.dir, '{file} references are read beside the answers file')
  t.same(ctx.files, { target: 'compose', env: join(s.out, '.env'), answers: join(s.out, 'answers.yaml') })
  t.same(ctx.existing, { DATABASE_URL: 'postgres://kept@db/atrium', ENCRYPTION_MASTER_KEY: 'a2VwdA==' })
  t.same(
    ctx.values,
    { PUBLIC_URL: 'https://atrium.example.com', DATABASE_URL: 'postgres://kept@db/atrium', LICENSE_KEY: 'eyJ.license' },
    'a variable that is not set falls back to what is written',
  )
  t.same(ctx.firstAdmin, { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com' })
  t.equal(
    loadContext({ answersPath: s.answers, env: { ATRIUM_TEST_DB: 'postgres://new@db/atrium' } }).values.DATABASE_URL,
    'postgres://new@db/atrium',
    'a variable that is set wins',
  )
  t.same(siteConfig(ctx), { ...ctx.values, ...ctx.existing }, 'the site: what is written, over the answers')
})

t.test("the preflight judges the ports Compose will publish: the installer's environment over .env", async (t) => {
  const s = site(t, 'compose')
  writeFileSync(
    join(s.out, '.env'),
    'ATRIUM_METRICS_PORT=9464\nATRIUM_S3_PORT=9000\nDATABASE_URL=postgres://kept@db/atrium\n',
  )
  const ctx = loadContext({ answersPath: s.answers, env: {} })
  t.match(preflightValues(ctx, {}), { ATRIUM_METRICS_PORT: '9464', ATRIUM_S3_PORT: '9000' }, '.env alone')
  const values = preflightValues(ctx, { ATRIUM_METRICS_PORT: '19464', ATRIUM_S3_PORT: '', PATH: '/usr/bin' })
  t.equal(values.ATRIUM_METRICS_PORT, '19464', 'a Compose variable in the environment wins, as it does for Compose')
  t.equal(values.ATRIUM_S3_PORT, '9000', 'an empty one does not')
  t.notOk('PATH' in values, 'other variables of the environment are not settings')
})

t.test('a helm site reads its values and Secret back', async (t) => {
  const s = site(t, 'helm')
  writeFileSync(
    join(s.out, 'values.yaml'),
    stringify({ airGapped: true, env: { PUBLIC_URL: 'https://old.example.com', RATE_LIMIT_MAX: 500 } }),
  )
  writeFileSync(
    join(s.out, 'secret.yaml'),
    stringify({ kind: 'Secret', stringData: { DATABASE_URL: 'postgres://kept@db/atrium' } }),
  )
  const ctx = loadContext({ answersPath: s.answers, env: {} })
  t.match(ctx.existing, {
    PUBLIC_URL: 'https://old.example.com',
    RATE_LIMIT_MAX: '500',
    AIR_GAPPED: 'true',
    DATABASE_URL: 'postgres://kept@db/atrium',
  })
  t.equal(ctx.values.DATABASE_URL, 'postgres://kept@db/atrium')
  t.equal(ctx.firstAdmin, null, 'no state.json: no first tenant yet')
})

t.test('the command line overrides the answers file without touching the shared defaults', async (t) => {
  const s = site(t, 'compose')
  const ctx = loadContext({
    answersPath: s.answers,
    target: 'helm',
    airGapped: true,
    env: { ATRIUM_TEST_DB: 'postgres://a@db/atrium' },
  })
  t.match(ctx.answers, { target: 'helm', mode: 'air-gapped' })
  t.equal(ctx.files.target, 'helm', 'the files follow the target given on the command line')
  const defaults = loadContext({ target: 'helm', airGapped: true, env: {} })
  t.match(defaults.answers, { target: 'helm', mode: 'air-gapped', outputDir: DEFAULT_ANSWERS.outputDir })
  t.match(DEFAULT_ANSWERS, { target: 'compose', mode: 'connected' }, 'the defaults are as they were')
})

t.test('every problem is collected, none thrown: a bad override, an unset variable, an unreadable file', async (t) => {
  const s = site(t, 'compose')
  writeFileSync(
    join(s.dir, 'other.yaml'),
    `outputDir: ${s.out}\nconfig:\n  DATABASE_URL: { env: ATRIUM_TEST_DB }\n  LICENSE_KEY: { file: nowhere.jwt }\n`,
  )
  const ctx = loadContext({ answersPath: join(s.dir, 'other.yaml'), target: 'swarm', env: {} })
  t.match(ctx.problems, [
    '--target must be compose or helm',
    /ATRIUM_TEST_DB is not set/,
    /cannot read .*nowhere\.jwt \(ENOENT\)/,
  ])
  t.match(loadContext({ answersPath: join(s.dir, 'missing.yaml') }).problems, [
    /cannot read .*missing\.yaml \(ENOENT\)/,
  ])
})

t.test("answers in hand (the interactive installer's) resolve the same way", async (t) => {
  const s = site(t, 'compose')
  writeFileSync(join(s.out, '.env'), 'PUBLIC_URL=https://kept.example.com\n')
  const answers = { ...DEFAULT_ANSWERS, outputDir: s.out, config: { LOG_LEVEL: 'debug' } }
  const ctx = contextFor(answers, { baseDir: s.dir })
  t.same(ctx.existing, { PUBLIC_URL: 'https://kept.example.com' })
  t.same(ctx.values, { LOG_LEVEL: 'debug' })
  t.same(ctx.files, configFiles(answers))
  t.equal(
    contextFor({ ...answers, outputDir: join(s.dir, 'elsewhere') }).existing,
    null,
    'nothing written there: a first install',
  )
})

t.test('an interactive re-run offers what the run before wrote, data path and tenant name included', async (t) => {
  const cwd = tempDir(t)
  t.equal(interactiveAnswersPath(undefined, cwd), undefined, 'a first run starts from the defaults')
  const written = {
    ...DEFAULT_ANSWERS,
    dataPath: join(cwd, 'data'),
    outputDir: join(cwd, 'atrium'),
    tenantName: 'Acme Corp',
    config: { PUBLIC_URL: 'https://ai.acme.example' },
  }
  mkdirSync(written.outputDir)
  writeFileSync(join(written.outputDir, 'answers.yaml'), renderAnswers(written))
  const path = interactiveAnswersPath(undefined, cwd)
  t.equal(path, join(cwd, 'atrium', 'answers.yaml'))
  t.equal(interactiveAnswersPath('/elsewhere/answers.yaml', cwd), '/elsewhere/answers.yaml', '--answers wins')
  const ctx = loadContext({ answersPath: path })
  t.same(ctx.problems, [])
  const offered = Object.fromEntries(promptsFor(ctx.answers, ctx.existing).map((p) => [p.key, p.initial]))
  t.match(offered, { dataPath: join(cwd, 'data'), tenantName: 'Acme Corp', PUBLIC_URL: 'https://ai.acme.example' })
})

t.test('an air-gapped helm site is asked for its registry, checked as a registry; others are not asked', async (t) => {
  const helm: Answers = { ...DEFAULT_ANSWERS, target: 'helm', mode: 'air-gapped', config: {} }
  const registry = promptsFor(helm, null).find((p) => p.key === 'registry')!
  t.match(registry, { label: /^Private registry that holds the images/, required: true })
  t.equal(checkAnswer(registry, 'registry.corp.example:5000/atrium'), null)
  t.match(checkAnswer(registry, 'https://registry.corp.example'), /without a scheme/)
  t.match(checkAnswer(registry, ''), /is required/)
  t.equal(applyAnswer(helm, registry, ' registry.corp.example ').registry, 'registry.corp.example')
  for (const other of [
    { ...helm, mode: 'connected' as const },
    { ...helm, target: 'compose' as const },
  ]) {
    t.notOk(
      promptsFor(other, null).some((p) => p.key === 'registry'),
      `${other.target} ${other.mode}: not asked`,
    )
  }
  t.same(
    parseAnswers('target: helm\nregistry: reg.example:5000\n').answers.registry,
    'reg.example:5000',
    'an answers file may name it',
  )
  t.match(parseAnswers('registry: https://reg.example\n').problems, [
    /^registry: must be host\[:port\]\[\/path\] without a scheme/,
  ])
})

t.test(
  'an air-gapped helm site whose services are named by host name needs servicesCidrs: a problem of the context until given',
  async (t) => {
    const s = site(t, 'helm')
    // Written by a run before: the database is named by a host outside the cluster.
    writeFileSync(
      join(s.out, 'secret.yaml'),
      stringify({ kind: 'Secret', stringData: { DATABASE_URL: 'postgres://u:pw@db.corp.localhost/atrium' } }),
    )
    const ctx = loadContext({ answersPath: s.answers, airGapped: true, env: {} })
    t.match(ctx.problems, [/^servicesCidrs: DATABASE_URL \(db\.corp\.localhost\) is named by host name/])
    const byAddress = loadContext({
      answersPath: s.answers,
      airGapped: true,
      env: { ATRIUM_TEST_DB: 'postgres://u:pw@10.10.0.5/atrium' },
    })
    t.same(byAddress.problems, [], "the answers' address wins over what is written, and is derived")
    writeFileSync(s.answers, `servicesCidrs: [10.10.0.0/24]\n${readFileSync(s.answers, 'utf8')}`)
    t.same(loadContext({ answersPath: s.answers, airGapped: true, env: {} }).problems, [], 'given: fine')
  },
)
