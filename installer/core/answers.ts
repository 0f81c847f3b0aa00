// The answers file: everything an install needs, so a run can be replayed with
// `--answers FILE --yes`. Secrets are written by reference ({env: NAME} or {file: PATH}), never
// inline, so the file can be kept in a repository or a ticket.
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { parse, stringify } from 'yaml'
import { isCidr, settings, type SettingName } from '../../config/schema.js'
import { registryProblem } from '../../config/images.js'
import { isSecret } from '../../config/secrets.js'
import { EMAIL_RE } from '../../common/email.js'
import { answersCommand } from './invocation.js'
import { DEFAULT_SITE, siteProblem } from './site.js'
import { parseAccepted, type AcceptedCheck } from './accepted-checks.js'

export const TARGETS = ['compose', 'helm'] as const
export type Target = (typeof TARGETS)[number]
export const MODES = ['connected', 'air-gapped'] as const
export type Mode = (typeof MODES)[number]

/** A setting's value: written out, or taken from an environment variable or a file when needed. */
export type ValueSource = string | { env: string } | { file: string }

export interface Answers {
  target: Target
  mode: Mode
  /**
   * Compose: the site's name on the engine. Its project, containers, network and volumes carry it, so two sites with
   * different names (and ports, and data paths) share an engine.
   */
  site: string
  /** Where PostgreSQL/MinIO data (compose) or nothing (helm) lives; preflight measures its disk. */
  dataPath: string
  /** Where the installer writes `.env` (compose) or `values.yaml` and the Secret (helm). */
  outputDir: string
  /** Kubernetes namespace and release name (helm). */
  namespace: string
  release: string
  /** Air-gapped helm: the private registry that holds the images (host[:port][/path]); --registry wins. */
  registry: string
  /**
   * Compose: the IP address on this machine the API (and the bundled MinIO) are published at,
   * ATRIUM_BIND_ADDRESS; '' keeps what is written, or 0.0.0.0 on a first install.
   */
  bindAddress: string
  /**
   * Air-gapped helm: the networks (CIDRs) of the site's PostgreSQL, Redis and S3 when the settings name them by host
   * name; the chart's egress policy admits these (installer/core/helm-values.ts).
   */
  servicesCidrs: string[]
  /** The first tenant and its owner, created after the first deploy (no email: none is created). */
  tenantName: string
  adminEmail: string
  /** Atrium settings (config/schema.ts names). */
  config: Partial<Record<SettingName, ValueSource>>
  /** Failed checks an admin accepted, who and when (core/accepted-checks.ts): a replay applies them again. */
  acceptedChecks: AcceptedCheck[]
}

export const DEFAULT_ANSWERS: Answers = {
  target: 'compose',
  mode: 'connected',
  site: DEFAULT_SITE,
  dataPath: '/var/lib/atrium',
  outputDir: './atrium',
  namespace: 'atrium',
  release: 'atrium',
  registry: '',
  bindAddress: '',
  servicesCidrs: [],
  tenantName: 'Default',
  adminEmail: '',
  config: {},
  acceptedChecks: [],
}

const isSetting = (name: string): name is SettingName => Object.hasOwn(settings, name)
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Null for an IP address Docker can publish a port at, else what it must be. */
export const bindAddressProblem = (address: string): string | null =>
  isIP(address)
    ? null
    : `must be an IP address of this machine (got "${address}"): 0.0.0.0 for every interface, 127.0.0.1 for this machine only`

