// configure's plan for Compose with the bundled services: a service setting left empty means the
// bundled service, also after an external one was written, and never an empty setting; where the
// site is published; and a file that already holds its content is not written again.
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import { configure } from '../../../installer/core/configure.js'
import { contextFor } from '../../../installer/core/context.js'
import { tempDir } from '../../helpers/platform.js'

const site = (t: Parameters<typeof tempDir>[0], config: Answers['config']): Answers => {
  const dir = tempDir(t)
  return {
    ...DEFAULT_ANSWERS,
    target: 'compose',
    dataPath: join(dir, 'data'),
    outputDir: join(dir, 'out'),
    config: { PUBLIC_URL: 'https://atrium.example.com', ...config },
  }
}

t.test('service settings left empty point Atrium at the bundled services', async (t) => {
  const answers = site(t, {
    DATABASE_URL: '',
    REDIS_URL: '',
    R2_ENDPOINT: '',
    R2_ACCESS_KEY_ID: '',
    R2_SECRET_ACCESS_KEY: '',
  })
  const { plan } = configure(contextFor(answers), { dryRun: true })
  t.same(plan.problems, [])
  t.match(plan.values, {
    DATABASE_URL: /^postgres:\/\/atrium:[0-9a-f]+@postgres:5432\/atrium$/,
    REDIS_URL: /^redis:\/\/:[0-9a-f]+@redis:6379$/,
    R2_ENDPOINT: 'http://minio:9000',
    R2_ACCESS_KEY_ID: 'atrium',
    R2_SECRET_ACCESS_KEY: /^[0-9a-f]{48}$/,
  })
})

t.test(
  'an external service written before goes back to the bundled one when its setting is left empty; not given, it stays',
  async (t) => {
    const answers = site(t, {})
    mkdirSync(answers.outputDir, { recursive: true })
    writeFileSync(
      join(answers.outputDir, '.env'),
      'DATABASE_URL=postgres://atrium:pw@db.internal:5432/atrium\nREDIS_URL=redis://cache.internal:6379\n',
    )
    const emptied = configure(contextFor({ ...answers, config: { ...answers.config, DATABASE_URL: '' } }), {
      dryRun: true,
    }).plan
    t.match(emptied.values.DATABASE_URL, /@postgres:5432\/atrium$/, 'empty: the bundled PostgreSQL')
    t.match(
      emptied.changes.find((c) => c.name === 'DATABASE_URL'),
      { change: 'changed', shown: '(secret changed)' },
    )
    t.equal(
      emptied.values.REDIS_URL,
      'redis://cache.internal:6379',
      'not in the answers: the external Redis written before stays',
    )
  },
)

t.test(
  'an air-gapped site takes AIR_GAPPED as the server reads it: yes and 1 agree with the mode, false and no are named',
  async (t) => {
    for (const agrees of ['true', 'yes', '1', 'on']) {
      const { plan } = configure(contextFor({ ...site(t, { AIR_GAPPED: agrees }), mode: 'air-gapped' }), {
        dryRun: true,
      })
      t.same(plan.problems, [], `AIR_GAPPED: ${agrees}`)
    }
    for (const disagrees of ['false', 'no', '0']) {
      const { plan } = configure(contextFor({ ...site(t, { AIR_GAPPED: disagrees }), mode: 'air-gapped' }), {
        dryRun: true,
      })
      t.same(plan.problems, [
        `config.AIR_GAPPED is ${disagrees} in the answers, but the mode is air-gapped: remove it or set it to true`,
      ])
    }
  },
)

t.test(
  'a run that changes nothing writes nothing: every file already holds its content, and says so; a changed answer rewrites only the answers; staged, the set is written whole',
  async (t) => {
    const answers = site(t, { DATABASE_URL: '', REDIS_URL: '', R2_ENDPOINT: '' })
    const first = configure(contextFor(answers), { dryRun: false })
    t.same(first.unchanged, [], 'a first run writes every file')
    const env = join(answers.outputDir, '.env')
    const yaml = join(answers.outputDir, 'answers.yaml')
    const before = [statSync(env).mtimeMs, statSync(yaml).mtimeMs]
    await new Promise((r) => setTimeout(r, 20))
    const again = configure(contextFor(answers), { dryRun: false })
    t.same(again.plan.changes, [])
    t.same(again.unchanged, [env, yaml])
    t.ok(again.written, 'the configuration is in place')
    t.same([statSync(env).mtimeMs, statSync(yaml).mtimeMs], before, 'neither file touched')
    const dry = configure(contextFor({ ...answers, tenantName: 'Acme' }), { dryRun: true })
    t.same(dry.unchanged, [env], 'a dry run knows too: only the answers would change')
    const renamed = configure(contextFor({ ...answers, tenantName: 'Acme' }), { dryRun: false })
    t.same(renamed.unchanged, [env])
    t.equal(statSync(env).mtimeMs, before[0], '.env untouched')
    t.match(readFileSync(yaml, 'utf8'), /^tenantName: Acme$/m)
    chmodSync(env, 0o644)
    t.same(
      configure(contextFor(answers), { dryRun: false }).unchanged,
      [],
      'a file readable by others is rewritten 0600',
    )
    t.equal(statSync(env).mode & 0o777, 0o600)
    // An install stages what it deploys: the staged set is whole, and the files in use are not touched before it answers.
    const inUse = [statSync(env).mtimeMs, statSync(yaml).mtimeMs]
    await new Promise((r) => setTimeout(r, 20))
    const staged = configure(contextFor(answers), { dryRun: false, stage: true })
    t.match(staged, { staged: true, unchanged: [], files: [env, yaml] })
    for (const name of ['.env', 'answers.yaml'])
      t.equal(
        readFileSync(join(answers.outputDir, '.pending', name), 'utf8'),
        readFileSync(join(answers.outputDir, name), 'utf8'),
      )
    t.same([statSync(env).mtimeMs, statSync(yaml).mtimeMs], inUse, 'the files in use untouched')
  },
)

t.test('Compose publishes where the answers say, keeps what is written, and /metrics on loopback only', async (t) => {
  const answers = site(t, { DATABASE_URL: '', REDIS_URL: '', R2_ENDPOINT: '' })
  const envOf = (a: Answers) => (
    configure(contextFor(a), { dryRun: false }),
    readFileSync(join(a.outputDir, '.env'), 'utf8')
  )
  const first = envOf(answers)
  t.match(first, /^ATRIUM_BIND_ADDRESS=0\.0\.0\.0$/m, 'every interface on a first install without an answer')
  t.match(first, /^ATRIUM_METRICS_PORT=9464$/m)
  t.notMatch(first, /^METRICS_PORT=/m, "the bundle's: /metrics never on the API port")
  t.match(envOf({ ...answers, bindAddress: '127.0.0.1' }), /^ATRIUM_BIND_ADDRESS=127\.0\.0\.1$/m, 'the answer wins')
  t.match(envOf(answers), /^ATRIUM_BIND_ADDRESS=127\.0\.0\.1$/m, 'no answer: what is written stays')
  t.match(
    readFileSync(join(answers.outputDir, 'answers.yaml'), 'utf8'),
    /^bindAddress: ""$/m,
    'the answers file says where it is set',
  )
})
