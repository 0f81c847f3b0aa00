// The installer's configuration file: written private, read back exactly, and a re-run never
// changes a secret that already exists.
import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import {
  diffConfig,
  parseEnvFile,
  planConfig,
  readEnvFile,
  renderEnvFile,
  writeEnvFile,
  writePrivateFile,
} from '../../../installer/core/config-file.js'
import { tempDir } from '../../helpers/platform.js'

const answers = {
  NODE_ENV: 'production',
  PUBLIC_URL: 'https://atrium.example.com',
  DATABASE_URL: 'postgres://atrium:s3cr3t@db.internal:5432/atrium',
  REDIS_URL: 'redis://redis.internal:6379',
  R2_ENDPOINT: 'http://minio.internal:9000',
  R2_BUCKET: 'atrium',
  R2_ACCESS_KEY_ID: 'atrium',
  R2_SECRET_ACCESS_KEY: "it's a #secret with spaces",
  OIDC_PROVIDERS:
    '[{"id":"kc","name":"SSO","issuer":"https://sso.example.com/realms/a","clientId":"atrium","clientSecret":"x\\"y"}]',
}

t.test('a first install generates the master key and validates everything through the schema', async (t) => {
  const plan = planConfig(answers, null)
  t.same(plan.problems, [])
  t.same(plan.generated, ['ENCRYPTION_MASTER_KEY'])
  t.equal(Buffer.from(plan.values.ENCRYPTION_MASTER_KEY!, 'base64').length, 32)
  t.ok(plan.changes.every((c) => c.change === 'added'))
  const secret = plan.changes.find((c) => c.name === 'R2_SECRET_ACCESS_KEY')!
  t.equal(secret.shown, '(secret added)', 'a diff never shows a secret')
  t.notOk(JSON.stringify(plan.changes).includes('s3cr3t'))
  t.equal(plan.changes.find((c) => c.name === 'PUBLIC_URL')!.shown, 'https://atrium.example.com')
})

t.test('what is written reads back exactly, quotes and all, and only its owner can read it', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, '.env')
  const plan = planConfig(answers, null)
  writeEnvFile(path, plan.values)
  t.equal(statSync(path).mode & 0o777, 0o600)
  const back = readEnvFile(path)!
  t.same(back.problems, [])
  t.same(back.values, plan.values)
  // An existing file that someone loosened is tightened again when rewritten.
  writeFileSync(path, renderEnvFile(plan.values), { mode: 0o644 })
  writeEnvFile(path, plan.values)
  t.equal(statSync(path).mode & 0o777, 0o600)
})

t.test('a re-run keeps the master key and every secret, and shows no change', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, '.env')
  const first = planConfig(answers, null)
  writeEnvFile(path, first.values)
  const again = planConfig(answers, readEnvFile(path)!.values)
  t.same(again.problems, [])
  t.same(again.generated, [], 'nothing is regenerated')
  t.equal(again.values.ENCRYPTION_MASTER_KEY, first.values.ENCRYPTION_MASTER_KEY)
  t.same(again.changes, [])
  // Blank answers (an admin pressing Enter) keep what is there.
  const blank = planConfig({ ...answers, R2_SECRET_ACCESS_KEY: '' }, readEnvFile(path)!.values)
  t.equal(blank.values.R2_SECRET_ACCESS_KEY, answers.R2_SECRET_ACCESS_KEY)
})

t.test('changing an existing master key is refused; a changed ordinary value is shown as a diff', async (t) => {
  const existing = planConfig(answers, null).values as Record<string, string>
  const other = Buffer.alloc(32, 7).toString('base64')
  const plan = planConfig({ ...answers, ENCRYPTION_MASTER_KEY: other }, existing)
  t.match(plan.problems, [/ENCRYPTION_MASTER_KEY is already set and cannot be changed/])
  t.equal(plan.values.ENCRYPTION_MASTER_KEY, existing.ENCRYPTION_MASTER_KEY)
  const moved = planConfig({ ...answers, PUBLIC_URL: 'https://ai.example.com' }, existing)
  t.same(moved.changes, [
    { name: 'PUBLIC_URL', change: 'changed', shown: 'https://atrium.example.com -> https://ai.example.com' },
  ])
})

t.test('bad answers are reported all at once, without echoing secrets', async (t) => {
  const plan = planConfig(
    { ...answers, PORT: 'eighty', NOT_A_SETTING: 'x', DATABASE_URL: 'mysql://root:hunter2@db/atrium' },
    null,
  )
  t.match(plan.problems.join('\n'), /NOT_A_SETTING is not an Atrium setting/)
  t.match(plan.problems.join('\n'), /PORT must be a whole number/)
  t.match(plan.problems.join('\n'), /DATABASE_URL must start with postgres/)
  t.notMatch(plan.problems.join('\n'), /hunter2/)
})

t.test('env files are read as Compose reads them', async (t) => {
  const r = parseEnvFile(
    [
      '# comment',
      '',
      'export A=1',
      'B = two words # trailing comment',
      "C='#not a comment'",
      'D="say \\"hi\\" \\\\ bye"',
      'E=',
      'broken line',
      "F='unclosed",
    ].join('\n'),
  )
  t.same(r.values, { A: '1', B: 'two words', C: '#not a comment', D: 'say "hi" \\ bye', E: '' })
  t.same(r.problems, ['line 8 is not KEY=VALUE', 'line 9: F has an unclosed quote'])
})

t.test("removing a setting is a change too, listed in the schema's order", async (t) => {
  t.same(
    diffConfig({ LOG_LEVEL: 'debug', LICENSE_KEY: 'abc' }, {}),
    [
      { name: 'LOG_LEVEL', change: 'removed', shown: 'debug' },
      { name: 'LICENSE_KEY', change: 'removed', shown: '(secret removed)' },
    ],
    "in the schema's order",
  )
})

t.test(
  'a full disk is said in words, and leaves neither the old file changed nor a temporary file behind',
  { skip: process.getuid?.() === 0 ? false : 'mounting a small tmpfs (a disk to fill) needs root' },
  async (t) => {
    const dir = join(tempDir(t), 'small')
    mkdirSync(dir)
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir])
    // As root the mount must work: a test that cannot fill a disk has not shown anything.
    if (mounted.status !== 0) return t.fail(`cannot mount a tmpfs: ${String(mounted.stderr).trim()}`)
    t.teardown(() => void spawnSync('umount', ['--lazy', dir]))
    const path = join(dir, '.env')
    writePrivateFile(path, 'LOG_LEVEL=info\n')
    t.throws(() => writePrivateFile(path, 'x'.repeat(128 * 1024)), {
      message: `cannot write ${path}: the disk under ${dir} is full (ENOSPC)`,
    })
    t.equal(readFileSync(path, 'utf8'), 'LOG_LEVEL=info\n', 'the file as it was')
    t.same(readdirSync(dir), ['.env'], 'no temporary file left')
  },
)
