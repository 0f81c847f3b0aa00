// A failed change never takes a running site down: the new configuration is staged, the deploy's
// steps before the switch leave the running containers alone, a failed switch puts the previous
// containers back from the files in use, and what a run stopped half-way staged is dropped by the
// next one. The engine answers through a fake runner
// here; test/compose/failures.test.ts runs the same cases on the real engine.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { installCommand } from '../../../installer/commands/install.js'
import { runInstall } from '../../../installer/deploy/install.js'
import { configureStep } from '../../../installer/commands/configure.js'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import { contextFor, loadContext } from '../../../installer/core/context.js'
import { stagingDir } from '../../../installer/core/staged.js'
import { EXIT } from '../../../installer/core/report.js'
import type { Runner } from '../../../installer/core/run.js'
import { VERSION } from '../../../common/version.js'
import { tempDir } from '../../helpers/platform.js'
import { UNMET_HERE } from '../../helpers/installer.js'
import { apiServer } from '../fixtures.js'

/** A Compose site in a folder of its own; each call reads what is written there now, as a new run does. */
function siteIn(dir: string, port: number, config: Answers['config'] = {}, over: Partial<Answers> = {}) {
  return contextFor(
    {
      ...DEFAULT_ANSWERS,
      dataPath: join(dir, 'data'),
      outputDir: join(dir, 'out'),
      ...over,
      config: { PUBLIC_URL: 'https://atrium.example.com', PORT: String(port), ...config },
    },
    { env: {} },
  )
}

/**
 * The engine: every command works unless `fails` says otherwise; each call kept with the --env-file it was given. The
 * site's server publishes its port (the `atrium` project's), as a site's that runs does.
 */
function engine(fails: (command: string, calls: number) => { stdout?: string; stderr?: string } | null) {
  const calls: { command: string; env: string }[] = []
  const runner: Runner = async (file, args) => {
    const command = [file, ...args].join(' ')
    const envFile = args.includes('--env-file') ? args[args.indexOf('--env-file') + 1]! : ''
    calls.push({ command, env: envFile && existsSync(envFile) ? readFileSync(envFile, 'utf8') : '' })
    const failure = fails(command, calls.filter((c) => c.command === command).length)
    if (failure)
      return {
        command,
        exitCode: 1,
        stdout: failure.stdout ?? '',
        stderr: failure.stderr ?? '',
        notFound: false,
        timedOut: false,
      }
    const stdout = args[0] === 'ps' && args.some((a) => a.startsWith('publish=')) ? 'atrium server' : 'version 99.0.0'
    return { command, exitCode: 0, stdout, stderr: '', notFound: false, timedOut: false }
  }
  return { runner, calls }
}

const filesOf = (dir: string) =>
  Object.fromEntries(['.env', 'answers.yaml'].map((n) => [n, readFileSync(join(dir, 'out', n), 'utf8')]))

/** A site installed once (its configuration written and kept), with an Atrium of this release answering on its port. */
async function installedSite(t: Parameters<typeof tempDir>[0]) {
  const dir = tempDir(t)
  const { port } = await apiServer(t, 'Atrium API', VERSION)
  const first = await installCommand(siteIn(dir, port), {
    runner: engine(() => null).runner,
    acceptCheck: UNMET_HERE,
    skipBackup: true,
  })
  t.equal(first.exitCode, EXIT.ok, 'installed')
  t.notOk(existsSync(stagingDir(join(dir, 'out'))), 'what a deploy that answered staged is in use')
  return { dir, port, before: filesOf(dir) }
}

t.test(
  'migrations that fail leave the running site alone: its containers untouched, its files as they were, the cause shown',
  async (t) => {
    const { dir, port, before } = await installedSite(t)
    const { runner, calls } = engine((c) =>
      c.endsWith(' run --rm -T migrate')
        ? {
            stdout: 'error: password authentication failed for user "atrium"',
            stderr: 'Container atrium-postgres-1 Running',
          }
        : null,
    )
    const r = await installCommand(siteIn(dir, port, { LOG_LEVEL: 'debug' }), {
      runner,
      acceptCheck: UNMET_HERE,
      skipBackup: true,
    })
    t.match(r, { exitCode: EXIT.error, stage: 'deploy', deployed: false })
    t.match(r.error, /^The migrations failed; the running site was not touched:/)
    t.match(r.error, /password authentication failed for user "atrium"/, "the container's own line")
    t.match(
      r.error,
      /\nNothing was changed: the running site was not touched and the configuration files in use are as they were\.$/,
    )
    t.notOk(
      calls.some((c) => c.command.includes(' up ') || c.command.includes(' down')),
      'no container replaced',
    )
    t.same(filesOf(dir), before, 'the files byte for byte as before')
    t.notOk(existsSync(stagingDir(join(dir, 'out'))), 'nothing staged is left behind')
  },
)

