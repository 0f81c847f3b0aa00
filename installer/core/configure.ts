// Turns answers into the files a deploy target reads: compose gets `<outputDir>/.env`; helm gets
// `<outputDir>/values.yaml` and `<outputDir>/secret.yaml`. Existing files are read back first so a
// re-run keeps every secret and shows what would change; `dryRun` writes nothing.
import { mkdirSync } from 'node:fs'
import { CONTAINER_FIXED } from '../../config/bundles.js'
import { join } from 'node:path'
import type { SettingName } from '../../config/schema.js'
import { renderAnswers, type Answers } from './answers.js'
import { composeBundleValues, renderBundleSection } from './compose-bundle.js'
import { IMMUTABLE_SECRETS, planConfig, readEnvFile, renderEnvFile, writePrivateFile, type ConfigPlan } from './config-file.js'
import { readHelmFiles, renderHelmFiles } from './helm-values.js'

export interface ConfigureResult {
  plan: ConfigPlan
  /** The files this run writes (or would write, on a dry run). */
  files: string[]
  /** The replayable answers file. */
  answersPath: string
  written: boolean
}

export type ConfigFiles =
  | { target: 'compose'; env: string; answers: string }
  | { target: 'helm'; values: string; secret: string; answers: string }

export function configFiles(answers: Answers): ConfigFiles {
  const at = (name: string) => join(answers.outputDir, name)
  return answers.target === 'compose'
    ? { target: 'compose', env: at('.env'), answers: at('answers.yaml') }
    : { target: 'helm', values: at('values.yaml'), secret: at('secret.yaml'), answers: at('answers.yaml') }
}

/** Settings the mode implies: an air-gapped site turns off every feature that needs outside APIs. */
export function impliedSettings(answers: Answers): Record<string, string> {
  return { NODE_ENV: 'production', ...(answers.mode === 'air-gapped' ? { AIR_GAPPED: 'true' } : {}) }
}

/** The configuration this target already has on disk, or null on a first install. */
export function readExisting(answers: Answers): Record<string, string> | null {
  const files = configFiles(answers)
  return files.target === 'compose' ? readEnvFile(files.env)?.values ?? null : readHelmFiles(files.values, files.secret)
}

export function configure(answers: Answers, resolved: Record<string, string>, opts: { dryRun: boolean }): ConfigureResult {
  const files = configFiles(answers)
  const existing = readExisting(answers)
  // Compose: the bundled PostgreSQL, Redis and MinIO unless the answers name external ones.
  const bundle = files.target === 'compose' ? composeBundleValues(answers, resolved, existing) : null
  // Helm: the chart fixes the port, address and data folder of the container; answers cannot move them.
  const given = files.target === 'helm' ? Object.fromEntries(Object.entries(resolved).filter(([n]) => !(n in CONTAINER_FIXED))) : resolved
  const plan = planConfig({ ...bundle?.settings, ...given, ...impliedSettings(answers) }, existing)
  if (bundle) plan.generated.push(...bundle.generated)
  if (answers.mode === 'air-gapped' && resolved.AIR_GAPPED && resolved.AIR_GAPPED !== 'true') {
    plan.problems.unshift('AIR_GAPPED is set to false in the answers, but the mode is air-gapped')
  }
  const written = !opts.dryRun && plan.problems.length === 0
  const out = files.target === 'compose' ? [files.env] : [files.values, files.secret]
  if (written) {
    mkdirSync(answers.outputDir, { recursive: true, mode: 0o700 })
    if (files.target === 'compose') writePrivateFile(files.env, renderEnvFile(plan.values) + renderBundleSection(bundle!.variables))
    else {
      const helm = renderHelmFiles(plan.values, answers)
      writePrivateFile(files.values, helm.values)
      writePrivateFile(files.secret, helm.secret)
    }
    // Secrets kept in the written configuration are not repeated in the answers (not even by reference).
    const kept = IMMUTABLE_SECRETS.filter((n: SettingName) => plan.values[n])
    writePrivateFile(files.answers, renderAnswers(answers, kept))
  }
  return { plan, files: [...out, files.answers], answersPath: files.answers, written }
}
