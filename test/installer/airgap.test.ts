// An air-gapped run reaches nothing outside: the installer runs with every non-loopback
// connection refused and recorded, and the record shows no attempt beyond the site's own services.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { finished, ROOT } from '../helpers/cli.js'
import { acceptUnmet, realServices, realSettings } from '../helpers/installer.js'
import { tempDir } from '../helpers/platform.js'

t.test('the watch sees and refuses an outside connection (so its silence below means something)', async (t) => {
  const log = join(tempDir(t), 'outbound.log')
  writeFileSync(log, '')
  const r = await finished(
    spawn(
      process.execPath,
      [
        '--import',
        join(ROOT, 'test/helpers/no-outbound.mjs'),
        '-e',
        "fetch('http://198.51.100.7:8080/').then(() => console.log('reached'), (e) => console.log('refused', e.cause && e.cause.code))",
      ],
      {
        env: { PATH: process.env.PATH ?? '', OUTBOUND_LOG: log },
      },
    ),
  )
  t.equal(r.stdout.trim(), 'refused ECONNREFUSED')
  t.match(readFileSync(log, 'utf8'), /^connect 198\.51\.100\.7:8080$/m)
})

t.test('preflight and configure in air-gapped mode make no outbound connection', async (t) => {
  const dir = tempDir(t)
  // The test's real services when there are (configure then writes), else ports where nothing listens (their checks
  // fail and cannot be accepted: configure is refused). Connections are attempted either way.
  const site = realServices
    ? await realSettings(t)
    : {
        DATABASE_URL: 'postgres://atrium@127.0.0.1:1/atrium',
        REDIS_URL: 'redis://127.0.0.1:1',
        R2_ENDPOINT: 'http://127.0.0.1:1',
        R2_ACCESS_KEY_ID: 'atrium',
        R2_SECRET_ACCESS_KEY: 'not-a-real-secret',
      }
  const log = join(dir, 'outbound.log')
  writeFileSync(log, '')
  writeFileSync(
    join(dir, 'answers.yaml'),
    [
      'target: compose',
      'mode: air-gapped',
      `dataPath: ${dir}`,
      `outputDir: ${join(dir, 'out')}`,
      'config:',
      '  PUBLIC_URL: https://atrium.internal.example',
      ...Object.entries(site).map(([k, v]) => `  ${k}: "${v}"`),
    ].join('\n'),
  )
  const runInstaller = (args: string[]) =>
    finished(
      spawn(
        process.execPath,
        ['--import', 'tsx', '--import', join(ROOT, 'test/helpers/no-outbound.mjs'), 'installer/cli.ts', ...args],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', OUTBOUND_LOG: log },
        },
      ),
    )
  const pre = await runInstaller(['preflight', '--answers', join(dir, 'answers.yaml'), '--json'])
  t.equal(pre.code, 3, pre.stderr) // no license in these answers, and none could allow air-gapped use
  t.match(JSON.parse(pre.stdout), { command: 'preflight', status: 'fail' })
  const conf = await runInstaller(['configure', '--answers', join(dir, 'answers.yaml'), '--yes', ...acceptUnmet])
  if (realServices) {
    t.equal(conf.code, 0, conf.stderr)
    t.match(readFileSync(join(dir, 'out', '.env'), 'utf8'), /^AIR_GAPPED=true$/m)
  } else {
    t.equal(conf.code, 3, conf.stderr)
    t.match(conf.stdout, /\npostgres\.connect, redis\.connect, s3\.roundtrip cannot be accepted: /)
    t.notOk(existsSync(join(dir, 'out')), 'nothing written')
  }

  const attempts = readFileSync(log, 'utf8').trim().split('\n').filter(Boolean)
  t.ok(
    attempts.some((a) => a.startsWith('connect ')),
    "the watch saw the connections to the site's own services",
  )
  const outside = attempts.filter((a) => !/^(connect|lookup) (localhost|127\.[\d.]+|::1)(:\d+)?$/.test(a))
  t.same(outside, [], 'no connection or lookup beyond loopback')
})
