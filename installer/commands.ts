// The installer's commands. Each receives the context resolved once (core/context.ts) and its
// options, does its work through core/ and deploy/, and returns a report (core/report.ts): plain
// data that ui/output.tsx shows as text or as JSON. Nothing here prints.
import { mkdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { IMAGES, imageRef } from '../config/images.js'
import { overallStatus } from './core/checks/check.js'
import { configure, replayCommand, type ConfigureResult } from './core/configure.js'
import { preflightValues, siteConfig, type Resolved } from './core/context.js'
import { runPreflight } from './core/preflight.js'
import {
  EXIT,
  exitFor,
  type BackupReport,
  type BackupSummary,
  type RestoreReport,
  type ConfigureReport,
  type ImagesReport,
  type InstallReport,
  type KitImage,
  type PlannedCommand,
  type PreflightReport,
  type StepReport,
  type SupportBundleReport,
} from './core/report.js'
import { writeSupportBundle } from './core/support-bundle.js'
import { registryProblem } from '../config/images.js'
import { KIT, loadCommands, newFolderProblem, openKit, platformProblem, pushCommands, pushedDigests, recordImages, saveCommands, selectImages, writeSums, type KitTrust } from './deploy/airgap.js'
import { chartFullname, deploy, failedStep, kitRegistryProblem, type DeployStep } from './deploy/deploy.js'
import { installPlan, runInstall, runningVersion, summaryLines } from './deploy/install.js'
import { run, type Command, type Runner } from './core/run.js'
import { VERSION } from '../common/version.js'
import { SiteDataError, backupSite } from './backup/backup.js'
import { archivedMasterKey, masterKeyProblem, restoreState } from './backup/configuration.js'
import type { BackupManifest } from './backup/manifest.js'
import { RestoreRefused, applyRestore, prepareRestore } from './backup/restore.js'
import { readPassphrase } from './backup/seal.js'
import { siteServices, type SiteServices } from './backup/site.js'
import { composeArgs } from './core/compose-bundle.js'

/** Input a command cannot work with (exit 2): every problem, said to the admin as it is. */
export class BadInput extends Error {
  readonly problems: string[]

  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : [...problems]
    super(list.join('\n'))
    this.problems = list
  }
}

export interface CommandOptions {
  /** Warnings count as failures (exit 4). */
  strict?: boolean
  /** Configure although checks failed. */
  ignoreFailed?: boolean
  dryRun?: boolean
  /** The air-gap kit (its folder or its images tarball): loaded before a compose deploy, or by images load/push. */
  images?: string
  /** Accept a kit the admin saved (`images save`), which has no vendor signature. */
  allowUnsigned?: boolean
  /** images save: the platform to pull (os/architecture). */
  platform?: string
  /** install: let one Compose upgrade skip versions. */
  allowSkip?: boolean
  /** The keys a kit's signature may be made with (tests); the vendor's otherwise. */
  trustedKeys?: KitTrust['keys']
  /** The private registry that holds the images (helm; images push). */
  registry?: string
  /** Where support-bundle or images save writes. */
  output?: string
  /** images save and push: only these images (comma-separated names from images list). */
  only?: string
  /** The command runner (core/run.ts unless a test gives another). */
  runner?: Runner
  /** backup, restore and an upgrade's backup: the file holding the backup's passphrase. */
  passphraseFile?: string
  /** restore: the backup archive. */
  input?: string
  /** restore: delete what the target holds first. */
  force?: boolean
  /** install: upgrade without the backup it takes first. */
  skipBackup?: boolean
  /** How long /readyz may take after a deploy (tests). */
  readyTimeoutMs?: number
  /** The release a restore compares an archive with (tests); this installer's otherwise. */
  release?: { version: string; schema: number }
}

/** What a long command reports while it works; the JSON output ignores it and prints the end. */
export interface Progress {
  /** install: the configuration is done (written, or stopped), before the deploy starts. */
  configured?: (r: ConfigureReport) => void
  /** A deploy step as it starts and as it ends. */
  step?: (s: DeployStep) => void
  /** A line of progress (a backup's objects copied so far). */
  note?: (line: string) => void
}

