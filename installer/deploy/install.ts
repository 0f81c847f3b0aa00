// The whole install after the configuration is written: the deploy commands, the wait for /readyz
// and, once per site, the first tenant with its admin. Shared by `install --answers` and the
// interactive installer's deploy screen, so both do and say exactly the same.
import {
  COMPOSE_VOLUMES,
  adminCommand,
  bundleMissing,
  chartFullname,
  deploy,
  deployCommands,
  failedStep,
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
import { dirname, join } from 'node:path'
import { VERSION } from '../../common/version.js'
import { backupSite } from '../backup/backup.js'
import { siteServices } from '../backup/site.js'
import { atriumOn } from '../core/checks/host.js'
import { composeArgs, prepareDataFolders } from '../core/compose-bundle.js'
import { upgradeProblem } from '../core/upgrade.js'
import type { Resolved } from '../core/context.js'
import { createTenantArgs, newPassword, parseCreated, recordFirstAdmin, type Created, type FirstAdmin } from '../core/first-admin.js'

export interface InstallOptions extends DeployOptions {
  runner?: Runner
  /** How long /readyz may take after the deploy (default 5 minutes). */
  readyTimeoutMs?: number
  /** An upgrade backs the site up first, with this passphrase (--passphrase-file). */
  backupPassphrase?: string
  /** Upgrade without that backup (the admin has a fresh one). */
  skipBackup?: boolean
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
}

/** Where the installer reaches the server: the published port (compose) or PUBLIC_URL (helm). */
const localUrl = (answers: Answers, values: Record<string, string>) => (answers.target === 'compose' ? `http://127.0.0.1:${values.PORT || 8080}` : (values.PUBLIC_URL ?? ''))

/** The images a Helm release runs, which a Helm install from the kit pushes to the site's registry. */
const HELM_IMAGES = IMAGES.filter((i) => i.usedBy.includes('helm'))

/** Helm from the kit: its images pushed to the site's registry first (then pinned by digest there). */
const kitPush = (answers: Answers, o: DeployOptions): Command[] => (answers.target === 'helm' && o.kit ? pushCommands(registryOf(answers, o) || '<--registry>', o.kit, HELM_IMAGES, o.kitImages) : [])

/**
 * The Atrium a Compose site runs now: the one answering on its port, else the image of its server
 * container (stopped, say); null on a first install.
 */
export async function runningVersion(ctx: Resolved, values: Record<string, string>, runner: Runner, o: DeployOptions = {}): Promise<string | null> {
  if (ctx.files.target === 'helm') {
    // The release's Deployment carries its version, as the chart's own upgrade guard reads it.
    const label = await runner(
      'kubectl',
      ['--namespace', ctx.answers.namespace, 'get', 'deployment', chartFullname(ctx.answers.release), '--output', 'jsonpath={.metadata.labels.app\\.kubernetes\\.io/version}'],
      { timeoutMs: 30_000 },
    )
    return label.exitCode === 0 && /^v?\d+\.\d+\.\d+/.test(label.stdout.trim()) ? label.stdout.trim() : null
  }
  const live = await atriumOn(Number(values.PORT || 8080))
  if (live) return live
  const ps = await runner('docker', [...composeArgs(ctx.answers, ctx.files.env, o), 'ps', '--all', '--format', '{{.Image}}', 'server'], { timeoutMs: 30_000 })
  const image = ps.exitCode === 0 ? ps.stdout.trim().split('\n')[0] : ''
  return image && /:[^:/]+$/.test(image) ? image.slice(image.lastIndexOf(':') + 1) : null
}

/** The backup an upgrade takes first, into the output folder's backups/; or why there is none (nothing is deployed then). */
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
  if ('problems' in found) return { problem: `the backup before the upgrade cannot reach the site: ${found.problems.join('; ')}` }
  const path = join(ctx.answers.outputDir, 'backups', `atrium-${from}-${new Date().toISOString().replace(/[:.]/g, '-')}.tar`)
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const command: Command = { file: 'installer', args: ['backup', '--output', path], title: `Back the site up before the upgrade from ${from} (${path})` }
  onStep({ command, result: null })
  try {
    const r = await backupSite(ctx, found.services, { output: path, passphrase, version: from })
    onStep({ command, result: { command: command.title, exitCode: 0, stdout: '', stderr: '', notFound: false, timedOut: false } })
    return { backup: { path: r.path, sha256: r.sha256 } }
  } catch (err) {
    onStep({ command, result: { command: command.title, exitCode: 1, stdout: '', stderr: (err as Error).message, notFound: false, timedOut: false } })
    return { problem: `the backup before the upgrade failed, so nothing was changed: ${(err as Error).message}` }
  }
}

