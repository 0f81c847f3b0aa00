// The whole install after the configuration is written: the deploy commands, the wait for /readyz
// and, once per site, the first tenant with its admin. Shared by `install --answers` and the
// interactive installer's deploy screen, so both do and say exactly the same.
import {
  adminCommand,
  bundleMissing,
  chartFullname,
  deploy,
  deployCommands,
  deployPhases,
  failedStep,
  secretApply,
  kitRegistryProblem,
  registryOf,
  waitReady,
  type DeployOptions,
  type DeployStep,
} from './deploy.js'
import { IMAGES } from '../../config/images.js'
import { openKit, pushCommands, pushedDigests } from './airgap.js'
import { run as realRun, type Command, type Runner } from '../core/run.js'
import type { Answers } from '../core/answers.js'
import { mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { VERSION } from '../../common/version.js'
import { backupSite } from '../backup/backup.js'
import { siteServices } from '../backup/site.js'
import { atriumOn } from '../core/checks/host.js'
import { composeArgs, prepareDataFolders, volumesInUse } from '../core/compose-bundle.js'
import { readEnvFile } from '../core/config-file.js'
import { upgradeProblem } from '../core/upgrade.js'
import { configFiles, type Resolved } from '../core/context.js'
import { installerCommand } from '../core/invocation.js'
import { publisherOf } from '../core/site.js'
import { volumesProblem } from './volumes.js'
import { runSteps, type Step, type StepRecord } from '../core/steps.js'
import { commitStaged, dropStaged, stagedFiles } from '../core/staged.js'
import type { ConfigFiles } from '../core/context.js'
import { existsSync } from 'node:fs'
import {
  createTenantArgs,
  newPassword,
  parseCreated,
  passwordInput,
  recordFirstAdmin,
  type Created,
  type FirstAdmin,
} from '../core/first-admin.js'

export interface InstallOptions extends DeployOptions {
  runner?: Runner
  /** How long /readyz may take after the deploy (default 5 minutes). */
  readyTimeoutMs?: number
  /** An upgrade backs the site up first, with this passphrase (--passphrase-file). */
  backupPassphrase?: string
  /** Upgrade without that backup (the admin has a fresh one). */
  skipBackup?: boolean
  /**
   * The configuration was just written staged (core/staged.ts): deployed from there, kept once it answers, dropped
   * when it fails. Not for a restore, which deploys the configuration it put back.
   */
  staged?: boolean
}

export interface InstallOutcome {
  ok: boolean
  /** Where it stopped (done when ok). */
  stage: 'bundle' | 'deploy' | 'ready' | 'tenant' | 'done'
  /** What went wrong, with the failing command's output. */
  error?: string
  url: string
  steps: DeployStep[]
  /** Made by this run: the password and key are shown once and kept nowhere. */
  created: Created | null
  /** Made by an earlier run. */
  existing: FirstAdmin | null
  /** An upgrade: the version it replaced and the backup taken first (null when skipped). */
  upgrade?: { from: string; backup: { path: string; sha256: string } | null }
  /** Each step run: its stage, outcome and time (core/steps.ts). */
  record?: StepRecord[]
}

/** Where the installer reaches the server: the published port (compose) or PUBLIC_URL (helm). */
const localUrl = (answers: Answers, values: Record<string, string>) =>
  answers.target === 'compose' ? `http://127.0.0.1:${values.PORT || 8080}` : (values.PUBLIC_URL ?? '')

/** The images a Helm release runs, which a Helm install from the kit pushes to the site's registry. */
const HELM_IMAGES = IMAGES.filter((i) => i.usedBy.includes('helm'))

/** Helm from the kit: its images pushed to the site's registry first (then pinned by digest there). */
const kitPush = (answers: Answers, o: DeployOptions): Command[] =>
  answers.target === 'helm' && o.kit
    ? pushCommands(registryOf(answers, o) || '<--registry>', o.kit, HELM_IMAGES, o.kitImages)
    : []

/**
 * The Atrium a Compose site runs now: the one answering on its port, else the image of its server
 * container (stopped, say); null on a first install.
 */
export async function runningVersion(
  ctx: Resolved,
  values: Record<string, string>,
  runner: Runner,
  o: DeployOptions = {},
): Promise<string | null> {
  if (ctx.files.target === 'helm') {
    // The release's Deployment carries its version, as the chart's own upgrade guard reads it.
    const label = await runner(
      'kubectl',
      [
        '--namespace',
        ctx.answers.namespace,
        'get',
        'deployment',
        chartFullname(ctx.answers.release),
        '--output',
        'jsonpath={.metadata.labels.app\\.kubernetes\\.io/version}',
      ],
      { timeoutMs: 30_000 },
    )
    return label.exitCode === 0 && /^v?\d+\.\d+\.\d+/.test(label.stdout.trim()) ? label.stdout.trim() : null
  }
  // The Atrium on the port is this site's only when its project publishes it: another site's is not upgraded.
  const port = Number(values.PORT || 8080)
  const live = await atriumOn(port)
  if (live && (await publisherOf(port, runner))?.project === ctx.answers.site) return live
  const ps = await runner(
    'docker',
    [...composeArgs(ctx.answers, ctx.files.env, o), 'ps', '--all', '--format', '{{.Image}}', 'server'],
    { timeoutMs: 30_000 },
  )
  const image = ps.exitCode === 0 ? ps.stdout.trim().split('\n')[0] : ''
  return image && /:[^:/]+$/.test(image) ? image.slice(image.lastIndexOf(':') + 1) : null
}

/**
 * The backup an upgrade takes first, into the output folder's backups/; or why there is none (nothing is deployed
 * then).
 */
async function backupBeforeUpgrade(
  ctx: Resolved,
  from: string,
  passphrase: string | undefined,
  onStep: (s: DeployStep) => void,
): Promise<{ backup: { path: string; sha256: string } } | { problem: string }> {
  if (!passphrase)
    return {
      problem: `this upgrades Atrium ${from}, and an upgrade backs the site up first: give --passphrase-file FILE (the backup's passphrase), or --skip-backup if you have a backup of this moment`,
    }
  const found = siteServices(ctx)
  if ('problems' in found)
    return { problem: `the backup before the upgrade cannot reach the site: ${found.problems.join('; ')}` }
  const path = join(
    ctx.answers.outputDir,
    'backups',
    `atrium-${from}-${new Date().toISOString().replace(/[:.]/g, '-')}.tar`,
  )
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const command: Command = {
    file: 'installer',
    args: ['backup', '--output', path],
    title: `Back the site up before the upgrade from ${from} (${path})`,
  }
  onStep({ command, result: null })
  try {
    const r = await backupSite(ctx, found.services, { output: path, passphrase, version: from })
    onStep({
      command,
      result: { command: command.title, exitCode: 0, stdout: '', stderr: '', notFound: false, timedOut: false },
    })
    return { backup: { path: r.path, sha256: r.sha256 } }
  } catch (err) {
    onStep({
      command,
      result: {
        command: command.title,
        exitCode: 1,
        stdout: '',
        stderr: (err as Error).message,
        notFound: false,
        timedOut: false,
      },
    })
    return { problem: `the backup before the upgrade failed, so nothing was changed: ${(err as Error).message}` }
  }
}

/** Every command an install runs, the first tenant's included (its password, made then, goes on its standard input). */
export function installPlan(ctx: Resolved, o: DeployOptions = {}): Command[] {
  const { answers, files } = ctx
  const tenant =
    answers.adminEmail && !ctx.firstAdmin
      ? [adminCommand(answers, files, createTenantArgs(answers), o, passwordInput('<generated>'))]
      : []
  const push = kitPush(answers, o)
  const pinned = push.length ? { ...o, digest: '<the digest the registry gives>' } : o
  return [...push, ...deployCommands(answers, files, pinned), ...tenant]
}

/** Pushes the kit's images (Helm) and returns the server's digest in the registry; the steps either way. */
async function pushKit(
  answers: Answers,
  o: DeployOptions,
  runner: Runner,
  onStep: (s: DeployStep) => void,
): Promise<{ ok: boolean; steps: DeployStep[]; digest?: string; problem?: string }> {
  const commands = kitPush(answers, o)
  if (!commands.length) return { ok: true, steps: [] }
  const pushed = await deploy(commands, runner, onStep)
  if (!pushed.ok) return pushed
  const registry = registryOf(answers, o)
  const server = (await pushedDigests(registry, HELM_IMAGES, runner)).find((d) => d.name === 'atrium-server')
  // Pinned or not at all: a release that silently ran "whatever the tag names" is what the kit is there to prevent.
  if (!server)
    return {
      ok: false,
      steps: pushed.steps,
      problem: `pushed, but the engine recorded no digest in ${registry} for the server image; nothing installed`,
    }
  return { ...pushed, digest: server.ref.split('@')[1] }
}

/** What the install's steps share as they go: set by one step, read by the later ones. */
export interface InstallState {
  ctx: Resolved
  /** The settings as written, which say where the server listens. */
  values: Record<string, string>
  /** The files the deploy runs from: the staged ones, or those in use. */
  files: ConfigFiles
  o: InstallOptions
  runner: Runner
  onStep: (s: DeployStep) => void
  /** The version an Atrium running here has (an upgrade), or null on a first install. */
  from: string | null
  upgrade?: InstallOutcome['upgrade']
  /** Helm from the kit: the server image's digest in the site's registry, once pushed. */
  digest?: string
  steps: DeployStep[]
  created: Created | null
  /** The running site's containers (or release) were being replaced: a failure from here on puts them back. */
  switched: boolean
  /** The new configuration answered: it is the last good one now. */
  committed: boolean
}

export type InstallStep = Step<InstallState, InstallOutcome['stage']>

const bundle: InstallStep = {
  name: 'bundle',
  stage: 'bundle',
  run: ({ ctx: { answers }, o }) => {
    const missing = bundleMissing(answers, o)
    const what = answers.target === 'compose' ? 'Compose bundle' : 'Helm chart'
    return missing
      ? `This package has no ${what} (looked for ${missing}); the configuration is written, deploy it with the bundle for this release.`
      : null
  },
}

/**
 * A kit that is not the vendor's, or damaged, is refused here; what is loaded later is checked against the pins read
 * now.
 */
const kit: InstallStep = {
  name: 'kit',
  stage: 'deploy',
  run: async (s) => {
    const noRegistry = kitRegistryProblem(s.ctx.answers, s.o)
    if (noRegistry) return `Nothing deployed: ${noRegistry}`
    const opened = s.o.kit ? await openKit(s.o.kit, s.o.trust) : null
    if (opened?.problem) return `Nothing deployed: ${opened.problem}`
    if (opened?.kit) s.o = { ...s.o, kitImages: opened.kit.images }
    return null
  },
}

/** Compose: a volume of the site's name that points elsewhere is refused here, whatever checks were ignored. */
const volumes: InstallStep = {
  name: 'volumes',
  stage: 'deploy',
  when: (s) => s.ctx.answers.target === 'compose',
  run: (s) => volumesProblem(s.ctx.answers, s.runner),
}

const runningNow: InstallStep = {
  name: 'running-version',
  stage: 'deploy',
  run: async (s) => {
    s.from = await runningVersion(s.ctx, s.values, s.runner, s.o)
    return null
  },
}

/** The chart guards its upgrades itself; a Compose site is guarded here, before anything changes. */
const upgradeGuard: InstallStep = {
  name: 'upgrade-guard',
  stage: 'deploy',
  when: (s) => s.from !== null && s.ctx.answers.target === 'compose' && !s.o.allowSkip,
  run: (s) => {
    const problem = upgradeProblem(s.from!, s.ctx.existing?.ATRIUM_VERSION || VERSION)
    return problem ? `Nothing deployed: ${problem}` : null
  },
}

const backupFirst: InstallStep = {
  name: 'backup',
  stage: 'deploy',
  when: (s) => s.from !== null,
  run: async (s) => {
    const backup = s.o.skipBackup
      ? { backup: null }
      : await backupBeforeUpgrade(s.ctx, s.from!, s.o.backupPassphrase, s.onStep)
    if ('problem' in backup) return `Nothing deployed: ${backup.problem}`
    s.upgrade = { from: s.from!, backup: backup.backup }
    return null
  },
}

const dataFolders: InstallStep = {
  name: 'data-folders',
  stage: 'deploy',
  when: (s) => s.ctx.answers.target === 'compose',
  run: (s) => {
    // Only the folders of the volumes this configuration uses (no bundled PostgreSQL: no postgres folder), read once
    // from the .env it deploys; the volume commands take the same list.
    const written = s.files.target === 'compose' ? readEnvFile(s.files.env)?.values : undefined
    const folders = volumesInUse(written ?? {})
    s.o = { ...s.o, folders }
    prepareDataFolders(s.ctx.answers.dataPath, folders)
    return null
  },
}

const pushKitStep: InstallStep = {
  name: 'push-kit',
  stage: 'deploy',
  run: async (s) => {
    const pushed = await pushKit(s.ctx.answers, s.o, s.runner, s.onStep)
    s.steps.push(...pushed.steps)
    s.digest = pushed.digest
    if (pushed.problem) return `Deploy failed: ${pushed.problem}`
    return pushed.ok ? null : `Deploy failed at: ${failedStep(s.steps, 4000)}`
  },
}

/** The deploy's commands of one phase (deploy.ts deployPhases), for the configuration as written. */
const phase = (s: InstallState, name: 'prepare' | 'migrate' | 'switch') =>
  deployPhases(s.ctx.answers, s.files, { ...s.o, digest: s.digest })[name]

/** Runs one phase's commands; what failed, with the end of what the command (its container) printed. */
async function runPhase(s: InstallState, name: 'prepare' | 'migrate' | 'switch'): Promise<string | null> {
  const deployed = await deploy(phase(s, name), s.runner, s.onStep)
  s.steps.push(...deployed.steps)
  return deployed.ok ? null : failedStep(deployed.steps, 4000)
}

const prepare: InstallStep = {
  name: 'prepare',
  stage: 'deploy',
  run: async (s) => {
    const failed = await runPhase(s, 'prepare')
    return failed && `Deploy failed before anything running was touched, at: ${failed}`
  },
}

/** Every image the new configuration runs is here (Compose): pulled when connected, else the kit must have loaded it. */
const images: InstallStep = {
  name: 'images',
  stage: 'deploy',
  when: (s) => s.ctx.files.target === 'compose',
  run: async (s) => {
    const compose = composeArgs(s.ctx.answers, (s.files as { env: string }).env, s.o)
    const listed = await s.runner('docker', [...compose, 'config', '--images'], { timeoutMs: 60_000 })
    if (listed.exitCode !== 0) return `Deploy failed: the Compose files did not list their images: ${listed.stderr}`
    const refs = [
      ...new Set(
        listed.stdout
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean),
      ),
    ]
    const missing: string[] = []
    for (const ref of refs) {
      const found = await s.runner('docker', ['image', 'inspect', '--format', '{{.Id}}', ref], { timeoutMs: 30_000 })
      if (found.exitCode !== 0) missing.push(ref)
    }
    if (!missing.length) return null
    if (s.ctx.answers.mode === 'air-gapped')
      return `Deploy failed before anything running was touched: the engine does not have ${missing.join(', ')}; load the air-gap kit (install --images DIR, or images load --images DIR) and run install again`
    const pulled = await deploy(
      [
        {
          file: 'docker',
          args: [...compose, 'pull', '--quiet'],
          title: `Pull ${missing.join(', ')}`,
          timeoutMs: 900_000,
        },
      ],
      s.runner,
      s.onStep,
    )
    s.steps.push(...pulled.steps)
    return pulled.ok ? null : `Deploy failed before anything running was touched, at: ${failedStep(s.steps, 4000)}`
  },
}

