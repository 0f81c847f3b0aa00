// The installer's commands as an admin runs them: help, flags, preflight with and without --json,
// exit codes, bad answers. Writing configuration: main-configure.test.ts.
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { finished, ROOT } from '../helpers/cli.js'
import { answersFile, installer } from '../helpers/installer.js'
import { services, tempDir } from '../helpers/platform.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

t.test('help exits 0; no command or a bad flag is bad input (2)', async (t) => {
  const help = await installer(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /Exit codes: 0 ok, 1 error, 2 bad input, 3 a check failed, 4 only warnings/)
  t.equal((await installer([])).code, 2)
  const bad = await installer(['preflight', '--colour'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /Unknown option '--colour'/)
  const target = await installer(['preflight', '--target', 'swarm'])
  t.equal(target.code, 2)
  t.match(target.stderr, /--target must be compose or helm/)
})

t.test('the package bin runs the same installer', async (t) => {
  const r = await finished(spawn(process.execPath, ['installer/bin.mjs', '--help'], { cwd: ROOT }))
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, /^Atrium installer/)
})

t.test('preflight --json prints one object of checks, and the exit code follows its status', async (t) => {
  // No license in these answers: the license check fails, whatever this machine is like.
  const a = await answersFile(t, 'compose')
  const r = await installer(['preflight', '--answers', a.answers, '--json'], a.env)
  t.equal(r.stdout.trim().split('\n').length, 1, 'one line: one object')
  const out = JSON.parse(r.stdout)
  t.match(out, { command: 'preflight', exitCode: 3, status: 'fail', checks: Array })
  for (const c of out.checks)
    t.match(c, {
      id: String,
      title: String,
      status: /^(pass|warn|fail)$/,
      found: String,
      required: String,
      fix: String,
    })
  t.same(Object.keys(out.checks[0]).sort(), ['fix', 'found', 'id', 'required', 'status', 'title'])
  const ids = out.checks.map((c: { id: string }) => c.id)
  for (const id of ['cpu', 'memory', 'tools.docker', 'license']) t.ok(ids.includes(id), id)
  t.match(out.checks.find((c: { id: string }) => c.id === 'cpu').found, String(availableParallelism()))
  t.match(
    out.checks.find((c: { id: string }) => c.id === 'license'),
    { status: 'fail', found: 'missing' },
  )
  t.equal(r.code, 3, 'a failed check exits 3')
  t.equal(r.stderr, '', 'nothing but the JSON')
  t.notMatch(r.stdout, new RegExp(services.s3SecretKey), 'no secret in the output')
})

t.test('--json answers bad input in JSON too, and the interactive installer refuses it', async (t) => {
  const bad = await installer(['preflight', '--colour', '--json'])
  t.equal(bad.code, 2)
  t.match(JSON.parse(bad.stdout), { exitCode: 2, failure: 'bad-input', problems: [/Unknown option '--colour'/] })
  const missing = await installer(['install', '--json'])
  t.equal(missing.code, 2)
  t.match(JSON.parse(missing.stdout), { command: 'install', exitCode: 2, problems: [/install needs --answers FILE/] })
  const help = await installer(['--help', '--json'])
  t.equal(help.code, 0)
  t.match(JSON.parse(help.stdout), { command: 'help', exitCode: 0, usage: /^Atrium installer/ })
})

t.test('preflight without --json shows the list in words and ends with the same exit code', async (t) => {
  const a = await answersFile(t, 'compose')
  const r = await installer(['preflight', '--answers', a.answers], a.env)
  t.match(r.stdout, /\[(PASS|WARN|FAIL)\] CPU cores: \d+ cores/)
  t.match(r.stdout, /\[FAIL\] License: missing/)
  t.match(r.stdout, /\d+ passed, \d+ warnings, \d+ failed\./)
  t.equal(r.code, 3, 'a missing license is a failed check')
})

t.test('an answers file with mistakes is bad input, all of them listed', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'a.yaml'), 'target: swarm\nconfig:\n  NOPE: 1\n  LICENSE_KEY: { env: ATRIUM_NO_SUCH_VAR }\n')
  const r = await installer(['preflight', '--answers', join(dir, 'a.yaml')])
  t.equal(r.code, 2)
  t.match(r.stderr, /target: must be one of compose, helm/)
  t.match(r.stderr, /config\.NOPE: not an Atrium setting/)
  t.match(r.stderr, /ATRIUM_NO_SUCH_VAR is not set/)
})

t.test(
  'configure names every bad answer and setting in one report, before any check runs, exit 2 and no stack',
  async (t) => {
    const dir = tempDir(t)
    writeFileSync(
      join(dir, 'a.yaml'),
      [
        'target: compose',
        `dataPath: ${dir}`,
        `outputDir: ${join(dir, 'out')}`,
        'adminEmail: nope',
        'config:',
        '  PORT: 99999',
        '  PUBLIC_URL: not a url',
      ].join('\n'),
    )
    for (const json of [false, true]) {
      const r = await installer(['configure', '--answers', join(dir, 'a.yaml'), '--yes', ...(json ? ['--json'] : [])])
      t.equal(r.code, 2, r.stderr)
      const text = json ? r.stdout : r.stderr
      t.match(text, /adminEmail: must be an email address/)
      t.match(text, /PORT must be between 0 and 65535 \(got \\?"99999\\?"\)/)
      t.match(text, /PUBLIC_URL must be a URL/)
      t.notMatch(
        text,
        /\n\s+at |\[FAIL\]|"checks"/,
        'no stack trace, and no checks run on answers that cannot be written',
      )
    }
    t.notOk(existsSync(join(dir, 'out')), 'nothing written')
  },
)
