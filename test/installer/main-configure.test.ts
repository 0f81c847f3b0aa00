// configure, install and support-bundle as an admin runs them: --dry-run writes nothing, the
// configuration is private and replays to itself, failed checks stop it, no secret leaks.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { answersFile, installer } from '../helpers/installer.js'
import { services, tempDir } from '../helpers/platform.js'
import { unzip } from '../helpers/zip.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

t.test('configure --dry-run shows the plan and writes nothing', async (t) => {
  const a = await answersFile(t, 'compose')
  const r = await installer(
    ['configure', '--answers', a.answers, '--dry-run', '--json', '--ignore-failed-checks'],
    a.env,
  )
  t.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  t.equal(out.written, false)
  t.same(
    out.generated,
    ['ENCRYPTION_MASTER_KEY'],
    'the answers name their own PostgreSQL, Redis and S3: no bundled service gets a password',
  )
  t.ok(
    out.changes.some(
      (c: { name: string; shown: string }) => c.name === 'R2_SECRET_ACCESS_KEY' && c.shown === '(secret added)',
    ),
  )
  t.notOk(existsSync(a.out), 'nothing on disk')
})

t.test('configure writes a private .env and an answers file that replays to the same configuration', async (t) => {
  const a = await answersFile(t, 'compose')
  const first = await installer(['configure', '--answers', a.answers, '--yes', '--ignore-failed-checks'], a.env)
  t.equal(first.code, 0, first.stderr)
  t.match(
    first.stdout.replace(/\s+/g, ' '),
    /Replay this run with: npm --prefix \S+ run --silent installer -- configure --answers \/\S*answers\.yaml --yes/,
  )
  const envPath = join(a.out, '.env')
  t.equal(statSync(envPath).mode & 0o777, 0o600)
  const env = readFileSync(envPath, 'utf8')
  const key = /^ENCRYPTION_MASTER_KEY=(.+)$/m.exec(env)?.[1]
  t.ok(key, 'a master key was generated')
  t.match(env, /^NODE_ENV=production$/m)
  const written = readFileSync(join(a.out, 'answers.yaml'), 'utf8')
  t.notMatch(written, /ENCRYPTION_MASTER_KEY/)
  t.notMatch(written, new RegExp(services.s3SecretKey))

  // The replay, from the written answers: same key, same secrets, nothing to change.
  const again = await installer(
    ['configure', '--answers', join(a.out, 'answers.yaml'), '--yes', '--ignore-failed-checks', '--json'],
    a.env,
  )
  t.equal(again.code, 0, again.stderr)
  t.same(JSON.parse(again.stdout).changes, [])
  t.same(JSON.parse(again.stdout).unchanged, [envPath, join(a.out, 'answers.yaml')], 'nothing to write')
  t.equal(readFileSync(envPath, 'utf8'), env, 'the file is the same, master key and all')
})

t.test(
  'the written answers replay from any working directory: relative folders and {file} references written so that the same configuration comes out, byte for byte',
  async (t) => {
    const site = tempDir(t)
    writeFileSync(join(site, 's3-secret.txt'), `${services.s3SecretKey}\n`)
    writeFileSync(
      join(site, 'answers.yaml'),
      [
        'target: compose',
        'dataPath: data',
        'outputDir: out',
        'config:',
        '  PUBLIC_URL: https://atrium.example.com',
        `  DATABASE_URL: "${services.databaseUrl || 'postgres://atrium@127.0.0.1:1/atrium'}"`,
        `  REDIS_URL: "${services.redisUrl || 'redis://127.0.0.1:1'}"`,
        `  R2_ENDPOINT: "${services.s3Endpoint || 'http://127.0.0.1:1'}"`,
        `  R2_BUCKET: atrium-replay`,
        `  R2_ACCESS_KEY_ID: "${services.s3AccessKey}"`,
        '  R2_SECRET_ACCESS_KEY: { file: s3-secret.txt }',
      ].join('\n'),
    )
    // The first run from the site's folder, everything relative to it.
    const first = await installer(
      ['configure', '--answers', 'answers.yaml', '--yes', '--ignore-failed-checks'],
      {},
      { cwd: site },
    )
    t.equal(first.code, 0, first.stderr)
    const env = readFileSync(join(site, 'out/.env'), 'utf8')
    const written = readFileSync(join(site, 'out/answers.yaml'), 'utf8')
    t.match(written, `dataPath: ${join(site, 'data')}`)
    t.match(written, `outputDir: ${join(site, 'out')}`)
    t.match(written, `file: ${join(site, 's3-secret.txt')}`)

    // The replay from somewhere else entirely.
    const elsewhere = tempDir(t)
    const again = await installer(
      ['configure', '--answers', join(site, 'out/answers.yaml'), '--yes', '--ignore-failed-checks', '--json'],
      {},
      { cwd: elsewhere },
    )
    t.equal(again.code, 0, again.stderr)
    t.same(JSON.parse(again.stdout).changes, [])
    t.equal(readFileSync(join(site, 'out/.env'), 'utf8'), env, 'the same configuration, byte for byte')
    t.equal(readFileSync(join(site, 'out/answers.yaml'), 'utf8'), written, 'and the same answers')
    t.same(readdirSync(elsewhere), [], 'nothing written where the replay ran')
  },
)