const migrateStep: InstallStep = {
  name: 'migrate',
  stage: 'deploy',
  run: async (s) => {
    const failed = await runPhase(s, 'migrate')
    return failed && `The migrations failed; the running site was not touched:\n${failed}`
  },
}

/** The containers (or release) replaced: from here a failure puts the previous ones back. */
const switchStep: InstallStep = {
  name: 'switch',
  stage: 'deploy',
  run: async (s) => {
    s.switched = true
    const failed = await runPhase(s, 'switch')
    if (!failed) return null
    return `Deploy failed at: ${failed}${await containerErrors(s)}`
  },
}

const ready: InstallStep = {
  name: 'ready',
  stage: 'ready',
  run: async (s) => {
    const url = localUrl(s.ctx.answers, s.values)
    const r = await waitReady(url, { timeoutMs: s.o.readyTimeoutMs })
    return r.ready
      ? null
      : `Deployed, but ${url}/readyz did not answer 200 (last: ${r.last}); see: ${installerCommand(['support-bundle', '--answers', resolve(s.ctx.files.answers)])}${await containerErrors(s)}`
  },
}

/** The new configuration answered: it replaces the files in use. */
const commit: InstallStep = {
  name: 'commit',
  stage: 'ready',
  run: (s) => {
    if (s.o.staged) commitStaged(s.ctx.answers.outputDir)
    s.committed = true
    return null
  },
}