const planned = (c: Command): PlannedCommand => ({ title: c.title, command: [c.file, ...c.args] })

const stepReport = (s: DeployStep): StepReport => ({
  title: s.command.title,
  command: [s.command.file, ...s.command.args].join(' '),
  exitCode: s.result?.exitCode ?? null,
  skipped: Boolean(s.skipped),
})

export async function preflightCommand(ctx: Resolved, o: CommandOptions = {}): Promise<PreflightReport> {
  const checks = await runPreflight(ctx.answers, preflightValues(ctx), { runner: o.runner ?? run })
  return { command: 'preflight', exitCode: exitFor(checks, Boolean(o.strict)), status: overallStatus(checks), checks }
}

/** The preflight, then the configuration planned and (unless a dry run) written; the plan is kept for install. */
async function configureStep(ctx: Resolved, o: CommandOptions): Promise<{ report: ConfigureReport; result: ConfigureResult | null }> {
  const checks = await runPreflight(ctx.answers, preflightValues(ctx), { runner: o.runner ?? run })
  const code = exitFor(checks, Boolean(o.strict))
  const report: ConfigureReport = {
    command: 'configure',
    exitCode: code,
    status: overallStatus(checks),
    checks,
    stopped: 'checks',
    checksIgnored: false,
    problems: [],
    changes: [],
    generated: [],
    files: [],
    written: false,
    replay: null,
  }
  if (code !== EXIT.ok && !o.ignoreFailed) return { report, result: null }
  const r = configure(ctx, { dryRun: Boolean(o.dryRun) })
  const problems = r.plan.problems.length > 0
  return {
    report: {
      ...report,
      exitCode: problems ? EXIT.badInput : EXIT.ok,
      stopped: problems ? 'problems' : null,
      checksIgnored: code !== EXIT.ok,
      problems: r.plan.problems,
      changes: r.plan.changes,
      generated: r.plan.generated,
      files: r.files,
      written: r.written,
      replay: replayCommand(r.answersPath),
    },
    result: r,
  }
}

export async function configureCommand(ctx: Resolved, o: CommandOptions = {}): Promise<ConfigureReport> {
  return (await configureStep(ctx, o)).report
}

/** configure, then the deploy commands, the wait for /readyz and the first tenant. A dry run lists the commands. */
export async function installCommand(ctx: Resolved, o: CommandOptions = {}, progress: Progress = {}): Promise<InstallReport> {
  // Refused before anything is configured (runInstall refuses it too, for the interactive installer).
  const noRegistry = kitRegistryProblem(ctx.answers, { kit: o.images, registry: o.registry })
  if (noRegistry) throw new BadInput(noRegistry)
  // An unreadable passphrase file is bad input before anything is written, not after.
  const backup = { skipBackup: o.skipBackup, backupPassphrase: o.passphraseFile ? passphraseOf(o.passphraseFile) : undefined }
  const { report: configured, result } = await configureStep(ctx, o)
  progress.configured?.(configured)
  const report: InstallReport = {
    ...configured,
    command: 'install',
    deploy: [],
    steps: [],
    stage: null,
    deployed: false,
    ready: false,
    url: null,
    firstAdmin: null,
    error: null,
    summary: [],
    upgrade: null,
  }
  if (configured.stopped || !result) return report
  const options = { kit: o.images, registry: o.registry, trust: trustOf(o), allowSkip: o.allowSkip }
  if (o.dryRun) return { ...report, deploy: installPlan(ctx, options).map(planned) }
  const r = await runInstall(ctx, result.plan.values, { ...options, ...backup, runner: o.runner, readyTimeoutMs: o.readyTimeoutMs }, progress.step)
  return {
    ...report,
    exitCode: r.ok ? EXIT.ok : EXIT.error,
    steps: r.steps.map(stepReport),
    stage: r.stage,
    deployed: r.stage !== 'bundle' && r.stage !== 'deploy',
    ready: r.ok || r.stage === 'tenant',
    url: r.url,
    firstAdmin: r.created ?? r.existing,
    error: r.error ?? null,
    summary: summaryLines(ctx.answers, r),
    upgrade: r.upgrade ?? null,
  }
}

