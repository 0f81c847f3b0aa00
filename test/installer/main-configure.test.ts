// configure, install and support-bundle as an admin runs them: --dry-run writes nothing, the
// configuration is private and replays to itself, failed checks stop it unless each is accepted (and
// those of the site's own services never are), no secret leaks. Compose sites use the test's real
// services when TEST_* name them, else the bundled ones (nothing checks those before they run).
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { acceptUnmet, answersFile, installer, NEEDS_SERVICES, realServices } from '../helpers/installer.js'
import { services, suffix, tempDir } from '../helpers/platform.js'
import { unzip } from '../helpers/zip.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

t.test('configure --dry-run shows the plan and writes nothing', async (t) => {
  const a = await answersFile(t, 'compose', '', { bundled: true })
  const r = await installer(['configure', '--answers', a.answers, '--dry-run', '--json', ...acceptUnmet], a.env)
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
  const a = await answersFile(t, 'compose', '', { bundled: true })
  const first = await installer(['configure', '--answers', a.answers, '--yes', ...acceptUnmet], a.env)
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

  // The replay, from the written answers (and the acceptances they record): same key, same secrets, nothing to change.
  const again = await installer(['configure', '--answers', join(a.out, 'answers.yaml'), '--yes', '--json'], a.env)
  t.equal(again.code, 0, again.stderr)
  t.same(JSON.parse(again.stdout).changes, [])
  t.same(JSON.parse(again.stdout).unchanged, [envPath, join(a.out, 'answers.yaml')], 'nothing to write')
  t.equal(readFileSync(envPath, 'utf8'), env, 'the file is the same, master key and all')
})

