// preflight: check this machine and the services it will use; nothing is written.
import { overallStatus } from '../core/checks/check.js'
import { preflightValues, type Resolved } from '../core/context.js'
import { runPreflight } from '../core/preflight.js'
import { exitFor, type PreflightReport } from '../core/report.js'
import { run } from '../core/run.js'
import { siteCommand, type FlagValues, type Hooks } from './command.js'
import { site, strict } from './flags.js'

const flags = { ...site, strict }

export type PreflightOptions = FlagValues<typeof flags> & Hooks

export async function preflightCommand(ctx: Resolved, o: PreflightOptions = {}): Promise<PreflightReport> {
  const checks = await runPreflight(ctx.answers, preflightValues(ctx), { runner: o.runner ?? run })
  return { command: 'preflight', exitCode: exitFor(checks, Boolean(o.strict)), status: overallStatus(checks), checks }
}

export const preflight = siteCommand({
  name: 'preflight',
  summary: 'check this machine and the services it will use',
  flags,
  run: preflightCommand,
})