/** The passphrase in the file, or bad input saying why it cannot serve. */
function passphraseOf(path: string): string {
  const read = readPassphrase(path)
  if ('problem' in read) throw new BadInput(read.problem)
  return read.passphrase
}

/** What backup and restore need from the command line and the site, or bad input naming all that is missing. */
function siteDataInput(ctx: Resolved, o: CommandOptions, command: 'backup' | 'restore'): { services: SiteServices; passphrase: string; path: string } {
  const path = command === 'backup' ? o.output : o.input
  const problems = [
    !path && (command === 'backup' ? 'backup needs --output FILE (the archive to write, e.g. atrium-backup.tar)' : 'restore needs --input FILE (the archive backup wrote)'),
    !o.passphraseFile && `${command} needs --passphrase-file FILE (the passphrase that ${command === 'backup' ? 'encrypts' : 'encrypted'} the configuration part, which holds ENCRYPTION_MASTER_KEY)`,
  ].filter((p): p is string => Boolean(p))
  if (problems.length) throw new BadInput(problems)
  const passphrase = passphraseOf(o.passphraseFile!)
  const found = siteServices(ctx)
  if ('problems' in found) throw new BadInput(found.problems)
  return { services: found.services, passphrase, path: path! }
}

/** The manifest in the few numbers an admin checks. */
const summaryOf = (m: BackupManifest): BackupSummary => ({
  atriumVersion: m.atriumVersion,
  schemaVersion: m.schemaVersion,
  createdAt: m.createdAt,
  tables: Object.keys(m.database.tables).length,
  rows: Object.values(m.database.tables).reduce((a, b) => a + b, 0),
  databaseBytes: m.database.bytes,
  objects: m.objects.count,
  objectBytes: m.objects.bytes,
})

/** One archive of the whole site: database, objects, configuration (encrypted). */
export async function backupCommand(ctx: Resolved, o: CommandOptions = {}, progress: Progress = {}): Promise<BackupReport> {
  const { services, passphrase, path } = siteDataInput(ctx, o, 'backup')
  const report: BackupReport = { command: 'backup', exitCode: EXIT.ok, path, bytes: 0, sha256: '', backup: null, error: null }
  try {
    // The version the site runs is the one its data belongs to (a restore with that release's installer must accept it).
    const version = (await runningVersion(ctx, siteConfig(ctx), o.runner ?? run)) ?? (ctx.existing?.ATRIUM_VERSION || VERSION)
    const r = await backupSite(ctx, services, { output: path, passphrase, version, say: progress.note })
    return { ...report, bytes: r.bytes, sha256: r.sha256, backup: summaryOf(r.manifest) }
  } catch (err) {
    return { ...report, exitCode: EXIT.error, error: `No backup was written: ${(err as Error).message}` }
  }
}

/** The site's server stopped while its data is replaced (it would write into a half-restored site); on Kubernetes, until its pods are gone. */
function stopCommands(ctx: Resolved): Command[] {
  if (ctx.files.target === 'compose') return [{ file: 'docker', args: [...composeArgs(ctx.answers, ctx.files.env), 'stop', 'server'], title: 'Stop the server while the data is restored' }]
  const ns = ['--namespace', ctx.answers.namespace]
  return [
    { file: 'kubectl', args: [...ns, 'scale', `deployment/${chartFullname(ctx.answers.release)}`, '--replicas=0'], title: 'Scale the server to 0 while the data is restored' },
    {
      file: 'kubectl',
      args: [...ns, 'wait', '--for=delete', 'pod', '--selector', `app.kubernetes.io/instance=${ctx.answers.release},app.kubernetes.io/component=server`, '--timeout=180s'],
      title: "Wait until the server's pods are gone",
      timeoutMs: 200_000,
    },
  ]
}

