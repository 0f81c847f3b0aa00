// configure: the preflight, then the configuration for the target planned and (unless a dry run) written.
import { acceptances, acceptor, acceptProblem, judge, withAccepted } from '../core/accepted-checks.js'
import { configure as writeConfiguration, replayCommand, type ConfigureResult } from '../core/configure.js'
import { preflightValues, type Resolved } from '../core/context.js'
import { runPreflight } from '../core/preflight.js'
import { checkedOnly, EXIT, exitFor, type ConfigureReport } from '../core/report.js'
import { run } from '../core/run.js'
import { BadInput, command, requireYes, resolved, type FlagValues, type Hooks } from './command.js'
import { acceptCheck, dryRun, site, strict, yes } from './flags.js'
import { interactive } from './interactive.js'

const flags = { ...site, yes, dryRun, strict, acceptCheck }

export type ConfigureOptions = FlagValues<typeof flags> & Hooks

/** --accept-check's ids, each one a check that may be accepted; bad input naming each that is not, before any check runs. */
function acceptedIds(ids: readonly string[] = []): readonly string[] {
  const problems = ids.flatMap((id) => {
    const problem = acceptProblem(id)
    return problem ? [`--accept-check ${id}: ${problem}`] : []
  })
  if (problems.length) throw new BadInput(problems)
  return ids
}

/**
 * The preflight, then the configuration planned and (unless a dry run) written; the plan is kept for install. A check
 * that stops it (failed, or a warning with --strict) is let through only when accepted: recorded in the answers, or
 * given with --accept-check now, which the answers written then record.
 */
export async function configureStep(
  ctx: Resolved,
  o: ConfigureOptions & { stage?: boolean },
): Promise<{ report: ConfigureReport; result: ConfigureResult | null }> {
  const given = acceptedIds(o.acceptCheck)
  const checks = await runPreflight(ctx.answers, preflightValues(ctx), { runner: o.runner ?? run })
  const recorded = ctx.answers.acceptedChecks
  const fresh = acceptances(given, acceptor())
  const { accepted, open } = judge(checks, withAccepted(recorded, fresh), Boolean(o.strict))
  const code = exitFor(open, Boolean(o.strict))
  const report = checkedOnly(checks, code)
  if (code !== EXIT.ok) return { report, result: null }
  // Recorded: what was before, and what was accepted now of a check that did stop this run.
  const acceptedChecks = withAccepted(
    recorded,
    accepted.filter((a) => fresh.includes(a)),
  )
  const r = writeConfiguration(
    { ...ctx, answers: { ...ctx.answers, acceptedChecks } },
    { dryRun: Boolean(o.dryRun), stage: o.stage },
  )
  const problems = r.plan.problems.length > 0
  return {
    report: {
      ...report,
      exitCode: problems ? EXIT.badInput : EXIT.ok,
      stopped: problems ? 'problems' : null,
      accepted,
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
