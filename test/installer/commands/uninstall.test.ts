// uninstall as an admin runs it. Compose on the real engine (a site of its own name, its volumes
// bound under a temporary data path, `docker compose down` for real; skipped with the reason without
// an engine and Compose): the data stays unless --delete-data and the site's name typed back, which
// a wrong or missing name refuses with exit 2 before anything is removed, at a terminal too. Helm
// with helm and kubectl standing in as scripts that record their calls (no cluster runs here).
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { uninstallCommand } from '../../../installer/commands/uninstall.js'
import { configure } from '../../../installer/core/configure.js'
import { loadContext } from '../../../installer/core/context.js'
import { EXIT } from '../../../installer/core/report.js'
import { run, type Runner } from '../../../installer/core/run.js'
import { siteVolumes } from '../../../installer/core/site.js'
import { deploy } from '../../../installer/deploy/deploy.js'
import { volumeCommands } from '../../../installer/deploy/volumes.js'
import { docker } from '../../helpers/engine.js'
import { installer } from '../../helpers/installer.js'
import { suffix, tempDir } from '../../helpers/platform.js'
import { hasTmux, terminal } from '../../helpers/tmux.js'
import { needsCompose } from '../../helpers/tools.js'
import { problemsOf } from '../fixtures.js'

t.setTimeout(300_000)

const info = await docker(['info', '--format', '{{.ServerVersion}}'], 15_000)
const skip =
  info.code === 0 ? needsCompose() : `no container engine: docker info failed (${info.stderr.trim().split('\n')[0]})`

/**
 * A Compose site as install leaves it, without starting it: its configuration written, its volumes made by the
 * deploy's own commands and bound under the data path, a file of data in each folder and the first tenant recorded.
 */
async function composeSite(t: Test) {
  const dir = tempDir(t)
  const site = `t${suffix()}`
  const answers = join(dir, 'answers.yaml')
  const dataPath = join(dir, 'data')
  writeFileSync(
    answers,
    [
      'target: compose',
      `site: ${site}`,
      `dataPath: ${dataPath}`,
      `outputDir: ${join(dir, 'out')}`,
      'config:',
      '  PUBLIC_URL: https://atrium.example.com',
    ].join('\n') + '\n',
  )
  t.equal(configure(loadContext({ answersPath: answers }), { dryRun: false }).written, true)
  const volumes = siteVolumes({ site, dataPath })
  t.teardown(() => docker(['volume', 'rm', '--force', ...volumes.map((v) => v.name)]))
  for (const v of volumes) mkdirSync(v.device, { recursive: true })
  t.ok((await deploy(volumeCommands({ site, dataPath }), run)).ok, 'the volumes made as the deploy makes them')
  for (const v of volumes) writeFileSync(join(v.device, 'datum'), v.folder)
  const state = join(dir, 'out', 'state.json')
  writeFileSync(state, JSON.stringify({ firstAdmin: { tenantId: 't-1', userId: 'u-1', email: 'a@example.com' } }))
  mkdirSync(join(dir, 'out', 'backups'))
  writeFileSync(join(dir, 'out', 'backups', 'atrium-0.1.0.tar'), 'a backup')
  const exists = async () => ({
    volumes: await Promise.all(volumes.map(async (v) => (await docker(['volume', 'inspect', v.name])).code === 0)),
    data: volumes.map((v) => existsSync(join(v.device, 'datum'))),
    state: existsSync(state),
    configuration: ['.env', 'answers.yaml', 'backups/atrium-0.1.0.tar'].every((f) => existsSync(join(dir, 'out', f))),
  })
  return { site, answers, volumes, state, exists, context: () => loadContext({ answersPath: answers }) }
}

const everything = {
  volumes: [true, true, true, true],
  data: [true, true, true, true],
  state: true,
  configuration: true,
}

