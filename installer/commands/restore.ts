// restore: put a backup back, as two step lists. The checks have no impact yet: a refused archive or
// target leaves everything as it was. Then the changes: the server stopped, the data replaced, the
// configuration written with the backup's master key, and the site deployed with the install's own
// steps, without the first tenant (the backup has it) and without an upgrade's (the data is the backup's).
import { SiteDataError } from '../backup/backup.js'
import { archivedMasterKey, masterKeyProblem, restoreState } from '../backup/configuration.js'
import { RestoreRefused, applyRestore, prepareRestore, type PreparedRestore } from '../backup/restore.js'
import type { SiteServices } from '../backup/site.js'
import { composeArgs } from '../core/compose-bundle.js'
import { configure } from '../core/configure.js'
import type { Resolved } from '../core/context.js'
import { EXIT, type BackupSummary, type RestoreReport, type StepReport } from '../core/report.js'
import { run, type Command as Program, type Runner } from '../core/run.js'
import { runSteps, type Step } from '../core/steps.js'
import { chartFullname, deploy, failedStep } from '../deploy/deploy.js'
import { REDEPLOY_STEPS, runInstall } from '../deploy/install.js'
import { siteCommand, stepReport, type FlagValues, type Hooks } from './command.js'
import type { Progress } from '../ui/output.js'
import { siteDataInput, summaryOf } from './backup.js'
import { booleanFlag, dryRun, passphraseFile, site, stringFlag, yes } from './flags.js'

const flags = {
  ...site,
  input: stringFlag('FILE', 'restore: the backup archive'),
  passphraseFile,
  force: booleanFlag('restore: delete what the target database and buckets hold first'),
  yes,
  dryRun,
}

export type RestoreOptions = FlagValues<typeof flags> & Hooks

/** What the restore's steps share as they go. */
interface RestoreState {
  ctx: Resolved
  o: RestoreOptions
  progress: Progress
  runner: Runner
  services: SiteServices
  passphrase: string
  path: string
  prepared?: PreparedRestore
  key?: string
  /** The context with the backup's master key, and the settings written with it. */
  keyed?: Resolved
  values?: Record<string, string>
  /** The data is the backup's now. */
  restored: boolean
  steps: StepReport[]
  summary: string[]
  url: string | null
}

type RestoreStep = Step<RestoreState, 'verify' | 'stop' | 'data' | 'configuration' | 'deploy'>

/**
 * The site's server stopped while its data is replaced (it would write into a half-restored site); on Kubernetes, until
 * its pods are gone.
 */
function stopCommands(ctx: Resolved): Program[] {
  if (ctx.files.target === 'compose')
    return [
      {
        file: 'docker',
        args: [...composeArgs(ctx.answers, ctx.files.env), 'stop', 'server'],
        title: 'Stop the server while the data is restored',
      },
    ]
  const ns = ['--namespace', ctx.answers.namespace]
  return [
    {
      file: 'kubectl',
      args: [...ns, 'scale', `deployment/${chartFullname(ctx.answers.release)}`, '--replicas=0'],
      title: 'Scale the server to 0 while the data is restored',
    },
    {
      file: 'kubectl',
      args: [
        ...ns,
        'wait',
        '--for=delete',
        'pod',
        '--selector',
        `app.kubernetes.io/instance=${ctx.answers.release},app.kubernetes.io/component=server`,
        '--timeout=180s',
      ],
      title: "Wait until the server's pods are gone",
      timeoutMs: 200_000,
    },
  ]
}

/** Every checksum, the passphrase, the versions and whether the target can take it. */
const verify: RestoreStep = {
  name: 'verify',
  stage: 'verify',
  run: async (s) => {
    try {
      s.prepared = await prepareRestore(s.services, s.path, {
        passphrase: s.passphrase,
        force: s.o.force,
        release: s.o.release,
      })
      return null
    } catch (err) {
      if (!(err instanceof RestoreRefused || err instanceof SiteDataError)) throw err
      return `Not restored: ${err.message}`
    }
  },
}

/** The backup's master key must be the one the site's configuration has, if it has one. */
const masterKey: RestoreStep = {
  name: 'master-key',
  stage: 'verify',
  run: (s) => {
    s.key = archivedMasterKey(s.prepared!.configuration)
    const problem = masterKeyProblem(s.ctx, s.key)
    return problem ? `Not restored: ${problem}. Nothing was changed.` : null
  },
}

const stopServer: RestoreStep = {
  name: 'stop-server',
  stage: 'stop',
  when: (s) => Boolean(s.ctx.existing),
  run: async (s) => {
    const stopped = await deploy(stopCommands(s.ctx), s.runner, s.progress.step)
    s.steps.push(...stopped.steps.map(stepReport))
    return stopped.ok
      ? null
      : `Not restored: the server could not be stopped, so nothing was changed: ${failedStep(stopped.steps, 2000)}`
  },
}

