// Turns answers into the files a deploy target reads: compose gets `<outputDir>/.env`; helm gets
// `<outputDir>/values.yaml` and `<outputDir>/secret.yaml`. The configuration already written comes
// in the context (core/context.ts), so a re-run keeps every secret and shows what would change;
// `dryRun` writes nothing.
import { mkdirSync } from 'node:fs'
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
import type { Resolved } from './context.js'
import { renderHelmFiles } from './helm-values.js'
import { answersCommand } from './invocation.js'

export interface ConfigureResult {
  plan: ConfigPlan
  /** The files this run writes (or would write, on a dry run). */
  files: string[]
  /** Those of them that hold their content already: left as they are. */
  unchanged: string[]
  /** The replayable answers file. */
  answersPath: string
  written: boolean
}

/** The command that replays a run from the answers file it wrote. */
export const replayCommand = (answersPath: string) => answersCommand('configure', answersPath)

/** Settings the mode implies: an air-gapped site turns off every feature that needs outside APIs. */
export function impliedSettings(answers: Answers): Record<string, string> {
  return { NODE_ENV: 'production', ...(answers.mode === 'air-gapped' ? { AIR_GAPPED: 'true' } : {}) }
}

/** The plan for the context, written unless it is a dry run or has problems (the context's own among them). */
export function configure(ctx: Resolved, opts: { dryRun: boolean }): ConfigureResult {
  const { answers, files, existing, values: resolved } = ctx
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
  const out = files.target === 'compose' ? [files.env] : [files.values, files.secret]
  // What each file is to hold (nothing while there are problems); one that holds it already is left alone.
  const contents: [string, string][] = []
  if (plan.problems.length === 0) {
    if (files.target === 'compose')
      contents.push([files.env, renderEnvFile(plan.values) + renderBundleSection(bundle!.variables)])
    else {
      const helm = renderHelmFiles(plan.values, answers)
      contents.push([files.values, helm.values], [files.secret, helm.secret])
    }
    // Secrets kept in the written configuration are not repeated in the answers (not even by reference).
    const kept = IMMUTABLE_SECRETS.filter((n: SettingName) => plan.values[n])
    contents.push([files.answers, renderAnswers(answers, kept, ctx.baseDir)])
  }
  const unchanged = contents.filter(([path, text]) => holdsPrivately(path, text)).map(([path]) => path)
  if (written) {
    mkdirSync(answers.outputDir, { recursive: true, mode: 0o700 })
    for (const [path, text] of contents) if (!unchanged.includes(path)) writePrivateFile(path, text)
  }
  return { plan, files: [...out, files.answers], unchanged, answersPath: files.answers, written }
}