t.test(
  'a switch that fails puts the previous configuration and containers back, and says so only once they answer',
  async (t) => {
    const { dir, port, before } = await installedSite(t)
    const { runner, calls } = engine((c, n) =>
      c.includes(' up --detach') && n === 1 ? { stderr: 'container atrium-server-1 is unhealthy' } : null,
    )
    const r = await installCommand(siteIn(dir, port, { LOG_LEVEL: 'debug' }), {
      runner,
      acceptCheck: UNMET_HERE,
      skipBackup: true,
    })
    t.match(r, { exitCode: EXIT.error, stage: 'deploy' })
    t.match(r.error, /^Deploy failed at: docker compose .* up --detach/)
    t.match(
      r.error,
      new RegExp(
        `\\nPut back: the previous configuration and containers; Atrium ${VERSION} answers at http://127\\.0\\.0\\.1:${port} again \\(\\d+ s after the failure\\)\\.$`,
      ),
    )
    const ups = calls.filter((c) => c.command.includes(' up --detach'))
    t.equal(ups.length, 2, 'up with the new configuration, then with the previous one')
    t.match(ups[0]!.env, /^LOG_LEVEL=debug$/m, 'the switch ran the new configuration')
    t.equal(ups[1]!.env, before['.env'], 'the containers put back run the previous configuration')
    t.same(filesOf(dir), before, 'the files byte for byte as before')
  },
)

t.test('a switch that fails on a first install removes what did not start and keeps no configuration', async (t) => {
  const dir = tempDir(t)
  const { port } = await apiServer(t, 'Not Atrium', '1.0.0')
  const { runner, calls } = engine((c) => (c.includes(' up --detach') ? { stderr: 'port is already allocated' } : null))
  const r = await installCommand(siteIn(dir, port), { runner, acceptCheck: UNMET_HERE })
  t.match(r, { exitCode: EXIT.error, stage: 'deploy' })
  t.match(
    r.error,
    /\nNothing ran here before: the containers that did not start were removed; the data folders stay\.$/,
  )
  t.ok(
    calls.some((c) => c.command.endsWith(' down --remove-orphans')),
    'compose down',
  )
  t.notOk(existsSync(join(dir, 'out', '.env')), 'no configuration of a site that never ran')
})

t.test('an image the air-gapped engine lacks stops the install before anything running is touched', async (t) => {
  const { dir, port, before } = await installedSite(t)
  const { runner, calls } = engine((c) => {
    if (c.endsWith(' config --images')) return null
    return c.startsWith('docker image inspect') && c.endsWith('atrium-server:9.9.9')
      ? { stderr: 'No such image' }
      : null
  })
  const listing: Runner = async (file, args, o) =>
    args.at(-1) === '--images'
      ? {
          ...(await runner(file, args, o)),
          stdout: 'docker.io/library/postgres:17\ndocker.io/atrium/atrium-server:9.9.9',
        }
      : runner(file, args, o)
  const r = await installCommand(siteIn(dir, port, {}, { mode: 'air-gapped' }), {
    runner: listing,
    acceptCheck: UNMET_HERE,
    skipBackup: true,
  })
  t.match(
    r.error,
    /^Deploy failed before anything running was touched: the engine does not have docker\.io\/atrium\/atrium-server:9\.9\.9; load the air-gap kit/,
  )
  t.notOk(
    calls.some((c) => c.command.includes(' migrate') || c.command.includes(' up ')),
    'no migration, no switch',
  )
  t.same(filesOf(dir), before)
})