/**
 * The own lines of the containers that failed (exited with an error, or unhealthy), so the admin
 * reads the cause where the install says it failed, not in `docker logs`. Compose only: Helm's
 * `--atomic` has already put the release back, and says why itself.
 */
async function containerErrors(s: InstallState): Promise<string> {
  if (s.files.target !== 'compose') return ''
  const compose = composeArgs(s.ctx.answers, s.files.env, s.o)
  const ps = await s.runner('docker', [...compose, 'ps', '--all', '--format', 'json'], { timeoutMs: 30_000 })
  if (ps.exitCode !== 0) return ''
  const failing = ps.stdout
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as { Service?: string; State?: string; ExitCode?: number; Health?: string }]
      } catch {
        return []
      }
    })
    .filter((c) => c.Service && ((c.State === 'exited' && c.ExitCode !== 0) || c.Health === 'unhealthy'))
  const out: string[] = []
  for (const c of failing) {
    const logs = await s.runner('docker', [...compose, 'logs', '--no-color', '--tail', '20', c.Service!], {
      timeoutMs: 30_000,
    })
    out.push(
      `\n${c.Service} (${c.Health === 'unhealthy' ? 'unhealthy' : `exited ${c.ExitCode}`}) said:\n${(logs.stdout || logs.stderr).slice(-2000)}`,
    )
  }
  return out.join('')
}

