// backup, restore and the upgrade's backup as an admin runs them: the commands on a Compose site
// whose PostgreSQL and S3 are its own (the test's real ones), with a real Atrium server running.
// Docker answers through a fake runner (every command works), so what is tested is the installer:
// the port check, the guard, the backup, the restore, and what each says.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { VERSION } from '../../../common/version.js'
import { backupCommand } from '../../../installer/commands/backup.js'
import { BadInput } from '../../../installer/commands/command.js'
import { installCommand } from '../../../installer/commands/install.js'
import { restoreCommand } from '../../../installer/commands/restore.js'
import { DEFAULT_ANSWERS } from '../../../installer/core/answers.js'
import { contextFor, type Resolved } from '../../../installer/core/context.js'
import { EXIT } from '../../../installer/core/report.js'
import { verifyBackup } from '../../../installer/backup/restore.js'
import { adminTenant, serverProcess } from '../../helpers/cli.js'
import { services, tempDir, testEnv } from '../../helpers/platform.js'
import { snapshot } from '../../helpers/site-data.js'
import { tools } from '../../helpers/installer.js'

const real = Boolean(services.databaseUrl && services.s3Endpoint)

/** A Compose site in a temporary folder whose services are the running server's. */
function siteOf(t: Parameters<typeof tempDir>[0], env: Record<string, string>, port: number): Resolved {
  const dir = tempDir(t)
  const config = Object.fromEntries(
    [
      'DATABASE_URL',
      'R2_ENDPOINT',
      'R2_BUCKET',
      'R2_ACCESS_KEY_ID',
      'R2_SECRET_ACCESS_KEY',
      'ENCRYPTION_MASTER_KEY',
    ].map((n) => [n, env[n]!]),
  )
  return contextFor(
    {
      ...DEFAULT_ANSWERS,
      dataPath: join(dir, 'data'),
      outputDir: join(dir, 'out'),
      config: { PUBLIC_URL: `http://127.0.0.1:${port}`, PORT: String(port), ...config },
    },
    { env: {} },
  )
}

const passphraseFile = (t: Parameters<typeof tempDir>[0], text = 'the site passphrase, kept apart\n') => {
  const path = join(tempDir(t), 'passphrase')
  writeFileSync(path, text, { mode: 0o600 })
  return path
}

/** The problems of the bad input a command is refused with. */
const problemsOf = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (err: unknown) => (err instanceof BadInput ? err.problems : err),
  )

t.test(
  'backup and restore need their files, and a passphrase of 12 characters or more: bad input naming each',
  async (t) => {
    const ctx = contextFor({ ...DEFAULT_ANSWERS, outputDir: tempDir(t) }, { env: {} })
    await t.rejects(
      backupCommand(ctx, {}),
      new BadInput([
        'backup needs --output FILE (the archive to write, e.g. atrium-backup.tar)',
        'backup needs --passphrase-file FILE (the passphrase that encrypts the configuration part, which holds ENCRYPTION_MASTER_KEY)',
      ]),
    )
    t.same(await problemsOf(restoreCommand(ctx, { passphraseFile: passphraseFile(t) })), [
      'restore needs --input FILE (the archive backup wrote)',
    ])
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: passphraseFile(t, 'short\n') })), [
      /shorter than 12 characters/,
    ])
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: '/nonexistent/passphrase' })), [
      /cannot read the passphrase file \/nonexistent\/passphrase: ENOENT/,
    ])
    // A site with nothing configured has no services to back up.
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: passphraseFile(t) })), [
      /DATABASE_URL is not configured/,
      /R2_ENDPOINT is not configured/,
    ])
  },
)

