// The installer resolves once, then acts. Everything a command needs from outside itself (the
// answers file and the references in it, the configuration already written for the target, the
// first tenant's record) is read here, once per command, into one Resolved that every step then
// receives. No step reads these on its own, so one run acts on one picture of the site, and a test
// can hand a step any picture it likes.
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { COMPOSE_VARIABLES } from '../../config/compose-variables.js'
import { DEFAULT_ANSWERS, loadAnswers, resolveConfig, type Answers } from './answers.js'
import { readEnvFile } from './config-file.js'
import { readFirstAdmin, type FirstAdmin } from './first-admin.js'
import { readHelmFiles, servicesCidrsProblem } from './helm-values.js'
import { DEFAULT_SITE } from './site.js'
import { dropStaged } from './staged.js'

/** The files the installer writes for a target, under the answers' outputDir. */
export type ConfigFiles =
  | { target: 'compose'; env: string; answers: string }
  | { target: 'helm'; values: string; secret: string; answers: string }

export function configFiles(answers: Answers): ConfigFiles {
  const at = (name: string) => join(answers.outputDir, name)
  return answers.target === 'compose'
    ? { target: 'compose', env: at('.env'), answers: at('answers.yaml') }
    : { target: 'helm', values: at('values.yaml'), secret: at('secret.yaml'), answers: at('answers.yaml') }
}

export interface Resolved {
  /** The answers, with the command line's overrides applied. */
  answers: Answers
  /** Where {file} references are read from: the answers file's folder. */
  baseDir: string
  files: ConfigFiles
  /**
   * The configuration already written for the target (compose .env; helm values and Secret), or null on a first
   * install.
   */
  existing: Record<string, string> | null
  /** The answers' settings with every reference read; a variable that is not set falls back to `existing`. */
  values: Record<string, string>
  /** The first tenant an earlier install made (state.json), or null. */
  firstAdmin: FirstAdmin | null
  /** What is wrong with the answers; a command does nothing while there is any. */
  problems: string[]
  /** A run before this one stopped before its deploy answered: the configuration it had staged was dropped. */
  leftBehind?: boolean
}

export interface ResolveOptions {
  baseDir?: string
  /** Where {env} references are read (process.env unless told). */
  env?: NodeJS.ProcessEnv
}

/** The configuration the target already has on disk, or null on a first install. */
function readExisting(files: ConfigFiles): Record<string, string> | null {
  return files.target === 'compose'
    ? (readEnvFile(files.env)?.values ?? null)
    : readHelmFiles(files.values, files.secret)
}

const nonEmpty = (values: Record<string, string>) => Object.fromEntries(Object.entries(values).filter(([, v]) => v))

/** The context for answers already in hand: the interactive installer's, as the admin answers. */
export function contextFor(answers: Answers, o: ResolveOptions = {}, problems: readonly string[] = []): Resolved {
  const baseDir = o.baseDir ?? process.cwd()
  const files = configFiles(answers)
  const existing = readExisting(files)
  const resolved = resolveConfig(answers, { env: o.env, baseDir, existing })
  // The settings as configure writes them: the answers' over what is written.
  const egress = servicesCidrsProblem(answers, { ...existing, ...nonEmpty(resolved.values) })
  return {
    answers,
    baseDir,
    files,
    existing,
    values: resolved.values,
    firstAdmin: readFirstAdmin(answers),
    problems: [
      ...problems,
      ...resolved.problems,
      ...(egress ? [egress] : []),
      ...renamedSite(answers, files, existing),
    ],
  }
}

/**
 * A Compose site cannot be renamed where it is written: its containers and volumes carry the name it was installed
 * under (`atrium` when .env predates site names), and a new name would start a second, empty site beside it.
 */
function renamedSite(answers: Answers, files: ConfigFiles, existing: Record<string, string> | null): string[] {
  if (files.target !== 'compose' || !existing) return []
  const written = existing.ATRIUM_SITE || DEFAULT_SITE
  return written === answers.site
    ? []
    : [
        `site: ${files.env} is the site ${written}, and a site keeps its name (its containers and volumes carry it): answer site: ${written}, or give the site ${answers.site} an outputDir of its own`,
      ]
}

export interface LoadOptions extends ResolveOptions {
  /** The answers file; the defaults without one. */
  answersPath?: string
  /** --target: overrides the answers file. */
  target?: string
  /** --air-gapped: overrides the answers file's mode. */
  airGapped?: boolean
  /** The command writes: what a run stopped half-way had staged is dropped (core/staged.ts). */
  recover?: boolean
}

/** The context for a command: the answers file (or the defaults) with the command line's overrides. */
export function loadContext(o: LoadOptions = {}): Resolved {
  const loaded = o.answersPath
    ? loadAnswers(o.answersPath)
    : { answers: DEFAULT_ANSWERS, problems: [], baseDir: o.baseDir ?? process.cwd() }
  // A copy: the defaults are shared and must not take this run's overrides. Folders written
  // relative in an answers file are relative to that file, as its {file} references are: the same
  // file gives the same site from any working directory.
  const answers: Answers = { ...loaded.answers, config: { ...loaded.answers.config } }
  if (o.answersPath)
    for (const key of ['dataPath', 'outputDir'] as const) answers[key] = resolve(loaded.baseDir, answers[key])
  const problems = [...loaded.problems]
  if (o.target !== undefined) {
    if (o.target === 'compose' || o.target === 'helm') answers.target = o.target
    else problems.push('--target must be compose or helm')
  }
  if (o.airGapped) answers.mode = 'air-gapped'
  const leftBehind = Boolean(o.recover) && dropStaged(answers.outputDir)
  const ctx = contextFor(answers, { env: o.env, baseDir: loaded.baseDir }, problems)
  return leftBehind ? { ...ctx, leftBehind } : ctx
}

const composeVariables = (from: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(from).filter((e): e is [string, string] => e[0] in COMPOSE_VARIABLES && Boolean(e[1])),
  )

/**
 * What the preflight judges: the answers' values, over the Compose bundle's variables already
 * written in .env (ATRIUM_S3_PORT, say), which the answers do not hold and a re-run keeps. Compose
 * takes a variable set in the installer's environment over .env's (the installer's commands inherit
 * it), so the ports checked are the ones it will publish.
 */
export const preflightValues = (ctx: Resolved, env: NodeJS.ProcessEnv = process.env): Record<string, string> => ({
  ...composeVariables(ctx.existing ?? {}),
  ...composeVariables(env),
  ...ctx.values,
})

/** The site's configuration as it stands: what is written, over the answers' values. */
export const siteConfig = (ctx: Resolved): Record<string, string> => ({ ...ctx.values, ...ctx.existing })

/**
 * The answers file an interactive run starts from: the one named (--answers), else the one a run
 * before wrote to the default output folder, so that a re-run offers what was written (data path,
 * tenant name and all) instead of the defaults; none on a first run.
 */
export function interactiveAnswersPath(given: string | undefined, cwd = process.cwd()): string | undefined {
  if (given) return given
  const written = resolve(cwd, DEFAULT_ANSWERS.outputDir, 'answers.yaml')
  return existsSync(written) ? written : undefined
}
