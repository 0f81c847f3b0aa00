// Turns answers into the files a deploy target reads: compose gets `<outputDir>/.env`; helm gets
// `<outputDir>/values.yaml` and `<outputDir>/secret.yaml`. The configuration already written comes
// in the context (core/context.ts), so a re-run keeps every secret and shows what would change;
// `dryRun` writes nothing.
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { CONTAINER_FIXED } from '../../config/bundles.js'
import { parseSettings, type SettingName } from '../../config/schema.js'
import { renderAnswers, type Answers } from './answers.js'
import { composeBundleValues, renderBundleSection } from './compose-bundle.js'
import {
  holdsPrivately,
  IMMUTABLE_SECRETS,
  planConfig,
  renderEnvFile,
  writePrivateFile,
  type ConfigPlan,
} from './config-file.js'
import type { ConfigFiles, Resolved } from './context.js'
import { renderHelmFiles } from './helm-values.js'
import { answersCommand } from './invocation.js'
import { dropStaged, stagedFiles } from './staged.js'

export interface ConfigureResult {
  plan: ConfigPlan
  /** The files this run writes (or would write, on a dry run). */
  files: string[]
  /** Those of them that hold their content already: left as they are. */
  unchanged: string[]
  /** The replayable answers file. */
  answersPath: string
  written: boolean
  /** Written under <outputDir>/.pending/ (core/staged.ts): they replace the files in use once their deploy answers. */
  staged: boolean
}

/** The command that replays a run from the answers file it wrote. */
export const replayCommand = (answersPath: string) => answersCommand('configure', answersPath)

/** Settings the mode implies: an air-gapped site turns off every feature that needs outside APIs. */
export function impliedSettings(answers: Answers): Record<string, string> {
  return { NODE_ENV: 'production', ...(answers.mode === 'air-gapped' ? { AIR_GAPPED: 'true' } : {}) }
}

/**
 * The plan for the context, written unless it is a dry run or has problems (the context's own among them). With
 * `stage` (an install, which deploys what it writes), written staged: the files in use change once the deploy answers.
 */
export function configure(ctx: Resolved, opts: { dryRun: boolean; stage?: boolean }): ConfigureResult {
  const { answers, existing, values: resolved } = ctx
  const staged = Boolean(opts.stage) && !opts.dryRun
  // Where this run writes; the report names the files in use, which these become.
  const files = staged ? stagedFiles(ctx.files, answers.outputDir) : ctx.files
  // Compose: the bundled PostgreSQL, Redis and MinIO unless the answers name external ones.
  const bundle = files.target === 'compose' ? composeBundleValues(answers, resolved, existing) : null
  // Helm: the chart fixes the port, address and data folder of the container; answers cannot move
  // them. Compose: a service setting left empty means the bundled service, whose settings stand.
  const given = Object.fromEntries(
    Object.entries(resolved).filter(([n, v]) =>
      files.target === 'helm' ? !(n in CONTAINER_FIXED) : !(v === '' && bundle && n in bundle.settings),
    ),
  )
  const plan = planConfig({ ...bundle?.settings, ...given, ...impliedSettings(answers) }, existing)
  if (bundle) plan.generated.push(...bundle.generated)
  plan.problems.unshift(...ctx.problems)
  // Read as the server reads it (yes, on and 1 are true too); one that is no boolean is named by the plan's own check.
  if (
    answers.mode === 'air-gapped' &&
    resolved.AIR_GAPPED &&
    parseSettings({ AIR_GAPPED: resolved.AIR_GAPPED }, ['AIR_GAPPED']).config.AIR_GAPPED === false
  ) {
    plan.problems.unshift(
      `config.AIR_GAPPED is ${resolved.AIR_GAPPED} in the answers, but the mode is air-gapped: remove it or set it to true`,
    )
  }
  const written = !opts.dryRun && plan.problems.length === 0
  const out = ctx.files.target === 'compose' ? [ctx.files.env] : [ctx.files.values, ctx.files.secret]
  // What each file is to hold (nothing while there are problems).
  const contents = plan.problems.length === 0 ? fileContents(ctx, files, plan, bundle) : []
  // A file in use that holds its content already is left alone. Staged, none is rewritten before the deploy answers,
  // and the deploy reads the staged set whole: every file is staged.
  const unchanged = staged ? [] : contents.filter(([path, text]) => holdsPrivately(path, text)).map(([path]) => path)
  if (written) {
    try {
      mkdirSync(dirname(files.answers), { recursive: true, mode: 0o700 })
      for (const [path, text] of contents) if (!unchanged.includes(path)) writePrivateFile(path, text)
    } catch (err) {
      if (!staged) throw err
      // Staged, the files in use were never touched: say so, and leave nothing half-staged behind.
      dropStaged(answers.outputDir)
      throw new Error(`${(err as Error).message}; the configuration files in use are unchanged`, { cause: err })
    }
  }
  return {
    plan,
    files: [...out, ctx.files.answers],
    unchanged,
    answersPath: ctx.files.answers,
    written,
    staged: written && staged,
  }
}

/** What the target's files and the answers are to hold, each with where it is written. */
function fileContents(
  ctx: Resolved,
  files: ConfigFiles,
  plan: ConfigPlan,
  bundle: ReturnType<typeof composeBundleValues> | null,
): [string, string][] {
  const contents: [string, string][] = []
  if (files.target === 'compose')
    contents.push([files.env, renderEnvFile(plan.values) + renderBundleSection(bundle!.variables)])
  else {
    const helm = renderHelmFiles(plan.values, ctx.answers)
    contents.push([files.values, helm.values], [files.secret, helm.secret])
  }
  // Secrets kept in the written configuration are not repeated in the answers (not even by reference).
  const kept = IMMUTABLE_SECRETS.filter((n: SettingName) => plan.values[n])
  contents.push([files.answers, renderAnswers(ctx.answers, kept, ctx.baseDir)])
  return contents
}