/** Checks the archive and the target (nothing changes when either is refused), stops the server, restores, then deploys: the migrations run up and the server starts. */
export async function restoreCommand(ctx: Resolved, o: CommandOptions = {}, progress: Progress = {}): Promise<RestoreReport> {
  const { services, passphrase, path } = siteDataInput(ctx, o, 'restore')
  const report: RestoreReport = { command: 'restore', exitCode: EXIT.ok, input: path, backup: null, refused: false, restored: false, steps: [], ready: false, url: null, error: null, summary: [] }
  const refused = (err: unknown): RestoreReport => ({ ...report, exitCode: EXIT.error, refused: true, error: `Not restored: ${(err as Error).message}` })
  let prepared
  try {
    prepared = await prepareRestore(services, path, { passphrase, force: o.force, release: o.release })
  } catch (err) {
    if (err instanceof RestoreRefused || err instanceof SiteDataError) return refused(err)
    throw err
  }
  const key = archivedMasterKey(prepared.configuration)
  const keyProblem = masterKeyProblem(ctx, key)
  if (keyProblem) return refused(new Error(`${keyProblem}. Nothing was changed.`))
  const summary = summaryOf(prepared.manifest)
  if (o.dryRun)
    return {
      ...report,
      backup: summary,
      summary: [
        `${path} verified: every checksum, the passphrase and the versions; the target can take it${prepared.inUse.relations || prepared.inUse.stores.length ? ' (with --force, which deletes what it holds)' : ''}. Dry run: nothing was changed.`,
      ],
    }
  const runner = o.runner ?? run
  const steps: StepReport[] = []
  if (ctx.existing) {
    const stopped = await deploy(stopCommands(ctx), runner, progress.step)
    steps.push(...stopped.steps.map(stepReport))
    if (!stopped.ok)
      return { ...report, backup: summary, steps, exitCode: EXIT.error, error: `Not restored: the server could not be stopped, so nothing was changed: ${failedStep(stopped.steps, 2000)}` }
  }
  try {
    await applyRestore(services, path, prepared, {
      onProgress: progress.note ? (p) => p.phase !== 'objects' && progress.note!(`  ${p.phase === 'database' ? `objects: ${p.objects} restored; the database next` : 'data restored'}`) : undefined,
    })
  } catch (err) {
    return { ...report, backup: summary, steps, exitCode: EXIT.error, error: `The restore failed; the target is left empty: ${(err as Error).message}` }
  }
  // The backup's master key into the configuration (configure never changes an existing one, so it
  // goes in as the one that exists), which also writes this release's version: a rollback runs it.
  const keyed: Resolved = { ...ctx, existing: { ...(ctx.existing ?? {}), ENCRYPTION_MASTER_KEY: key } }
  const written = configure(keyed, { dryRun: false })
  if (!written.written)
    return { ...report, backup: summary, steps, restored: true, exitCode: EXIT.error, error: `The data is restored, but the configuration could not be written: ${written.plan.problems.join('; ')}` }
  restoreState(ctx, prepared.configuration)
  // The first tenant is the backup's: the deploy must not make another.
  const deployed = await runInstall(
    { ...keyed, answers: { ...ctx.answers, adminEmail: '' } },
    written.plan.values,
    { runner, allowSkip: true, skipBackup: true, readyTimeoutMs: o.readyTimeoutMs },
    progress.step,
  )
  const all = [...steps, ...deployed.steps.map(stepReport)]
  const lines = [`Restored ${path}: ${summary.rows} rows in ${summary.tables} tables and ${summary.objects} objects, from Atrium ${summary.atriumVersion} (schema ${summary.schemaVersion}).`]
  if (!deployed.ok) return { ...report, backup: summary, steps: all, restored: true, exitCode: EXIT.error, error: `The data is restored, but ${deployed.error}`, summary: lines }
  return { ...report, backup: summary, steps: all, restored: true, ready: true, url: deployed.url, summary: [...lines, `Atrium is ready at ${deployed.url}.`] }
}