/** Reads and checks an answers file; every problem at once, with where it is. */
export function parseAnswers(text: string): { answers: Answers; problems: string[] } {
  const problems: string[] = []
  let doc: unknown
  try {
    doc = parse(text) ?? {}
  } catch (err) {
    return { answers: DEFAULT_ANSWERS, problems: [`not valid YAML: ${(err as Error).message.split('\n')[0]}`] }
  }
  if (!isObject(doc))
    return { answers: DEFAULT_ANSWERS, problems: ['the answers file must be a YAML mapping (key: value)'] }
  const answers: Answers = { ...DEFAULT_ANSWERS, config: {} }
  const known = new Set([...Object.keys(DEFAULT_ANSWERS)])
  for (const key of Object.keys(doc))
    if (!known.has(key)) problems.push(`${key}: not a known answer (known: ${[...known].join(', ')})`)
  const choice = <T extends string>(key: 'target' | 'mode', allowed: readonly T[]) => {
    const v = doc[key]
    if (v === undefined) return
    if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) (answers[key] as string) = v
    else problems.push(`${key}: must be one of ${allowed.join(', ')}`)
  }
  choice('target', TARGETS)
  choice('mode', MODES)
  if (doc.adminEmail !== undefined) {
    if (typeof doc.adminEmail === 'string' && (doc.adminEmail === '' || EMAIL_RE.test(doc.adminEmail.trim())))
      answers.adminEmail = doc.adminEmail.trim()
    else problems.push('adminEmail: must be an email address (or empty: no first tenant is created)')
  }
  for (const key of ['dataPath', 'outputDir', 'namespace', 'release', 'tenantName'] as const) {
    const v = doc[key]
    if (v === undefined) continue
    if (typeof v === 'string' && v.trim()) answers[key] = v.trim()
    else problems.push(`${key}: must be a non-empty string`)
  }
  if (doc.bindAddress !== undefined) {
    const address = typeof doc.bindAddress === 'string' ? doc.bindAddress.trim() : String(doc.bindAddress)
    const problem = address === '' ? null : bindAddressProblem(address)
    if (problem) problems.push(`bindAddress: ${problem}`)
    else answers.bindAddress = address
  }
  if (doc.site !== undefined) {
    // A number is a name too (YAML reads `site: 2` so); a list or a mapping is none.
    const site = typeof doc.site === 'string' || typeof doc.site === 'number' ? String(doc.site).trim() : ''
    const problem = siteProblem(site)
    if (problem) problems.push(problem)
    else answers.site = site
  }
  if (doc.registry !== undefined) {
    const registry = typeof doc.registry === 'string' ? doc.registry.trim() : String(doc.registry)
    const problem = registry === '' ? null : registryProblem(registry, 'registry:')
    if (problem) problems.push(problem)
    else answers.registry = registry
  }
  if (doc.servicesCidrs !== undefined) {
    const cidrs = cidrList(doc.servicesCidrs)
    if ('problem' in cidrs) problems.push(`servicesCidrs: ${cidrs.problem}`)
    else answers.servicesCidrs = cidrs.value
  }
  if (doc.acceptedChecks !== undefined) {
    const accepted = parseAccepted(doc.acceptedChecks)
    answers.acceptedChecks = accepted.value
    problems.push(...accepted.problems)
  }
  const config = doc.config ?? {}
  if (!isObject(config)) problems.push('config: must be a mapping of Atrium settings')
  else {
    for (const [name, v] of Object.entries(config)) {
      if (!isSetting(name)) {
        problems.push(`config.${name}: not an Atrium setting`)
        continue
      }
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') answers.config[name] = String(v)
      else if (isObject(v) && Object.keys(v).length === 1 && typeof v.env === 'string')
        answers.config[name] = { env: v.env }
      else if (isObject(v) && Object.keys(v).length === 1 && typeof v.file === 'string')
        answers.config[name] = { file: v.file }
      else problems.push(`config.${name}: must be a value, {env: VARIABLE} or {file: PATH}`)
    }
  }
  return { answers, problems }
}

/** CIDRs as a YAML list or comma-separated text (as typed at a prompt); every entry that is none named. */
export function cidrList(v: unknown): { value: string[] } | { problem: string } {
  const items = typeof v === 'string' ? v.split(',') : Array.isArray(v) ? (v as unknown[]) : null
  if (!items?.every((i) => typeof i === 'string')) return { problem: 'must be a list of CIDRs, e.g. [10.20.0.0/16]' }
  const list = items.map((i) => i.trim()).filter(Boolean)
  const bad = list.filter((c) => !isCidr(c))
  return bad.length ? { problem: `not CIDRs: ${bad.join(', ')} (write e.g. 10.20.0.0/16)` } : { value: list }
}

