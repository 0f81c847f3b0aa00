// The support bundle holds what support needs and no secret: not in the configuration, not in the
// check results, not in logs that printed a connection string.
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import { logCommands, redactConfig, scrub, writeSupportBundle } from '../../../installer/core/support-bundle.js'
import { run, type Runner } from '../../../installer/deploy/run.js'
import { tempDir } from '../../helpers/platform.js'
import { unzip } from '../../helpers/zip.js'

const config = {
  PUBLIC_URL: 'https://atrium.example.com',
  DATABASE_URL: 'postgres://atrium:p%40ss-w0rd@db:5432/atrium',
  R2_SECRET_ACCESS_KEY: 'minio-secret-key-123',
  ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 9).toString('base64'),
  LOG_LEVEL: 'info',
}
const secrets = ['p%40ss-w0rd', 'p@ss-w0rd', 'minio-secret-key-123', config.ENCRYPTION_MASTER_KEY]

t.test('the configuration keeps ordinary values and says only how long each secret is', async (t) => {
  t.same(redactConfig(config), {
    PUBLIC_URL: 'https://atrium.example.com', DATABASE_URL: `<redacted: ${config.DATABASE_URL.length} characters>`,
    R2_SECRET_ACCESS_KEY: '<redacted: 20 characters>', ENCRYPTION_MASTER_KEY: '<redacted: 44 characters>', LOG_LEVEL: 'info',
  })
})

t.test('secret values are removed from any text, URL passwords too, decoded or not', async (t) => {
  const text = `connecting to ${config.DATABASE_URL}\nauth with p@ss-w0rd and p%40ss-w0rd\nkey=minio-secret-key-123 level=info`
  const clean = scrub(text, config)
  for (const s of secrets) t.notOk(clean.includes(s), s)
  t.match(clean, /connecting to <redacted>\nauth with <redacted> and <redacted>\nkey=<redacted> level=info/)
})

t.test('a compose site gets a zip of versions, checks, redacted configuration and scrubbed logs', async (t) => {
  const dir = tempDir(t)
  // Docker stands in as a script on PATH that logs like a server that prints its settings.
  writeFileSync(join(dir, 'docker'), `#!/bin/sh\necho "server: DATABASE_URL=${config.DATABASE_URL} R2=${config.R2_SECRET_ACCESS_KEY}"\necho "args: $*" >&2\n`)
  chmodSync(join(dir, 'docker'), 0o755)
  const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
  const answers: Answers = { ...DEFAULT_ANSWERS, outputDir: dir, config: { PUBLIC_URL: config.PUBLIC_URL, R2_SECRET_ACCESS_KEY: config.R2_SECRET_ACCESS_KEY } }
  const checks = [{ id: 'tools.docker', title: 'Docker Engine', status: 'pass' as const, found: '27.3.1', required: 'Docker Engine 24.0.0 or newer', fix: '' }]
  const path = join(dir, 'bundle.zip')
  const r = await writeSupportBundle(path, { answers, config, checks, runner, envFile: join(dir, '.env'), now: new Date('2026-11-23T10:00:00Z') })
  t.equal(statSync(path).mode & 0o777, 0o600)
  t.equal(r.size, statSync(path).size)
  const files = await unzip(readFileSync(path))
  t.same(Object.keys(files).sort(), ['answers.yaml', 'checks.json', 'config.redacted.json', 'logs/compose-ps.txt', 'logs/compose.txt', 'versions.json'])
  t.match(JSON.parse(files['versions.json']!), { atrium: /^\d+\.\d+\.\d+/, node: process.version, target: 'compose', tools: [{ id: 'tools.docker', found: '27.3.1' }], createdAt: '2026-11-23T10:00:00.000Z' })
  t.match(files['logs/compose.txt'], /\$ docker compose --env-file .*\.env logs --no-color --timestamps --tail 2000\n\(exit code 0\)\nserver: DATABASE_URL=<redacted> R2=<redacted>/)
  t.equal(JSON.parse(files['config.redacted.json']!).PUBLIC_URL, 'https://atrium.example.com')
  const all = Object.values(files).join('\n')
  for (const s of secrets) t.notOk(all.includes(s), `no ${s.slice(0, 4)}… anywhere in the bundle`)
})

t.test('a helm site collects pods, events and the release status; a missing tool is said, not fatal', async (t) => {
  const answers: Answers = { ...DEFAULT_ANSWERS, target: 'helm', namespace: 'ai', release: 'prod', config: {} }
  const cmds = logCommands(answers, '')
  t.same(cmds.map((c) => `${c.file} ${c.args.join(' ')}`), [
    'kubectl get pods,jobs,deployments,events -n ai -o wide',
    'kubectl logs -n ai -l app.kubernetes.io/instance=prod --all-containers --prefix --timestamps --tail 2000',
    'helm status prod -n ai',
  ])
  const dir = tempDir(t)
  const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
  const path = join(dir, 'b.zip')
  await writeSupportBundle(path, { answers, config: {}, checks: [], runner, envFile: '' })
  const files = await unzip(readFileSync(path))
  t.match(files['logs/pods.txt'], /\(kubectl is not installed here\)/)
  t.match(files['logs/helm-status.txt'], /\(helm is not installed here\)/)
})