t.test(
  'what a run stopped half-way staged is dropped by the next run that writes, before it reads anything',
  async (t) => {
    const { dir, port, before } = await installedSite(t)
    const out = join(dir, 'out')
    // A run killed after writing its configuration and before its deploy answered: staged, never in use.
    const killed = await configureStep(siteIn(dir, port, { LOG_LEVEL: 'debug' }), {
      acceptCheck: UNMET_HERE,
      runner: engine(() => null).runner,
      stage: true,
    })
    t.match(killed.report, { written: true, staged: true })
    t.match(readFileSync(join(stagingDir(out), '.env'), 'utf8'), /^LOG_LEVEL=debug$/m)
    t.same(filesOf(dir), before, 'the files in use did not change')
    const answers = join(out, 'answers.yaml')
    t.equal(loadContext({ answersPath: answers }).leftBehind, undefined, 'a run that only reads changes nothing')
    t.ok(existsSync(stagingDir(out)))
    const ctx = loadContext({ answersPath: answers, recover: true })
    t.equal(ctx.leftBehind, true)
    t.notOk(existsSync(stagingDir(out)), 'dropped')
    t.equal(ctx.existing?.LOG_LEVEL, undefined, 'the run starts from the configuration in use')
    t.same(filesOf(dir), before)
  },
)

t.test(
  'a Helm release that fails is rolled back by --atomic, and the Secret the site used before is applied again',
  async (t) => {
    const dir = tempDir(t)
    const out = join(dir, 'out')
    const ctx = contextFor(
      {
        ...DEFAULT_ANSWERS,
        target: 'helm',
        dataPath: join(dir, 'data'),
        outputDir: out,
        config: { PUBLIC_URL: 'https://atrium.example.com' },
      },
      { env: {} },
    )
    // The Secret in use, and the new configuration staged beside it.
    mkdirSync(stagingDir(out), { recursive: true })
    writeFileSync(join(out, 'secret.yaml'), 'kind: Secret # in use\n')
    for (const name of ['values.yaml', 'secret.yaml', 'answers.yaml'])
      writeFileSync(join(stagingDir(out), name), `# staged ${name}\n`)
    const { runner, calls } = engine((c) =>
      c.startsWith('helm upgrade') ? { stderr: 'release failed: timed out' } : null,
    )
    const r = await runInstall(ctx, { PUBLIC_URL: 'https://atrium.example.com' }, { runner, staged: true })
    t.match(r, { ok: false, stage: 'deploy' })
    t.match(
      r.error,
      /\nHelm rolled the release back \(--atomic\); the configuration files in use and their Secret are as they were\.$/,
    )
    const applied = calls.filter((c) => c.command.startsWith('kubectl apply')).map((c) => c.command)
    t.same(
      applied,
      [
        `kubectl apply --namespace atrium -f ${join(stagingDir(out), 'secret.yaml')}`,
        `kubectl apply --namespace atrium -f ${join(out, 'secret.yaml')}`,
      ],
      'the staged Secret for the release, then the one in use again',
    )
    t.notOk(existsSync(stagingDir(out)), 'nothing staged is left')
    t.equal(readFileSync(join(out, 'secret.yaml'), 'utf8'), 'kind: Secret # in use\n')
  },
)

t.test(
  'a site with its own PostgreSQL, Redis and S3 gets the volume and data folder of its server alone',
  async (t) => {
    const dir = tempDir(t)
    const { port } = await apiServer(t, 'Not Atrium', '1.0.0')
    const ctx = siteIn(dir, port)
    mkdirSync(stagingDir(ctx.answers.outputDir), { recursive: true })
    writeFileSync(join(stagingDir(ctx.answers.outputDir), '.env'), 'COMPOSE_PROFILES=\n')
    const { runner } = engine(() => null)
    const r = await runInstall(ctx, { PORT: String(port) }, { runner, staged: true })
    t.equal(r.ok, true, r.error ?? 'installed')
    // The deploy's own commands (the refusal check before them inspects every volume of the site's name).
    t.same(
      r.steps.map((s) => [s.command.file, ...s.command.args].join(' ')).filter((c) => c.startsWith('docker volume')),
      [
        'docker volume inspect atrium-data',
        `docker volume create --driver local --opt type=none --opt o=bind --opt device=${join(dir, 'data', 'data')} atrium-data`,
      ],
      'the data volume alone',
    )
    t.same(readdirSync(join(dir, 'data')), ['data'], 'and its folder alone')
  },
)