/** Every command an install runs, the first tenant's included (its password shown as <generated>). */
export function installPlan(ctx: Resolved, o: DeployOptions = {}): Command[] {
  const { answers, files } = ctx
  const tenant = answers.adminEmail && !ctx.firstAdmin ? [adminCommand(answers, files, createTenantArgs(answers, '<generated>'), o)] : []
  const push = kitPush(answers, o)
  const pinned = push.length ? { ...o, digest: '<the digest the registry gives>' } : o
  return [...push, ...deployCommands(answers, files, pinned), ...tenant]
}

/** Pushes the kit's images (Helm) and returns the server's digest in the registry; the steps either way. */
async function pushKit(answers: Answers, o: DeployOptions, runner: Runner, onStep: (s: DeployStep) => void): Promise<{ ok: boolean; steps: DeployStep[]; digest?: string; problem?: string }> {
  const commands = kitPush(answers, o)
  if (!commands.length) return { ok: true, steps: [] }
  const pushed = await deploy(commands, runner, onStep)
  if (!pushed.ok) return pushed
  const registry = registryOf(answers, o)
  const server = (await pushedDigests(registry, HELM_IMAGES, runner)).find((d) => d.name === 'atrium-server')
  // Pinned or not at all: a release that silently ran "whatever the tag names" is what the kit is there to prevent.
  if (!server) return { ok: false, steps: pushed.steps, problem: `pushed, but the engine recorded no digest in ${registry} for the server image; nothing installed` }
  return { ...pushed, digest: server.ref.split('@')[1] }
}

/**
 * Deploys the configuration just written (`values`: the settings as written, which say where the
 * server listens), waits for it, then makes the first tenant unless the context says one exists.
 */
