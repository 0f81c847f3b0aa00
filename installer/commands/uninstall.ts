// uninstall: the site's containers and networks go (compose: `docker compose down`; helm: `helm
// uninstall --wait`), and its data stays, so `install` with the same answers brings it back.
// --delete-data also deletes what holds the data the installer made, only once the site's name is
// typed back: compose, the site's volumes and their folders under the data path; helm, the
// installer's Secret (helm.sh/resource-policy keeps it past the release) and the release's PVCs. A
// site's own PostgreSQL, Redis and S3 are never touched: that data is theirs to keep or drop.
import { existsSync, rmSync } from 'node:fs'
import { createInterface } from 'node:readline/promises'
import { gatherVolumes } from '../core/checks/volumes.js'
import { composeArgs, hostOf, usesBundled } from '../core/compose-bundle.js'
import { siteConfig, type Resolved } from '../core/context.js'
import { statePath } from '../core/first-admin.js'
import { secretName } from '../core/helm-values.js'
import { EXIT, type UninstallReport } from '../core/report.js'
import { run, type Command as Program, type Runner } from '../core/run.js'
import { siteVolumes } from '../core/site.js'
import { deploy, failedStep } from '../deploy/deploy.js'
import type { Progress } from '../ui/output.js'
import { BadInput, planned, siteCommand, stepReport, type FlagValues, type Hooks } from './command.js'
import { booleanFlag, dryRun, site, stringFlag, yes } from './flags.js'

const flags = {
  ...site,
  yes,
  dryRun,
  deleteData: booleanFlag(
    "uninstall: also delete the site's data (compose: its volumes and their folders;\nhelm: the installer's Secret and the release's PVCs) once its name is typed back",
  ),
  confirmDelete: stringFlag('NAME', "uninstall --delete-data without a terminal: the site's name, typed back"),
}

export type UninstallOptions = FlagValues<typeof flags> & Hooks

/** What an uninstall runs, deletes and leaves, decided before anything changes. */
interface Plan {
  commands: Program[]
  /** Removed by this process once the commands have run: folders under the data path, state.json. */
  paths: string[]
  deleted: string[]
  kept: string[]
}

/** The site's name: what its Compose project, or its Helm release, is called; what --delete-data wants typed back. */
const siteName = (ctx: Resolved) => (ctx.files.target === 'compose' ? ctx.answers.site : ctx.answers.release)

/** The services a site runs itself, each with its host: their data lives there, outside anything uninstall touches. */
function ownServices(ctx: Resolved): string[] {
  const config = siteConfig(ctx)
  const names = { DATABASE_URL: 'PostgreSQL', REDIS_URL: 'Redis', R2_ENDPOINT: 'S3' } as const
  const own = Object.entries(names)
    .filter(([setting]) => !usesBundled(config[setting]))
    .map(([setting, name]) => `${name} (${hostOf(config[setting])})`)
  return own.length ? [`the site's own ${own.join(', ')} and all they hold: uninstall never touches them`] : []
}

/** An uninstall that deletes nothing: the commands, and everything left where it is. */
const keeping = (commands: Program[], kept: string[]): Plan => ({ commands, paths: [], deleted: [], kept })