/**
 * After a failure before the new configuration answered: the staged files dropped (those in use
 * never changed), and, once containers were being replaced, the previous ones started again from
 * the files in use and waited for. Says what is true afterwards, measured, not hoped.
 */
async function putBack(s: InstallState, started: number): Promise<string> {
  const { answers, files } = s.ctx
  const back = (commands: Command[]) => deploy(commands, s.runner, s.onStep)
  const drop = () => s.o.staged && dropStaged(answers.outputDir)
  if (!s.switched)
    return drop()
      ? '\nNothing was changed: the running site was not touched and the configuration files in use are as they were.'
      : ''
  if (files.target === 'helm') {
    drop()
    // --atomic rolled the release back to its last revision; the Secret is the installer's to put back.
    if (s.o.staged && existsSync(files.secret)) await back([secretApply(answers, files)])
    return '\nHelm rolled the release back (--atomic); the configuration files in use and their Secret are as they were.'
  }
  if (s.from === null || !existsSync(files.env)) {
    // Nothing ran here before this install: its containers go (the data folders stay).
    const compose = composeArgs(answers, (s.files as { env: string }).env, s.o)
    await back([
      {
        file: 'docker',
        args: [...compose, 'down', '--remove-orphans'],
        title: 'Remove the containers that did not start',
      },
    ])
    drop()
    return '\nNothing ran here before: the containers that did not start were removed; the data folders stay.'
  }
  drop()
  const pull = answers.mode === 'air-gapped' ? ['--pull', 'never'] : []
  await back([
    {
      file: 'docker',
      args: [
        ...composeArgs(answers, files.env, s.o),
        'up',
        '--detach',
        '--wait',
        '--wait-timeout',
        '600',
        '--remove-orphans',
        ...pull,
      ],
      title: `Put back the containers of Atrium ${s.from}`,
      timeoutMs: WAIT_BACK,
    },
  ])
  const url = localUrl(answers, s.ctx.existing ?? s.values)
  const r = await waitReady(url, { timeoutMs: s.o.readyTimeoutMs })
  const seconds = ((Date.now() - started) / 1000).toFixed(0)
  return r.ready
    ? `\nPut back: the previous configuration and containers; Atrium ${s.from} answers at ${url} again (${seconds} s after the failure).`
    : `\nThe configuration files in use are as they were, but Atrium ${s.from} does not answer at ${url}/readyz (${r.last}): restore the backup taken before the upgrade (below).`
}