export async function runInstall(ctx: Resolved, values: Record<string, string>, o: InstallOptions = {}, onStep: (s: DeployStep) => void = () => {}): Promise<InstallOutcome> {
  const runner = o.runner ?? realRun
  const { answers, files, firstAdmin: existing } = ctx
  const base: Pick<InstallOutcome, 'url' | 'steps' | 'created' | 'existing' | 'upgrade'> = { url: values.PUBLIC_URL || localUrl(answers, values), steps: [], created: null, existing }
  const missing = bundleMissing(answers, o)
  if (missing)
    return {
      ...base,
      ok: false,
      stage: 'bundle',
      error: `This package has no ${answers.target === 'compose' ? 'Compose bundle' : 'Helm chart'} (looked for ${missing}); the configuration is written, deploy it with the bundle for this release.`,
    }
  // A kit that is not the vendor's, or damaged, is refused before anything is loaded or started;
  // what is loaded is then checked against the pins read in that check.
  const noRegistry = kitRegistryProblem(answers, o)
  if (noRegistry) return { ...base, ok: false, stage: 'deploy', error: `Nothing deployed: ${noRegistry}` }
  const opened = o.kit ? await openKit(o.kit, o.trust) : null
  if (opened?.problem) return { ...base, ok: false, stage: 'deploy', error: `Nothing deployed: ${opened.problem}` }
  if (opened?.kit) o = { ...o, kitImages: opened.kit.images }
  const from = await runningVersion(ctx, values, runner, o)
  if (answers.target === 'compose' && !o.allowSkip) {
    // The chart guards its upgrades itself; a Compose site is guarded here, before anything changes.
    const problem = from ? upgradeProblem(from, ctx.existing?.ATRIUM_VERSION || VERSION) : null
    if (problem) return { ...base, ok: false, stage: 'deploy', error: `Nothing deployed: ${problem}` }
  }
  let upgrade: InstallOutcome['upgrade']
  if (from) {
    const backup = o.skipBackup ? { backup: null } : await backupBeforeUpgrade(ctx, from, o.backupPassphrase, onStep)
    if ('problem' in backup) return { ...base, ok: false, stage: 'deploy', error: `Nothing deployed: ${backup.problem}` }
    upgrade = { from, backup: backup.backup }
  }
  if (upgrade) Object.assign(base, { upgrade })
  if (answers.target === 'compose') prepareDataFolders(answers.dataPath, Object.values(COMPOSE_VOLUMES))
  const pushed = await pushKit(answers, o, runner, onStep)
  const deployed = pushed.ok ? await deploy(deployCommands(answers, files, { ...o, digest: pushed.digest }), runner, onStep) : { ok: false, steps: [] }
  const r = { ok: deployed.ok, steps: [...pushed.steps, ...deployed.steps] }
  if (pushed.problem) return { ...base, steps: r.steps, ok: false, stage: 'deploy', error: `Deploy failed: ${pushed.problem}` }
  if (!r.ok) return { ...base, steps: r.steps, ok: false, stage: 'deploy', error: `Deploy failed at: ${failedStep(r.steps, 4000)}` }
  const ready = await waitReady(localUrl(answers, values), { timeoutMs: o.readyTimeoutMs })
  if (!ready.ready) {
    return {
      ...base,
      steps: r.steps,
      ok: false,
      stage: 'ready',
      error: `Deployed, but ${localUrl(answers, values)}/readyz did not answer 200 (last: ${ready.last}); see: npm run --silent installer -- support-bundle`,
    }
  }
  if (!answers.adminEmail || existing) return { ...base, steps: r.steps, ok: true, stage: 'done' }
  const password = newPassword()
  const command = adminCommand(answers, files, createTenantArgs(answers, password), o)
  const result = await runner(command.file, command.args, { timeoutMs: 120_000 })
  const created = result.exitCode === 0 ? parseCreated(result.stdout, answers, password) : null
  if (!created) return { ...base, steps: r.steps, ok: false, stage: 'tenant', error: `Atrium is ready, but creating the first tenant failed:\n${(result.stderr || result.stdout).slice(-2000)}` }
  recordFirstAdmin(answers, created)
  return { ...base, steps: r.steps, ok: true, stage: 'done', created }
}

/** The summary an admin reads at the end, the same on both screens. */
export function summaryLines(answers: Answers, o: InstallOutcome): string[] {
  const rollback = o.upgrade?.backup
    ? [
        `Backed up before the upgrade from ${o.upgrade.from}: ${o.upgrade.backup.path} (sha256 ${o.upgrade.backup.sha256}).`,
        `To roll back to ${o.upgrade.from}: with the ${o.upgrade.from} installer, run`,
        `  restore --answers <answers file> --input ${o.upgrade.backup.path} --passphrase-file <file> --force --yes`,
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
  } else if (o.existing) lines.push(`The first tenant exists already (${o.existing.tenantId}, admin ${o.existing.email}).`)
  else lines.push('No first tenant was created (no adminEmail in the answers); create one with the admin CLI (docs/installer.md).')
  return lines
}

/** One progress line per step, as both screens show it. */
export const stepLine = (s: DeployStep): string =>
  s.skipped ? `  skip  ${s.command.title}` : !s.result ? `  ...   ${s.command.title}` : `  ${s.result.exitCode === 0 ? 'done ' : 'FAIL '} ${s.command.title}`