export async function supportBundleCommand(ctx: Resolved, o: CommandOptions = {}): Promise<SupportBundleReport> {
  const runner = o.runner ?? run
  // The site as it is: the written configuration is what runs, so it is what support needs to see.
  const config = siteConfig(ctx)
  const checks = await runPreflight(ctx.answers, config, { runner })
  const path = o.output ?? `atrium-support-${new Date().toISOString().replace(/[:.]/g, '-')}.zip`
  const r = await writeSupportBundle(path, { answers: ctx.answers, config, checks, runner, envFile: ctx.files.target === 'compose' ? ctx.files.env : '' })
  return { command: 'support-bundle', exitCode: EXIT.ok, path, size: r.size, sha256: r.sha256 }
}

const trustOf = (o: CommandOptions): KitTrust => ({ keys: o.trustedKeys, allowUnsigned: o.allowUnsigned })

/** The commands of an images action other than list (load and push with the pins of the kit opened); bad input when its flags are missing. */
function imageCommands(action: string, o: CommandOptions, pins?: readonly KitImage[]): Command[] {
  const { images, problem } = selectImages(o.only)
  if (problem) throw new BadInput(problem)
  if (action === 'save') {
    const problems = [!o.output && 'images save needs --output DIR (the kit folder to write)', o.platform && platformProblem(o.platform)].filter((p): p is string => Boolean(p))
    if (problems.length) throw new BadInput(problems)
    const notNew = newFolderProblem(o.output!)
    if (notNew) throw new BadInput(notNew)
    return saveCommands(o.output!, images, o.platform)
  }
  if (action === 'load') {
    if (!o.images) throw new BadInput('images load needs --images DIR (the air-gap kit, from the vendor or images save)')
    return loadCommands(o.images, { images: pins })
  }
  if (action === 'push') {
    if (!o.registry) throw new BadInput('images push needs --registry HOST[:PORT][/PATH]')
    const problem = registryProblem(o.registry)
    if (problem) throw new BadInput(problem)
    return pushCommands(o.registry, o.images, images, pins)
  }
  throw new BadInput(`unknown images command ${action} (list, save, load, push)`)
}

/** The air-gap kit: list, save (connected side), load or push (air-gapped side) every image. */
export async function imagesCommand(action = 'list', o: CommandOptions = {}, progress: Progress = {}): Promise<ImagesReport> {
  const report: ImagesReport = { command: 'images', exitCode: EXIT.ok, action: 'list', images: [], commands: [], steps: [], ok: true, error: null, kit: null, pushed: [] }
  if (action === 'list') return { ...report, images: IMAGES.map((i) => ({ ...i, ref: imageRef(i) })) }
  const planned0 = imageCommands(action, o)
  const named = { ...report, action: action as ImagesReport['action'] }
  if (o.dryRun) return { ...named, commands: planned0.map(planned) }
  const runner = o.runner ?? run
  // A kit that is not the vendor's, or damaged, is refused before anything is loaded from it; what
  // is loaded is then checked against the pins read in that check, not read again.
  const opened = action !== 'save' && o.images ? await openKit(o.images, trustOf(o)) : null
  if (opened?.problem) return { ...named, exitCode: EXIT.error, ok: false, error: opened.problem }
  const commands = opened?.kit ? imageCommands(action, o, opened.kit.images) : planned0
  if (action === 'save') mkdirSync(o.output!, { recursive: true })
  const r = await deploy(commands, runner, progress.step)
  if (!r.ok) return { ...named, exitCode: EXIT.error, ok: false, steps: r.steps.map(stepReport), error: `Failed at: ${failedStep(r.steps, 2000)}` }
  const steps = r.steps.map(stepReport)
  if (action === 'save') {
    const { images } = selectImages(o.only)
    const manifest = await recordImages(o.output!, images, runner)
    await writeSums(o.output!)
    const path = join(resolve(o.output!), KIT.images)
    return { ...named, steps, kit: { dir: resolve(o.output!), path, bytes: statSync(path).size, images: manifest.images, signedBy: null, fingerprint: null } }
  }
  const pushed = action === 'push' ? await pushedDigests(o.registry!, selectImages(o.only).images, runner) : []
  return { ...named, steps, kit: opened?.kit ?? null, pushed }
}