async function composePlan(ctx: Resolved, deleteData: boolean, runner: Runner): Promise<Plan> {
  if (ctx.files.target !== 'compose') throw new Error('not a Compose site')
  if (!ctx.existing)
    throw new BadInput(
      `uninstall: no site is configured at ${ctx.files.env} (the answers' outputDir): nothing to uninstall there`,
    )
  const { answers, files } = ctx
  const config = siteConfig(ctx)
  const volumes = siteVolumes(answers)
  // --volumes removes only the anonymous volumes Docker gives a container for the image's VOLUME (the migration
  // container's, which holds nothing); Compose never removes an external volume, where the data is.
  const commands: Program[] = [
    {
      file: 'docker',
      args: [...composeArgs(answers, files.env), 'down', '--volumes', '--remove-orphans', '--timeout', '60'],
      title: `Remove the site ${answers.site}'s containers and network`,
      timeoutMs: 300_000,
    },
  ]
  const kept = [
    `the configuration in ${answers.outputDir} (.env, with ENCRYPTION_MASTER_KEY and the bundled services' passwords; answers.yaml) and the backups in ${answers.outputDir}/backups`,
    'the images in the engine (docker image ls)',
    ...ownServices(ctx),
  ]
  if (!deleteData)
    return keeping(commands, [
      `the volumes ${volumes.map((v) => v.name).join(', ')} and the data in their folders ${volumes.map((v) => v.device).join(', ')}`,
      ...kept,
      ...(existsSync(statePath(answers)) ? [`${statePath(answers)} (the first tenant's ids)`] : []),
    ])
  const deleted: string[] = []
  for (const f of await gatherVolumes(answers, runner)) {
    if (f.state === 'bound') {
      commands.push({
        file: 'docker',
        args: ['volume', 'rm', f.volume.name],
        title: `Delete the volume ${f.volume.name}`,
      })
      deleted.push(`the volume ${f.volume.name}`)
    } else if (f.state !== 'missing')
      kept.push(
        `the volume ${f.volume.name} (${f.detail}): not bound under this site's data path, so not this site's to delete`,
      )
  }
  const paths = volumes.map((v) => v.device).filter((p) => existsSync(p))
  deleted.push(...paths.map((p) => `the folder ${p}`))
  // The first tenant it records was in the bundled database: a later install onto the empty one must make it again.
  // A site's own PostgreSQL keeps it, and so does the record.
  const state = statePath(answers)
  if (existsSync(state) && usesBundled(config.DATABASE_URL)) {
    paths.push(state)
    deleted.push(`${state} (the first tenant it records was in the bundled database)`)
  } else if (existsSync(state)) kept.push(`${state} (the first tenant's ids: the tenant is in your PostgreSQL)`)
  return { commands, paths, deleted, kept }
}

async function helmPlan(ctx: Resolved, deleteData: boolean, runner: Runner): Promise<Plan> {
  const { namespace: ns, release, outputDir } = ctx.answers
  const status = await runner('helm', ['status', release, '--namespace', ns], { timeoutMs: 30_000 })
  // A release already uninstalled (a first run without --delete-data) leaves only the data to delete.
  const installed = status.exitCode === 0 || !/not found/i.test(status.stderr)
  const commands: Program[] = installed
    ? [
        {
          file: 'helm',
          args: ['uninstall', release, '--namespace', ns, '--wait', '--timeout', '10m'],
          title: `Uninstall the release ${release} from ${ns} (its pods, services and jobs go)`,
          timeoutMs: 11 * 60_000,
        },
      ]
    : []
  const kept = [
    `the namespace ${ns}`,
    `the configuration in ${outputDir} (values.yaml, secret.yaml with the secret settings, answers.yaml, state.json) and the backups in ${outputDir}/backups`,
    ...ownServices(ctx),
  ]
  const secret = secretName(release)
  if (!deleteData)
    return keeping(commands, [
      `the Secret ${secret} in ${ns} (helm.sh/resource-policy: keep): the site's secret settings, ENCRYPTION_MASTER_KEY among them`,
      `the release's PersistentVolumeClaims in ${ns}, if any`,
      ...kept,
    ])
  commands.push(
    {
      file: 'kubectl',
      args: ['delete', 'secret', secret, '--namespace', ns, '--ignore-not-found'],
      title: `Delete the Secret ${secret} (the site's secret settings, ENCRYPTION_MASTER_KEY among them)`,
    },
    {
      file: 'kubectl',
      args: [
        'delete',
        'pvc',
        '--namespace',
        ns,
        '--selector',
        `app.kubernetes.io/instance=${release}`,
        '--ignore-not-found',
      ],
      title: `Delete the release's PersistentVolumeClaims in ${ns}`,
    },
  )
  return {
    commands,
    paths: [],
    deleted: [`the Secret ${secret} in ${ns}`, `the PersistentVolumeClaims of ${release} in ${ns}, if any`],
    kept,
  }
}