t.test(
  'an upgrade over a running Atrium backs the site up first (or is refused without a passphrase), and says how to roll back with that backup, which restore then puts back',
  { skip: !real && 'needs TEST_DATABASE_URL and TEST_S3_ENDPOINT (a real PostgreSQL and S3)' },
  async (t) => {
    const env = await testEnv(t)
    const running = await serverProcess(t, env)
    const tenant = await adminTenant(t, env, 'Before the upgrade')
    t.equal((await running.call(tenant.apiKey, 'POST', '/api/v1/projects', { name: 'Kept' })).status, 201)
    const ctx = siteOf(t, env, running.port)
    const pass = passphraseFile(t)

    const refused = tools()
    const without = await installCommand(ctx, { runner: refused.runner, ignoreFailed: true })
    t.match(without, {
      exitCode: EXIT.error,
      stage: 'deploy',
      deployed: false,
      error: new RegExp(
        `^Nothing deployed: this upgrades Atrium ${VERSION}, and an upgrade backs the site up first: give --passphrase-file FILE`,
      ),
    })
    t.notOk(
      refused.calls.some((c) => c.includes(' up ')),
      'nothing deployed without the backup',
    )

    const { runner, calls } = tools()
    const r = await installCommand(ctx, { runner, ignoreFailed: true, passphraseFile: pass })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      { status: 'pass', found: new RegExp(`in use by Atrium ${VERSION}`) },
    )
    t.match(r, {
      exitCode: EXIT.ok,
      stage: 'done',
      ready: true,
      upgrade: { from: VERSION, backup: { path: new RegExp(`/out/backups/atrium-${VERSION}-.*\\.tar$`) } },
    })
    const backup = r.upgrade!.backup!.path
    const titles = r.steps.map((s) => s.title)
    t.ok(
      titles.findIndex((s) => s.startsWith('Back the site up before the upgrade')) <
        titles.findIndex((s) => s.startsWith('Start Atrium')),
      'the backup is taken before anything is deployed',
    )
    t.ok(calls.some((c) => c.includes(' up --detach')))
    t.match(
      r.summary.join('\n'),
      new RegExp(
        `To roll back to ${VERSION}: with the ${VERSION} installer, run\\n  restore --answers <answers file> --input ${backup} --passphrase-file <file> --force --yes`,
      ),
    )
    const verified = await verifyBackup(backup, 'the site passphrase, kept apart')
    t.ok(verified.manifest.database.tables.projects! >= 1, 'the backup holds the project')
    t.match(verified.configuration['.env'], `ENCRYPTION_MASTER_KEY=${env.ENCRYPTION_MASTER_KEY}`)

    // Later: a project the backup does not have, then the rollback's restore.
    t.equal((await running.call(tenant.apiKey, 'POST', '/api/v1/projects', { name: 'After the backup' })).status, 201)
    const before = await snapshot(env.DATABASE_URL!, env.R2_BUCKET!)
    // Resolved again, as each command resolves the site: now with the configuration the upgrade wrote.
    const site = contextFor(ctx.answers, { env: {} })
    const notEmpty = await restoreCommand(site, { runner, input: backup, passphraseFile: pass })
    t.match(notEmpty, {
      exitCode: EXIT.error,
      refused: true,
      restored: false,
      error: /^Not restored: the target is not empty: .*--force.*Nothing was changed\.$/,
    })
    t.same(await snapshot(env.DATABASE_URL!, env.R2_BUCKET!), before, 'refused: nothing changed')
    const dry = await restoreCommand(site, { runner, input: backup, passphraseFile: pass, force: true, dryRun: true })
    t.match(dry, {
      exitCode: EXIT.ok,
      restored: false,
      summary: [/verified: .*with --force, which deletes what it holds.*Dry run: nothing was changed/],
    })
    const wrong = await restoreCommand(site, {
      runner,
      input: backup,
      passphraseFile: passphraseFile(t, 'not the passphrase\n'),
      force: true,
    })
    t.match(wrong, { exitCode: EXIT.error, refused: true, error: /passphrase is wrong/ })

    // A server that cannot be stopped: nothing is touched.
    const stuck: typeof runner = async (file, args, opts) =>
      args.includes('stop')
        ? {
            command: 'docker compose stop server',
            exitCode: 1,
            stdout: '',
            stderr: 'cannot stop',
            notFound: false,
            timedOut: false,
          }
        : runner(file, args, opts)
    const unstopped = await restoreCommand(site, { runner: stuck, input: backup, passphraseFile: pass, force: true })
    t.match(unstopped, {
      exitCode: EXIT.error,
      restored: false,
      error: /^Not restored: the server could not be stopped, so nothing was changed: .*cannot stop/s,
    })
    t.same(await snapshot(env.DATABASE_URL!, env.R2_BUCKET!), before, 'nothing changed')

    const restoreCalls = tools()
    const restored = await restoreCommand(site, {
      runner: restoreCalls.runner,
      input: backup,
      passphraseFile: pass,
      force: true,
      readyTimeoutMs: 30_000,
    })
    t.match(restored, {
      exitCode: EXIT.ok,
      restored: true,
      ready: true,
      summary: [/^Restored .*: \d+ rows in \d+ tables and \d+ objects, from Atrium /, /Atrium is ready/],
    })
    t.match(restoreCalls.calls[0], / stop server$/, 'the server is stopped first')
    t.ok(
      restoreCalls.calls.some((c) => c.includes(' up --detach')),
      'then deployed: the migrations run and the server starts',
    )
    const projects = await running.call(tenant.apiKey, 'GET', '/api/v1/projects')
    t.same(
      projects.body.data.map((p: { name: string }) => p.name),
      ['Kept'],
      'the site is as the backup had it',
    )
  },
)
