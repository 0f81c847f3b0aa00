// The whole install after the configuration is written: the deploy commands, the wait for /readyz
// and, once per site, the first tenant with its admin. Shared by `install --answers` and the
// interactive installer's deploy screen, so both do and say exactly the same.
import { COMPOSE_VOLUMES, adminCommand, bundleMissing, deploy, deployCommands, failedStep, waitReady, type Command, type DeployOptions, type DeployStep } from './deploy.js'
import { kitProblem } from './airgap.js'
import { run as realRun, type Runner } from './run.js'
import type { Answers } from '../core/answers.js'
import { prepareDataFolders } from '../core/compose-bundle.js'
import type { Resolved } from '../core/context.js'
import { createTenantArgs, newPassword, parseCreated, recordFirstAdmin, type Created, type FirstAdmin } from '../core/first-admin.js'

export interface InstallOptions extends DeployOptions {
  runner?: Runner
  /** How long /readyz may take after the deploy (default 5 minutes). */
  readyTimeoutMs?: number
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
}

/** Where the installer reaches the server: the published port (compose) or PUBLIC_URL (helm). */
const localUrl = (answers: Answers, values: Record<string, string>) => (answers.target === 'compose' ? `http://127.0.0.1:${values.PORT || 8080}` : (values.PUBLIC_URL ?? ''))

/** Every command an install runs, the first tenant's included (its password shown as <generated>). */
export function installPlan(ctx: Resolved, o: DeployOptions = {}): Command[] {
  const { answers, files } = ctx
  const tenant = answers.adminEmail && !ctx.firstAdmin ? [adminCommand(answers, files, createTenantArgs(answers, '<generated>'), o)] : []
  return [...deployCommands(answers, files, o), ...tenant]
}

/**
 * Deploys the configuration just written (`values`: the settings as written, which say where the
 * server listens), waits for it, then makes the first tenant unless the context says one exists.
 */
export async function runInstall(ctx: Resolved, values: Record<string, string>, o: InstallOptions = {}, onStep: (s: DeployStep) => void = () => {}): Promise<InstallOutcome> {
  const runner = o.runner ?? realRun
  const { answers, files, firstAdmin: existing } = ctx
  const base = { url: values.PUBLIC_URL || localUrl(answers, values), steps: [] as DeployStep[], created: null, existing }
  const missing = bundleMissing(answers, o)
  if (missing)
    return {
      ...base,
      ok: false,
      stage: 'bundle',
      error: `This package has no ${answers.target === 'compose' ? 'Compose bundle' : 'Helm chart'} (looked for ${missing}); the configuration is written, deploy it with the bundle for this release.`,
    }
  // A damaged tarball is refused before anything is loaded or started.
  const kit = o.imagesTarball ? await kitProblem(o.imagesTarball) : null
  if (kit) return { ...base, ok: false, stage: 'deploy', error: `Nothing deployed: ${kit}` }
  if (answers.target === 'compose') prepareDataFolders(answers.dataPath, Object.values(COMPOSE_VOLUMES))
  const r = await deploy(deployCommands(answers, files, o), runner, onStep)
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
  if (!o.ok) return [o.error ?? 'The install failed.']
  const lines = [`Atrium is ready at ${o.url}.`]
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