t.test(
  "compose: docker compose down for the site's project; every volume, datum and file stays",
  { skip },
  async (t) => {
    const s = await composeSite(t)
    const dry = await uninstallCommand(s.context(), { yes: true, dryRun: true })
    t.match(dry, { exitCode: EXIT.ok, dryRun: true, steps: [], deleted: [] })
    t.match(
      dry.plan.map((c) => c.command.join(' ')),
      [
        new RegExp(
          `^docker compose --project-name ${s.site} --env-file .*/out/\\.env -f .*/compose\\.yaml down --volumes --remove-orphans`,
        ),
      ],
    )
    const r = await uninstallCommand(s.context(), { yes: true })
    t.match(r, { command: 'uninstall', exitCode: EXIT.ok, site: s.site, error: null, deleted: [] })
    t.equal(r.steps.length, 1)
    t.equal(r.steps[0]!.exitCode, 0)
    t.match(r.summary, [
      `The site ${s.site} is uninstalled: its containers and network are gone.`,
      'Left in place:',
      new RegExp(`^  the volumes ${s.site}-postgres, ${s.site}-redis, ${s.site}-minio, ${s.site}-data and the data`),
      /^ {2}the configuration in .*\/out \(\.env, with ENCRYPTION_MASTER_KEY/,
      /^ {2}the images in the engine/,
      /state\.json \(the first tenant's ids\)$/,
      'An install with the same answers brings the site back with its data.',
    ])
    t.same(await s.exists(), everything, 'nothing of the data was touched')
  },
)

t.test(
  '--delete-data needs the site’s name typed back: missing or wrong, exit 2 and nothing removed; right, the data goes and the configuration stays',
  { skip },
  async (t) => {
    const s = await composeSite(t)
    const base = ['uninstall', '--answers', s.answers, '--yes', '--delete-data', '--json']
    const missing = await installer(base)
    t.equal(missing.code, EXIT.badInput, missing.stderr)
    t.match(JSON.parse(missing.stdout), {
      command: 'uninstall',
      failure: 'bad-input',
      problems: [/type the site's name back with --confirm-delete NAME \(nothing was removed\)/],
    })
    const wrong = await installer([...base, '--confirm-delete', 'atrium'])
    t.equal(wrong.code, EXIT.badInput)
    t.match(JSON.parse(wrong.stdout).problems, [`"atrium" is not the site's name, ${s.site}: nothing was removed`])
    t.same(await s.exists(), everything, 'nothing removed')

    const dry = await uninstallCommand(s.context(), { yes: true, deleteData: true, dryRun: true })
    t.match(dry.deleted, [
      ...s.volumes.map((v) => `the volume ${v.name}`),
      ...s.volumes.map((v) => `the folder ${v.device}`),
      /state\.json \(the first tenant it records was in the bundled database\)$/,
    ])
    t.same(await s.exists(), everything, 'a dry run deletes nothing and asks for no name')

    const right = await installer([...base, '--confirm-delete', s.site])
    t.equal(right.code, EXIT.ok, right.stderr)
    const report = JSON.parse(right.stdout)
    t.match(report, { exitCode: 0, site: s.site, deleted: dry.deleted, error: null })
    t.same(
      report.steps.map((c: { command: string }) => c.command.split(' ').slice(0, 3).join(' ')),
      ['docker compose --project-name', ...s.volumes.map(() => 'docker volume rm')],
    )
    t.same(await s.exists(), {
      volumes: [false, false, false, false],
      data: [false, false, false, false],
      state: false,
      configuration: true,
    })
    t.ok(
      report.kept.some((k: string) => k.includes('/backups')),
      'the backups are named as kept',
    )
  },
)

t.test(
  "--delete-data leaves a volume of the site's name that points elsewhere: not this site's data to delete",
  { skip },
  async (t) => {
    const s = await composeSite(t)
    const [postgres] = s.volumes
    await docker(['volume', 'rm', postgres!.name])
    const elsewhere = join(tempDir(t), 'other', 'postgres')
    mkdirSync(elsewhere, { recursive: true })
    writeFileSync(join(elsewhere, 'datum'), 'not ours')
    const made = await docker([
      'volume',
      'create',
      ...['--driver', 'local', '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${elsewhere}`],
      postgres!.name,
    ])
    t.equal(made.code, 0, made.stderr)
    const r = await uninstallCommand(s.context(), { yes: true, deleteData: true, confirmDelete: s.site })
    t.equal(r.exitCode, EXIT.ok, r.error ?? '')
    t.notOk(r.deleted.includes(`the volume ${postgres!.name}`))
    t.ok(
      r.kept.includes(
        `the volume ${postgres!.name} (bound to ${elsewhere}): not bound under this site's data path, so not this site's to delete`,
      ),
    )
    t.equal((await docker(['volume', 'inspect', postgres!.name])).code, 0, 'it is still there')
    t.equal(readFileSync(join(elsewhere, 'datum'), 'utf8'), 'not ours', 'and so is what it points at')
  },
)

t.test(
  'at a terminal the name is typed at a prompt that lists what goes; a wrong one exits 2 with nothing removed',
  { skip: skip || (!hasTmux && 'needs tmux') },
  async (t) => {
    const s = await composeSite(t)
    const exit = join(tempDir(t), 'exit')
    const cli = join(process.cwd(), 'installer', 'cli.ts')
    const run = (name: string) => {
      const term = terminal(
        t,
        `sh -c 'npx tsx ${cli} uninstall --answers ${s.answers} --yes --delete-data; echo $? > ${exit}'`,
        { cwd: process.cwd(), width: 200, height: 40 },
      )
      return term.waitFor(/Type the site's name/, 120_000).then((screen) => {
        term.type(name, true)
        return screen
      })
    }
    const screen = await run('not-it')
    t.match(screen, new RegExp(`--delete-data deletes, for good:\\n {2}the volume ${s.site}-postgres`))
    for (let i = 0; i < 600 && !existsSync(exit); i++) await new Promise((r) => setTimeout(r, 100))
    t.equal(readFileSync(exit, 'utf8').trim(), String(EXIT.badInput), 'a wrong name: bad input')
    t.same(await s.exists(), everything, 'nothing removed')
  },
)

/** helm and kubectl as scripts on PATH that record their calls; `helm status` answers as told. */
function cluster(t: Test, releaseThere: boolean) {
  const dir = tempDir(t)
  const status = releaseThere ? 'exit 0' : 'echo "Error: release: not found" >&2; exit 1'
  for (const [name, body] of [
    ['helm', `case "$1" in status) ${status};; esac`],
    ['kubectl', 'exit 0'],
  ] as const) {
    writeFileSync(join(dir, name), `#!/bin/sh\necho "${name} $*" >> "${dir}/calls.log"\n${body}\n`)
    chmodSync(join(dir, name), 0o755)
  }
  const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
  const calls = () => readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n')
  return { runner, calls }
}

function helmSite(t: Test) {
  const dir = tempDir(t)
  const answers = join(dir, 'answers.yaml')
  writeFileSync(
    answers,
    [
      'target: helm',
      'namespace: ai',
      'release: prod',
      `outputDir: ${join(dir, 'out')}`,
      'config:',
      '  DATABASE_URL: postgres://atrium:pw@db.internal:5432/atrium',
    ].join('\n') + '\n',
  )
  return loadContext({ answersPath: answers })
}

t.test(
  "helm: helm uninstall --wait; with --delete-data and the name, the installer's Secret and the release's PVCs",
  async (t) => {
    const ctx = helmSite(t)
    const kept = cluster(t, true)
    const r = await uninstallCommand(ctx, { yes: true, runner: kept.runner })
    t.match(r, { exitCode: EXIT.ok, site: 'prod', deleted: [] })
    t.same(kept.calls(), ['helm status prod --namespace ai', 'helm uninstall prod --namespace ai --wait --timeout 10m'])
    t.match(r.kept, [
      "the Secret prod-installer-secrets in ai (helm.sh/resource-policy: keep): the site's secret settings, ENCRYPTION_MASTER_KEY among them",
      /PersistentVolumeClaims/,
      'the namespace ai',
      /^the configuration in .*\/out \(values\.yaml/,
      "the site's own PostgreSQL (db.internal) and all they hold: uninstall never touches them",
    ])
    t.match(r.summary[0], 'The release prod is uninstalled from ai.')

    t.same(
      await problemsOf(
        uninstallCommand(ctx, { yes: true, deleteData: true, confirmDelete: 'atrium', runner: kept.runner }),
      ),
      ['"atrium" is not the site\'s name, prod: nothing was removed'],
    )
    t.equal(kept.calls().length, 3, 'only helm status ran before the refusal')

    // A release uninstalled before: only the data is left to delete.
    const gone = cluster(t, false)
    const d = await uninstallCommand(ctx, { yes: true, deleteData: true, confirmDelete: 'prod', runner: gone.runner })
    t.equal(d.exitCode, EXIT.ok, d.error ?? '')
    t.same(gone.calls(), [
      'helm status prod --namespace ai',
      'kubectl delete secret prod-installer-secrets --namespace ai --ignore-not-found',
      'kubectl delete pvc --namespace ai --selector app.kubernetes.io/instance=prod --ignore-not-found',
    ])
    t.same(d.deleted, ['the Secret prod-installer-secrets in ai', 'the PersistentVolumeClaims of prod in ai, if any'])
  },
)

t.test('uninstall needs the answers and --yes, as every command that changes a site does', async (t) => {
  const none = await installer(['uninstall', '--json'])
  t.equal(none.code, EXIT.badInput)
  t.match(JSON.parse(none.stdout).problems, [/^uninstall needs --answers FILE/])
  const ctx = helmSite(t)
  const noYes = await installer(['uninstall', '--answers', join(ctx.baseDir, 'answers.yaml'), '--json'])
  t.equal(noYes.code, EXIT.badInput)
  t.match(JSON.parse(noYes.stdout).problems, [/add --yes/])
})
