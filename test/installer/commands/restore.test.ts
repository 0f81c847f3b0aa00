// restore as an admin runs it, on a Compose site whose PostgreSQL and S3 are its own (the test's
// real ones), with a real Atrium server running: the backup an upgrade takes first, then the
// rollback's restore and each of its refusals. Docker answers through a fake runner (every command
// works), so what is tested is the installer: the port check, the guard, the backup, the restore,
// and what each says.
import t from 'tap'
import { VERSION } from '../../../common/version.js'
import { installCommand } from '../../../installer/commands/install.js'
import { restoreCommand } from '../../../installer/commands/restore.js'
import { DEFAULT_ANSWERS } from '../../../installer/core/answers.js'
import { contextFor } from '../../../installer/core/context.js'
import { EXIT } from '../../../installer/core/report.js'
import { verifyBackup } from '../../../installer/backup/restore.js'
import { adminTenant, serverProcess } from '../../helpers/cli.js'
import { services, tempDir, testEnv } from '../../helpers/platform.js'
import { snapshot } from '../../helpers/site-data.js'
import { tools, UNMET_HERE } from '../../helpers/installer.js'
import { passphraseFile, problemsOf, siteOf } from '../fixtures.js'

const real = Boolean(services.databaseUrl && services.s3Endpoint)

t.test('restore needs the archive it puts back: bad input naming it', async (t) => {
  const ctx = contextFor({ ...DEFAULT_ANSWERS, outputDir: tempDir(t) }, { env: {} })
  t.same(await problemsOf(restoreCommand(ctx, { passphraseFile: passphraseFile(t) })), [
    'restore needs --input FILE (the archive backup wrote)',
  ])
})

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

    const refused = tools({ published: { [running.port]: 'atrium' } })
    const without = await installCommand(ctx, { runner: refused.runner, acceptCheck: UNMET_HERE })
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

    const { runner, calls } = tools({ published: { [running.port]: 'atrium' } })
    const r = await installCommand(ctx, { runner, acceptCheck: UNMET_HERE, passphraseFile: pass })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      { status: 'pass', found: new RegExp(`in use by this site's server \\(Atrium ${VERSION}\\)`) },
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
    t.ok(
      r.summary
        .join('\n')
        .includes(
          `To roll back to ${VERSION}, run its installer (the ${VERSION} kit's atrium-installer, or a checkout of ${VERSION}):\n  <the ${VERSION} installer> restore --answers ${ctx.files.answers} --input ${backup} --passphrase-file <your passphrase file> --force --yes`,
        ),
      r.summary.join('\n'),
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
    t.same(
      notEmpty.record.map((s) => [s.name, s.outcome]),
      [['verify', 'failed']],
      'refused at the first check',
    )
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
    t.same(
      restored.record.map((s) => [s.name, s.outcome]),
      ['verify', 'master-key', 'stop-server', 'data', 'configuration', 'deploy'].map((n) => [n, 'done']),
      'every step of the restore, each with its outcome and time',
    )
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
