// configure: the preflight, then the configuration for the target planned and (unless a dry run) written.
import { configure as writeConfiguration, replayCommand, type ConfigureResult } from '../core/configure.js'
import { preflightValues, type Resolved } from '../core/context.js'
import { runPreflight } from '../core/preflight.js'
import { checkedOnly, EXIT, exitFor, type ConfigureReport } from '../core/report.js'
import { run } from '../core/run.js'
import { command, requireYes, resolved, type FlagValues, type Hooks } from './command.js'
import { dryRun, ignoreFailed, site, strict, yes } from './flags.js'
import { interactive } from './interactive.js'

const flags = { ...site, yes, dryRun, strict, ignoreFailed }

export type ConfigureOptions = FlagValues<typeof flags> & Hooks

/** The preflight, then the configuration planned and (unless a dry run) written; the plan is kept for install. */
export async function configureStep(
  ctx: Resolved,
  o: ConfigureOptions & { stage?: boolean },
): Promise<{ report: ConfigureReport; result: ConfigureResult | null }> {
  const checks = await runPreflight(ctx.answers, preflightValues(ctx), { runner: o.runner ?? run })
  const code = exitFor(checks, Boolean(o.strict))
  const report = checkedOnly(checks, code)
  if (code !== EXIT.ok && !o.ignoreFailed) return { report, result: null }
  const r = writeConfiguration(ctx, { dryRun: Boolean(o.dryRun), stage: o.stage })
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
      unchanged: r.unchanged,
      written: r.written,
      replay: replayCommand(r.answersPath),
      leftBehind: Boolean(ctx.leftBehind),
      staged: r.staged,
    },
    result: r,
  }
}

export async function configureCommand(ctx: Resolved, o: ConfigureOptions = {}): Promise<ConfigureReport> {
  return (await configureStep(ctx, o)).report
}

export const configure = command({
  name: 'configure',
  summary:
    'write the configuration for the target (compose: .env; helm: values.yaml and secret.yaml);\nwithout --answers, the interactive installer',
  flags,
  run: (input) => {
    if (!input.flags.answers) return interactive.run(input)
    requireYes('configure', input.flags)
    return configureCommand(resolved(input.flags, { writes: true }), input.flags)
  },
})