const data: RestoreStep = {
  name: 'data',
  stage: 'data',
  run: async (s) => {
    const note = s.progress.note
    try {
      await applyRestore(s.services, s.path, s.prepared!, {
        onProgress: note
          ? (p) =>
              p.phase !== 'objects' &&
              note(
                `  ${p.phase === 'database' ? `objects: ${p.objects} restored; the database next` : 'data restored'}`,
              )
          : undefined,
      })
    } catch (err) {
      return `The restore failed; the target is left empty: ${(err as Error).message}`
    }
    s.restored = true
    return null
  },
}

/**
 * The backup's master key into the configuration (configure never changes an existing one, so it
 * goes in as the one that exists), which also writes this release's version: a rollback runs it.
 */
const configuration: RestoreStep = {
  name: 'configuration',
  stage: 'configuration',
  run: (s) => {
    s.keyed = { ...s.ctx, existing: { ...(s.ctx.existing ?? {}), ENCRYPTION_MASTER_KEY: s.key! } }
    const written = configure(s.keyed, { dryRun: false })
    if (!written.written)
      return `The data is restored, but the configuration could not be written: ${written.plan.problems.join('; ')}`
    restoreState(s.ctx, s.prepared!.configuration)
    s.values = written.plan.values
    return null
  },
}

/** The install's deploy steps: the migrations run up and the server starts. */
const redeploy: RestoreStep = {
  name: 'deploy',
  stage: 'deploy',
  run: async (s) => {
    const deployed = await runInstall(
      s.keyed!,
      s.values!,
      { runner: s.runner, readyTimeoutMs: s.o.readyTimeoutMs },
      s.progress.step,
      REDEPLOY_STEPS,
    )
    s.steps.push(...deployed.steps.map(stepReport))
    const m = summaryOf(s.prepared!.manifest)
    s.summary = [
      `Restored ${s.path}: ${m.rows} rows in ${m.tables} tables and ${m.objects} objects, from Atrium ${m.atriumVersion} (schema ${m.schemaVersion}).`,
    ]
    if (!deployed.ok) return `The data is restored, but ${deployed.error}`
    s.url = deployed.url
    s.summary.push(`Atrium is ready at ${deployed.url}.`)
    return null
  },
}

/** No impact yet: each may refuse, and nothing has changed when one does. */
export const RESTORE_CHECKS: readonly RestoreStep[] = [verify, masterKey]
/** Start impacting things. */
export const RESTORE_CHANGES: readonly RestoreStep[] = [stopServer, data, configuration, redeploy]

/**
 * Checks the archive and the target (nothing changes when either is refused), then, unless a dry run, restores and
 * deploys.
 */
export async function restoreCommand(
  ctx: Resolved,
  o: RestoreOptions = {},
  progress: Progress = {},
): Promise<RestoreReport> {
  const input = siteDataInput(ctx, o, 'restore')
  const report: RestoreReport = {
    command: 'restore',
    exitCode: EXIT.ok,
    input: input.path,
    backup: null,
    refused: false,
    restored: false,
    steps: [],
    ready: false,
    url: null,
    error: null,
    summary: [],
    record: [],
  }
  const s: RestoreState = {
    ctx,
    o,
    progress,
    runner: o.runner ?? run,
    ...input,
    restored: false,
    steps: [],
    summary: [],
    url: null,
  }
  const checked = await runSteps(RESTORE_CHECKS, s)
  const record = checked.record
  if (!checked.ok) return { ...report, exitCode: EXIT.error, refused: true, error: checked.error, record }
  const backup: BackupSummary = summaryOf(s.prepared!.manifest)
  if (o.dryRun) {
    const inUse = s.prepared!.inUse.relations || s.prepared!.inUse.stores.length
    const force = inUse ? ' (with --force, which deletes what it holds)' : ''
    const verified = `${s.path} verified: every checksum, the passphrase and the versions; the target can take it${force}. Dry run: nothing was changed.`
    return { ...report, backup, summary: [verified], record }
  }
  const r = await runSteps(RESTORE_CHANGES, s)
  const done = {
    ...report,
    backup,
    steps: s.steps,
    restored: s.restored,
    summary: s.summary,
    record: [...record, ...r.record],
  }
  return r.ok ? { ...done, ready: true, url: s.url } : { ...done, exitCode: EXIT.error, error: r.error }
}

export const restore = siteCommand({
  name: 'restore',
  summary:
    'put a backup back (--input FILE): checks every checksum, the passphrase and the\nversions first, needs an empty site (or --force), then migrates and starts Atrium',
  flags,
  needs: { answers: 'the site to restore into', yes: true },
  run: restoreCommand,
})