t.test('without --yes configure asks for it; failed checks stop it with exit 3 unless ignored', async (t) => {
  // No license in these answers: the license check fails on any machine.
  const a = await answersFile(t, 'compose')
  const noYes = await installer(['configure', '--answers', a.answers], a.env)
  t.equal(noYes.code, 2)
  t.match(noYes.stderr, /add --yes/)
  const r = await installer(['configure', '--answers', a.answers, '--yes', '--json'], a.env)
  t.equal(r.code, 3, r.stderr)
  const out = JSON.parse(r.stdout)
  t.match(out, {
    command: 'configure',
    exitCode: 3,
    status: 'fail',
    stopped: 'checks',
    written: false,
    changes: [],
    files: [],
  })
  t.match(
    out.checks.find((c: { id: string }) => c.id === 'license'),
    { status: 'fail' },
  )
  t.notOk(existsSync(a.out), 'nothing written')
  const text = await installer(['configure', '--answers', a.answers, '--yes'], a.env)
  t.equal(text.code, 3)
  t.match(text.stdout, /\[FAIL\] License: missing/)
  t.notMatch(text.stdout, /Configuration changes|Wrote/, 'stopped before the plan')
  const ignored = await installer(['configure', '--answers', a.answers, '--yes', '--ignore-failed-checks'], a.env)
  t.equal(ignored.code, 0, ignored.stderr)
  t.match(ignored.stdout, /Some checks did not pass; continuing because of --ignore-failed-checks\./)
  t.ok(existsSync(join(a.out, '.env')))
})

t.test('the helm target writes values and a Secret the chart reads through existingSecret', async (t) => {
  const a = await answersFile(t, 'helm', 'namespace: ai\nrelease: prod')
  const r = await installer(
    ['configure', '--answers', a.answers, '--yes', '--ignore-failed-checks', '--air-gapped'],
    a.env,
  )
  t.equal(r.code, 0, r.stderr)
  const values = parse(readFileSync(join(a.out, 'values.yaml'), 'utf8'))
  const secret = parse(readFileSync(join(a.out, 'secret.yaml'), 'utf8'))
  t.equal(values.existingSecret, 'prod-installer-secrets')
  t.equal(values.airGapped, true, 'air-gapped mode turns outside features off')
  t.notOk('NODE_ENV' in values.env, 'the chart fixes production mode itself')
  t.equal(values.env.PUBLIC_URL, 'https://atrium.example.com')
  t.notOk(values.env.ENCRYPTION_MASTER_KEY, 'no secret in the values file')
  t.match(secret, {
    kind: 'Secret',
    metadata: { name: 'prod-installer-secrets', namespace: 'ai', annotations: { 'helm.sh/resource-policy': 'keep' } },
  })
  t.equal(Buffer.from(secret.stringData.ENCRYPTION_MASTER_KEY, 'base64').length, 32)
  t.equal(secret.stringData.R2_SECRET_ACCESS_KEY, services.s3SecretKey)
  t.equal(statSync(join(a.out, 'secret.yaml')).mode & 0o777, 0o600)
})

t.test(
  'air-gapped helm: a service named by host name without servicesCidrs exits 2 naming the answer, nothing written',
  async (t) => {
    const dir = tempDir(t)
    const answers = join(dir, 'answers.yaml')
    // .localhost: outside the cluster by the rule, loopback were it ever looked up (the refusal comes first).
    const config = ['config:', '  DATABASE_URL: postgres://u:db-secret@db.corp.localhost:6432/atrium']
    writeFileSync(answers, ['target: helm', 'mode: air-gapped', `outputDir: ${join(dir, 'out')}`, ...config].join('\n'))
    const r = await installer(['configure', '--answers', answers, '--yes', '--json'])
    t.equal(r.code, 2, r.stderr)
    const report = JSON.parse(r.stdout)
    t.match(report, { exitCode: 2, failure: 'bad-input' })
    t.match(report.problems, [/^servicesCidrs: DATABASE_URL \(db\.corp\.localhost\) is named by host name/])
    t.notMatch(r.stdout + r.stderr, /db-secret/)
    t.notOk(existsSync(join(dir, 'out')), 'nothing written')
  },
)

t.test('support-bundle writes one zip with the checks and no secret', async (t) => {
  const a = await answersFile(t, 'compose')
  const configured = await installer(['configure', '--answers', a.answers, '--yes', '--ignore-failed-checks'], a.env)
  t.equal(configured.code, 0, configured.stderr)
  const path = join(a.dir, 'support.zip')
  const r = await installer(['support-bundle', '--answers', a.answers, '--output', path, '--json'], a.env)
  t.equal(r.code, 0, r.stderr)
  t.match(JSON.parse(r.stdout), { path, size: Number, sha256: /^[0-9a-f]{64}$/ })
  const files = await unzip(readFileSync(path))
  t.ok(JSON.parse(files['checks.json']!).some((c: { id: string }) => c.id === 'cpu'))
  const key = /^ENCRYPTION_MASTER_KEY=(.+)$/m.exec(readFileSync(join(a.out, '.env'), 'utf8'))![1]!
  const all = Object.values(files).join('\n')
  t.notOk(all.includes(key), 'not the master key')
  t.notOk(all.includes(services.s3SecretKey), 'not the S3 secret')
})

t.test('install --dry-run shows the deploy commands and writes nothing', async (t) => {
  const a = await answersFile(t, 'helm', 'namespace: ai\nrelease: prod')
  const plan = await installer(
    [
      'install',
      '--answers',
      a.answers,
      '--yes',
      '--dry-run',
      '--ignore-failed-checks',
      '--registry',
      'registry.internal:5000',
    ],
    a.env,
  )
  t.equal(plan.code, 0, plan.stderr)
  t.match(plan.stdout, /Deploy would run:\n {2}kubectl get namespace ai\n/)
  t.match(
    plan.stdout,
    /helm upgrade --install prod .*charts\/atrium --namespace ai -f .*values\.yaml --set global\.imageRegistry=registry\.internal:5000 --wait --atomic --timeout 15m/,
  )
  t.notOk(existsSync(a.out), 'a dry run writes nothing')
  t.equal((await installer(['install', '--yes'])).code, 2, 'install needs an answers file')
})