t.test(
  'the written answers replay from any working directory: relative folders and {file} references written so that the same configuration comes out, byte for byte',
  async (t) => {
    const site = tempDir(t)
    writeFileSync(join(site, 'license.txt'), 'not-a-license\n')
    // The test's real services when there are, the bundled ones otherwise.
    const named = Object.entries({
      DATABASE_URL: services.databaseUrl,
      REDIS_URL: services.redisUrl,
    }).filter(([, v]) => v)
    writeFileSync(
      join(site, 'answers.yaml'),
      [
        'target: compose',
        'dataPath: data',
        'outputDir: out',
        'config:',
        '  PUBLIC_URL: https://atrium.example.com',
        ...named.map(([k, v]) => `  ${k}: "${v}"`),
        '  LICENSE_KEY: { file: license.txt }',
      ].join('\n'),
    )
    // The first run from the site's folder, everything relative to it.
    const first = await installer(
      ['configure', '--answers', 'answers.yaml', '--yes', ...acceptUnmet],
      {},
      { cwd: site },
    )
    t.equal(first.code, 0, first.stderr)
    const env = readFileSync(join(site, 'out/.env'), 'utf8')
    const written = readFileSync(join(site, 'out/answers.yaml'), 'utf8')
    t.match(written, `dataPath: ${join(site, 'data')}`)
    t.match(written, `outputDir: ${join(site, 'out')}`)
    t.match(written, `file: ${join(site, 'license.txt')}`)

    // The replay from somewhere else entirely.
    const elsewhere = tempDir(t)
    const again = await installer(
      ['configure', '--answers', join(site, 'out/answers.yaml'), '--yes', '--json'],
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

t.test(
  'without --yes configure asks for it; failed checks stop it with exit 3 until each is accepted, which answers.yaml records with who and when',
  async (t) => {
    // No license in these answers: the license check fails on any machine.
    const a = await answersFile(t, 'compose', '', { bundled: true })
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
      accepted: [],
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
    t.match(
      text.stdout,
      /\nTo go on without fixing th(is|ese), accept (it|each) \(recorded in answers\.yaml with who and when\): (--accept-check \S+ )*--accept-check license\n/,
    )
    t.notMatch(text.stdout, /Configuration changes|Wrote/, 'stopped before the plan')
    // Run with sudo: the admin behind it is who accepted.
    const accepted = await installer(['configure', '--answers', a.answers, '--yes', ...acceptUnmet], {
      ...a.env,
      SUDO_USER: 'alice',
    })
    t.equal(accepted.code, 0, accepted.stderr)
    t.match(
      accepted.stdout,
      /\nGoing on past checks that did not pass, accepted:\n( {2}\S+ \(accepted by alice at \S+\)\n)* {2}license \(accepted by alice at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)\n/,
    )
    const recorded = parse(readFileSync(join(a.out, 'answers.yaml'), 'utf8')).acceptedChecks
    t.match(recorded, [{ by: 'alice' }])
    t.ok(
      recorded.some((c: { id: string }) => c.id === 'license'),
      'the license acceptance is recorded',
    )
    t.ok(
      recorded.every((c: { id: string }) =>
        out.checks.some((f: { id: string; status: string }) => f.id === c.id && f.status === 'fail'),
      ),
      'only checks that failed are recorded',
    )
  },
)

/** DATABASE_URL with a wrong password: the test's PostgreSQL with a user it does not know, else a closed port. */
function wrongDatabase(): string {
  if (!services.databaseUrl) return 'postgres://atrium:wrong-password@127.0.0.1:1/atrium'
  const url = new URL(services.databaseUrl)
  url.username = `atrium_nobody_${suffix()}`
  url.password = 'wrong-password'
  return url.href
}

t.test(
  'a wrong database password cannot be accepted: named, it is bad input (exit 2); failing, it stops configure (exit 3) whatever else is accepted, and nothing is written',
  async (t) => {
    const a = await answersFile(t, 'compose', '', { bundled: true })
    const answers = readFileSync(a.answers, 'utf8').replace(/^ {2}DATABASE_URL: .*$/m, '')
    writeFileSync(a.answers, answers.replace('config:\n', `config:\n  DATABASE_URL: "${wrongDatabase()}"\n`))
    const named = await installer(
      ['configure', '--answers', a.answers, '--yes', ...acceptUnmet, '--accept-check', 'postgres.connect'],
      a.env,
    )
    t.equal(named.code, 2, named.stderr)
    t.match(
      named.stderr,
      /^--accept-check postgres\.connect: cannot be accepted: Atrium cannot start without its own PostgreSQL, Redis and S3 answering to these settings: a deploy past this check replaces the running site with one that cannot serve; correct the setting \(or start the service\) and run again\n/,
    )
    const failing = await installer(['configure', '--answers', a.answers, '--yes', ...acceptUnmet, '--json'], a.env)
    t.equal(failing.code, 3, failing.stderr)
    const report = JSON.parse(failing.stdout)
    t.match(report, { exitCode: 3, stopped: 'checks', written: false, files: [] })
    t.match(
      report.checks.find((c: { id: string }) => c.id === 'postgres.connect'),
      {
        status: 'fail',
        found: services.databaseUrl
          ? /^the user atrium_nobody_\w+ does not exist at 127\.0\.0\.1:\d+$/
          : /^not reachable at 127\.0\.0\.1:1/,
      },
    )
    t.notMatch(failing.stdout, /wrong-password/, 'the password is not shown')
    t.notOk(existsSync(a.out), 'nothing written')
  },
)

t.test(
  '--ignore-failed-checks is gone: bad input saying to accept each check by its id; an id that is no check is bad input too',
  async (t) => {
    const a = await answersFile(t, 'compose', '', { bundled: true })
    const gone = await installer(
      ['configure', '--answers', a.answers, '--yes', '--ignore-failed-checks', '--json'],
      a.env,
    )
    t.equal(gone.code, 2)
    t.match(JSON.parse(gone.stdout), {
      exitCode: 2,
      failure: 'bad-input',
      problems: [
        /^--ignore-failed-checks is gone: it let every failed check through, a wrong database password included\. Accept each failed check you mean to go on without, by its id: --accept-check ID .*postgres\.connect, .*cannot be accepted: fix them\.$/,
      ],
    })
    const unknown = await installer(['install', '--answers', a.answers, '--yes', '--accept-check', 'cpus'], a.env)
    t.equal(unknown.code, 2)
    t.match(
      unknown.stderr,
      /^--accept-check cpus: not a check of the preflight \(those that may be accepted: cpu, memory, /,
    )
    t.notOk(existsSync(a.out), 'nothing written')
    const help = await installer(['--help'])
    t.match(help.stdout, /\n {2}--accept-check ID +carry on although this check failed \(repeatable;/)
    t.notMatch(help.stdout, /ignore-failed-checks/)
  },
)

t.test('answers that record an acceptance of a check that can never be accepted are bad input', async (t) => {
  const a = await answersFile(t, 'compose', '', { bundled: true })
  writeFileSync(
    a.answers,
    readFileSync(a.answers, 'utf8') +
      '\nacceptedChecks:\n  - { id: redis.connect, by: mallory, at: "2026-01-31T09:30:00.000Z" }\n',
  )
  const r = await installer(['configure', '--answers', a.answers, '--yes', '--json'], a.env)
  t.equal(r.code, 2)
  t.match(JSON.parse(r.stdout).problems, [/^acceptedChecks\[0\]\.id redis\.connect: cannot be accepted: /])
})

t.test(
  'the helm target writes values and a Secret the chart reads through existingSecret',
  { skip: !realServices && NEEDS_SERVICES },
  async (t) => {
    const a = await answersFile(t, 'helm', 'namespace: ai\nrelease: prod')
    const r = await installer(['configure', '--answers', a.answers, '--yes', ...acceptUnmet, '--air-gapped'], a.env)
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
  },
)

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
  const a = await answersFile(t, 'compose', '', { bundled: true })
  const configured = await installer(['configure', '--answers', a.answers, '--yes', ...acceptUnmet], a.env)
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

t.test(
  'install --dry-run shows the deploy commands and writes nothing',
  { skip: !realServices && NEEDS_SERVICES },
  async (t) => {
    const a = await answersFile(t, 'helm', 'namespace: ai\nrelease: prod')
    const plan = await installer(
      ['install', '--answers', a.answers, '--yes', '--dry-run', ...acceptUnmet, '--registry', 'registry.internal:5000'],
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
  },
)