/** How long putting the previous containers back may take. */
const WAIT_BACK = 11 * 60_000

/** Once per site: a site that has its first tenant, or answers without an admin, gets none. */
const firstTenant: InstallStep = {
  name: 'first-tenant',
  stage: 'tenant',
  when: (s) => Boolean(s.ctx.answers.adminEmail) && !s.ctx.firstAdmin,
  run: async (s) => {
    const { answers, files } = s.ctx
    const password = newPassword()
    const command = adminCommand(answers, files, createTenantArgs(answers), s.o, passwordInput(password))
    const result = await s.runner(command.file, command.args, { timeoutMs: 120_000, input: command.input })
    s.created = result.exitCode === 0 ? parseCreated(result.stdout, answers, password) : null
    if (!s.created)
      return `Atrium is ready, but creating the first tenant failed:\n${(result.stderr || result.stdout).slice(-2000)}`
    recordFirstAdmin(answers, s.created)
    return null
  },
}

// The install's table of contents. The checks and the upgrade's first steps have no impact yet: one
// that refuses leaves the site as it was. From the data folders on, the steps start impacting things.
/** Nothing changes: the bundle is here, the kit is the vendor's and whole, the volumes of the site's name are its own. */
const CHECKS = [bundle, kit, volumes]
/** Over a running Atrium: its version found, the upgrade guarded, the site backed up. */
const UPGRADE = [runningNow, upgradeGuard, backupFirst]
/** Nothing running is touched yet: images here, files valid, volumes found, the new migrations run. */
const PREPARE = [dataFolders, pushKitStep, prepare, images, migrateStep]
/** The switch: the running containers (or release) replaced, then waited for; the new configuration kept. */
const SWITCH = [switchStep, ready, commit]