/**
 * The settings with every reference read: {env} from the environment, {file} from a file relative
 * to the answers file (trailing newline dropped). A variable that is not set falls back to the
 * configuration already written (a replay on the same site); missing both is a problem, never an
 * empty value.
 */
export function resolveConfig(
  answers: Answers,
  opts: { env?: NodeJS.ProcessEnv; baseDir?: string; existing?: Record<string, string> | null } = {},
): { values: Record<string, string>; problems: string[] } {
  const env = opts.env ?? process.env
  const values: Record<string, string> = {}
  const problems: string[] = []
  for (const [name, source] of Object.entries(answers.config) as [SettingName, ValueSource][]) {
    if (typeof source === 'string') values[name] = source
    else if ('env' in source) {
      const v = env[source.env] ?? opts.existing?.[name]
      if (v === undefined) problems.push(`config.${name}: the environment variable ${source.env} is not set`)
      else values[name] = v
    } else {
      const path = resolve(opts.baseDir ?? '.', source.file)
      try {
        values[name] = readFileSync(path, 'utf8').replace(/\r?\n$/, '')
      } catch (err) {
        problems.push(`config.${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
      }
    }
  }
  return { values, problems }
}

/** The env variable a secret is referenced by in a written answers file. */
export const secretVariable = (name: SettingName) => `ATRIUM_${name}`

/** A secret given as its value: the written answers reference it by secretVariable instead. */
const typedInSecret = (name: SettingName, source: ValueSource) => isSecret(name) && typeof source === 'string'

/**
 * The answers file for a replay: ordinary settings inline, each secret as a reference. A secret
 * that already had a reference keeps it; one typed in becomes {env: ATRIUM_<NAME>}. Secrets the
 * installer keeps in the written configuration (ENCRYPTION_MASTER_KEY) are left out: a replay
 * reads them back from there. Paths are written absolute (the folders as this run used them, from
 * the working directory; a {file} from `baseDir`, the folder of the answers file it came from), so
 * the file replays the same from any working directory, wherever it is kept.
 */
export function renderAnswers(answers: Answers, keptInConfig: readonly SettingName[] = [], baseDir = '.'): string {
  const config: Record<string, ValueSource> = {}
  for (const [name, source] of Object.entries(answers.config) as [SettingName, ValueSource][]) {
    if (keptInConfig.includes(name)) continue
    config[name] = typedInSecret(name, source)
      ? { env: secretVariable(name) }
      : typeof source === 'object' && 'file' in source
        ? { file: resolve(baseDir, source.file) }
        : source
  }
  // The acceptances last, and only when there are any: most sites have none.
  const { acceptedChecks, ...rest } = answers
  const doc = {
    ...rest,
    dataPath: resolve(answers.dataPath),
    outputDir: resolve(answers.outputDir),
    config,
    ...(acceptedChecks.length ? { acceptedChecks } : {}),
  }
  // The file is written as outputDir/answers.yaml (core/context.ts configFiles): the replay names it there.
  const replay = answersCommand('install', join(doc.outputDir, 'answers.yaml'))
  return `# Atrium installer answers. Replay: ${replay}\n# Secrets are references: set the variables named here (or point them at files) before replaying.\n${stringify(doc)}`
}

/** The secrets a replay of these answers needs from the environment. */
export function requiredVariables(answers: Answers, keptInConfig: readonly SettingName[] = []): string[] {
  return (Object.entries(answers.config) as [SettingName, ValueSource][])
    .filter(([name, source]) => !keptInConfig.includes(name) && typedInSecret(name, source))
    .map(([name]) => secretVariable(name))
}

export function loadAnswers(path: string): { answers: Answers; problems: string[]; baseDir: string } {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    return {
      answers: DEFAULT_ANSWERS,
      problems: [`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`],
      baseDir: '.',
    }
  }
  return { ...parseAnswers(text), baseDir: dirname(resolve(path)) }
}