/**
 * --delete-data goes on only with the site's name typed back: --confirm-delete, or at the prompt in a terminal. Bad
 * input (exit 2) otherwise, before anything is removed.
 */
async function confirmDeletion(name: string, plan: Plan, o: UninstallOptions): Promise<void> {
  let typed = o.confirmDelete
  if (typed === undefined && !o.json && process.stdin.isTTY && process.stderr.isTTY) {
    const prompt = createInterface({ input: process.stdin, output: process.stderr })
    try {
      typed = await prompt.question(
        [
          `--delete-data deletes, for good:`,
          ...plan.deleted.map((d) => `  ${d}`),
          `Type the site's name (${name}) to go on: `,
        ].join('\n'),
      )
    } finally {
      prompt.close()
    }
  }
  if (typed === undefined)
    throw new BadInput(
      `uninstall --delete-data deletes the site's data for good: type the site's name back with --confirm-delete NAME (nothing was removed)`,
    )
  if (typed.trim() !== name)
    throw new BadInput(`"${typed.trim()}" is not the site's name, ${name}: nothing was removed`)
}

export async function uninstallCommand(
  ctx: Resolved,
  o: UninstallOptions = {},
  progress: Progress = {},
): Promise<UninstallReport> {
  const runner = o.runner ?? run
  const name = siteName(ctx)
  const deleteData = Boolean(o.deleteData)
  const plan = await (ctx.files.target === 'compose' ? composePlan : helmPlan)(ctx, deleteData, runner)
  const report: UninstallReport = {
    command: 'uninstall',
    exitCode: EXIT.ok,
    site: name,
    dryRun: Boolean(o.dryRun),
    plan: plan.commands.map(planned),
    steps: [],
    deleted: plan.deleted,
    kept: plan.kept,
    error: null,
    summary: [],
  }
  const lists = (deleted: string) => [
    ...(plan.deleted.length ? [deleted, ...plan.deleted.map((d) => `  ${d}`)] : []),
    'Left in place:',
    ...plan.kept.map((k) => `  ${k}`),
  ]
  if (o.dryRun)
    return {
      ...report,
      plan: [...report.plan, ...plan.paths.map((p) => ({ title: `Delete ${p}`, command: ['rm', '-rf', p] }))],
      summary: [...lists('Would delete:'), 'Dry run: nothing was changed.'],
    }
  if (deleteData) await confirmDeletion(name, plan, o)
  const ran = await deploy(plan.commands, runner, progress.step)
  report.steps = ran.steps.map(stepReport)
  if (!ran.ok)
    return {
      ...report,
      exitCode: EXIT.error,
      deleted: [],
      error: `Uninstall stopped at: ${failedStep(ran.steps, 2000)}`,
      summary: ['The data was not deleted: the step before it failed.'],
    }
  for (const path of plan.paths) {
    try {
      rmSync(path, { recursive: true, force: true })
    } catch (err) {
      return {
        ...report,
        exitCode: EXIT.error,
        error: `Could not delete ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): delete it as root (rm -rf ${path})`,
      }
    }
  }
  const gone =
    ctx.files.target === 'compose'
      ? `The site ${name} is uninstalled: its containers and network are gone.`
      : `The release ${name} is uninstalled from ${ctx.answers.namespace}.`
  const back = deleteData ? [] : ['An install with the same answers brings the site back with its data.']
  return { ...report, summary: [gone, ...lists('Deleted:'), ...back] }
}

export const uninstall = siteCommand({
  name: 'uninstall',
  summary:
    "remove the site (compose: its containers and network; helm: the release); its data\nstays unless --delete-data and the site's name typed back (docs/installer.md)",
  flags,
  needs: { answers: 'the site to uninstall: its name, configuration and data path', yes: true },
  run: uninstallCommand,
})