/** An install, which over a running Atrium is its upgrade. */
export const INSTALL_STEPS: readonly InstallStep[] = [...CHECKS, ...UPGRADE, ...PREPARE, ...SWITCH, firstTenant]
/**
 * A restore's deploy over the data it put back: no upgrade (the data is the backup's) and no first tenant (the backup
 * has it).
 */
export const REDEPLOY_STEPS: readonly InstallStep[] = [...CHECKS, ...PREPARE, ...SWITCH]

/**
 * Deploys the configuration just written (`values`: the settings as written, which say where the
 * server listens), waits for it, then makes the first tenant unless the context says one exists:
 * INSTALL_STEPS, or the `steps` given, run until one fails.
 */
export async function runInstall(
  ctx: Resolved,
  values: Record<string, string>,
  o: InstallOptions = {},
  onStep: (s: DeployStep) => void = () => {},
  steps: readonly InstallStep[] = INSTALL_STEPS,
): Promise<InstallOutcome> {
  const state: InstallState = {
    ctx,
    values,
    files: o.staged ? stagedFiles(ctx.files, ctx.answers.outputDir) : ctx.files,
    o,
    runner: o.runner ?? realRun,
    onStep,
    from: null,
    steps: [],
    created: null,
    switched: false,
    committed: false,
  }
  const r = await runSteps(steps, state)
  const error = r.error !== null && !state.committed ? r.error + (await putBack(state, Date.now())) : r.error
  return {
    ok: r.ok,
    stage: r.stage,
    ...(error !== null && { error }),
    url: values.PUBLIC_URL || localUrl(ctx.answers, values),
    steps: state.steps,
    created: state.created,
    existing: ctx.firstAdmin,
    ...(state.upgrade && { upgrade: state.upgrade }),
    record: r.record,
  }
}

/** The summary an admin reads at the end, the same on both screens. */
export function summaryLines(answers: Answers, o: InstallOutcome): string[] {
  const rollback = o.upgrade?.backup
    ? [
        `Backed up before the upgrade from ${o.upgrade.from}: ${o.upgrade.backup.path} (sha256 ${o.upgrade.backup.sha256}).`,
        `To roll back to ${o.upgrade.from}, run its installer (the ${o.upgrade.from} kit's atrium-installer, or a checkout of ${o.upgrade.from}):`,
        `  ${installerCommand(
          [
            'restore',
            '--answers',
            resolve(configFiles(answers).answers),
            '--input',
            o.upgrade.backup.path,
            '--passphrase-file',
            '<your passphrase file>',
            '--force',
            '--yes',
          ],
          { release: o.upgrade.from },
        )}`,
        '(docs/operations.md, "Rollback": a release never runs on a newer schema, so going back is a restore).',
      ]
    : []
  // Set only once the backup is taken, so a failure after it (the deploy, readiness) says how to go back too.
  if (!o.ok) return [o.error ?? 'The install failed.', ...rollback]
  const lines = [`Atrium is ready at ${o.url}.`, ...rollback]
  if (o.created) {
    lines.push(
      'The first tenant and its admin (shown once: keep them somewhere safe):',
      `  tenant    ${answers.tenantName} (${o.created.tenantId})`,
      `  sign in   ${o.created.email}`,
      `  password  ${o.created.password}`,
      `  API key   ${o.created.apiKey}`,
    )
  } else if (o.existing)
    lines.push(`The first tenant exists already (${o.existing.tenantId}, admin ${o.existing.email}).`)
  else
    lines.push(
      'No first tenant was created (no adminEmail in the answers); create one with the admin CLI (docs/installer.md).',
    )
  return lines
}

/** How a step ended, in five letters. */
function outcome(s: DeployStep): string {
  if (s.skipped) return 'skip '
  if (!s.result) return '...  '
  const ok = s.result.exitCode === 0
  // A probe answers a question (is the volume there?): its "no" is no failure, and the next step acts on it.
  if (s.command.probe) return ok ? 'found' : 'none '
  return ok ? 'done ' : 'FAIL '
}

/** One progress line per step, as both screens show it. */
export const stepLine = (s: DeployStep): string => `  ${outcome(s)} ${s.command.title}`
