// The support bundle: one zip for the vendor's support with versions, the check results, the
// configuration with every secret redacted, and recent logs. What is secret is config/secrets.ts'
// isSecret, the one rule; every text in the bundle, logs included, is scrubbed of every secret
// value in any spelling it is likely to be printed in, because programs do log connection strings.
import { redisListOf } from '../../common/redis-topology.js'
import { createWriteStream } from 'node:fs'
import { arch, platform, release } from 'node:os'
import { pipeline } from 'node:stream/promises'
import { defaultText } from '../../config/bundles.js'
import { COMPOSE_VARIABLES, MINIO_ATRIUM_USER } from '../../config/compose-variables.js'
import { BUNDLES, composeArgs } from './compose-bundle.js'
import { settings, type Setting } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'
import { json, zipStream, type ZipEntry } from '../../common/zip.js'
import { redactor } from '../../common/redact.js'
import { VERSION } from '../../common/version.js'
import type { CommandResult, Runner } from './run.js'
import { renderAnswers, type Answers } from './answers.js'
import type { CheckResult } from './checks/check.js'
import { secretName } from './helm-values.js'

export const LOG_LINES = 2000
const REDACTED = '<redacted>'
/**
 * Values the product itself publishes (defaults and examples in the env templates) hide nothing,
 * though one may sit under a secret name (Atrium's user of the bundled MinIO is `atrium-server`,
 * its R2_ACCESS_KEY_ID); searching texts for them would only blank the product's name out of every log.
 */
const PUBLISHED = new Set([
  ...Object.values(settings).map((s) => defaultText(s as Setting)),
  ...Object.values(COMPOSE_VARIABLES).map((v) => v.example),
  MINIO_ATRIUM_USER,
])
/** A URL's user and password in any text, known or not. */
const URL_CREDENTIALS = /([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]+@/gi

const urlOf = (text: string) => {
  try {
    return new URL(text)
  } catch {
    return null
  }
}
const decoded = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}
const jsonOf = (text: string): unknown => {
  if (!/^\s*[[{]/.test(text)) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * The secret values one name=value holds: the whole value when the name is secret; a URL's
 * password whatever the name (its user too when it comes alone: https://TOKEN@host); and in JSON
 * each field by its own name, so OIDC_PROVIDERS' clientSecret is found on its own.
 */
function secretsIn(name: string, value: string, out: Set<string>): void {
  if (isSecret(name)) out.add(value)
  const url = urlOf(value)
  if (url?.password || url?.username) out.add(decoded(url.password || url.username))
  // A Redis Sentinel set's or Cluster's URL (a list of hosts WHATWG URL reads wrongly, if at all):
  // its password and the Sentinels' own.
  const list = redisListOf(value)
  for (const secret of [list?.password, list?.kind === 'sentinel' ? list.sentinelPassword : undefined])
    if (secret) out.add(secret)
  const walk = (key: string, node: unknown): void => {
    if (Array.isArray(node)) node.forEach((n) => walk(key, n))
    else if (node !== null && typeof node === 'object') for (const [k, v] of Object.entries(node)) walk(k, v)
    else if (node !== null && node !== undefined) secretsIn(key, String(node), out)
  }
  walk(name, jsonOf(value))
}

/**
 * The scrubber for a configuration: removes each of its secret values in every spelling
 * (common/redact.ts), then the credentials of every URL in the text.
 */
export function scrubber(values: Record<string, string>): (text: string) => string {
  const redact = redactor(secretValues(values), REDACTED)
  return (text) => redact(text).replace(URL_CREDENTIALS, `$1${REDACTED}@`)
}

/** Every secret value a configuration holds (as secretsIn finds them), less those the product publishes. */
export function secretValues(values: Record<string, string>): string[] {
  const found = new Set<string>()
  for (const [name, value] of Object.entries(values)) secretsIn(name, value, found)
  return [...found].filter((n) => !PUBLISHED.has(n))
}

/** The configuration as a support engineer may see it: secret values replaced by their length, the rest scrubbed. */
export function redactConfig(values: Record<string, string>): Record<string, string> {
  const clean = scrubber(values)
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, isSecret(k) && v ? `<redacted: ${v.length} characters>` : clean(v)]),
  )
}

/**
 * The commands whose output the bundle holds, for the target. Compose: the project and files the
 * installer deployed with (without them `docker compose` finds no project). Helm: the pods as
 * Kubernetes describes them, their logs and those of the containers before a restart (a crash's
 * cause), the namespace's events, the migration Job's log, and the release's status and history.
 */
export function logCommands(
  answers: Answers,
  envFile: string,
  o: { bundles?: Pick<typeof BUNDLES, 'compose'> } = {},
): { name: string; file: string; args: string[] }[] {
  if (answers.target === 'compose') {
    const compose = composeArgs(answers, envFile, o)
    return [
      { name: 'logs/compose-ps.txt', file: 'docker', args: [...compose, 'ps', '--all'] },
      {
        name: 'logs/compose.txt',
        file: 'docker',
        args: [...compose, 'logs', '--no-color', '--timestamps', '--tail', String(LOG_LINES)],
      },
    ]
  }
  const ns = ['-n', answers.namespace]
  const release = `app.kubernetes.io/instance=${answers.release}`
  // --ignore-errors: one pod without what is asked (no earlier run of a container to give --previous, a container
  // still waiting to start) would otherwise fail the whole command, losing every other pod's logs.
  const logs = ['--all-containers', '--prefix', '--timestamps', '--tail', String(LOG_LINES), '--ignore-errors']
  return [
    {
      name: 'logs/kubectl-get.txt',
      file: 'kubectl',
      args: [
        'get',
        'pods,jobs,deployments,replicasets,services,ingresses,networkpolicies',
        ...ns,
        '-l',
        release,
        '-o',
        'wide',
      ],
    },
    { name: 'logs/pods-describe.txt', file: 'kubectl', args: ['describe', 'pods', ...ns, '-l', release] },
    { name: 'logs/pods.txt', file: 'kubectl', args: ['logs', ...ns, '-l', release, ...logs] },
    { name: 'logs/pods-previous.txt', file: 'kubectl', args: ['logs', ...ns, '-l', release, '--previous', ...logs] },
    {
      name: 'logs/migrations.txt',
      file: 'kubectl',
      args: ['logs', ...ns, '-l', `${release},app.kubernetes.io/component=migrate`, ...logs],
    },
    { name: 'logs/events.txt', file: 'kubectl', args: ['get', 'events', ...ns, '--sort-by=.lastTimestamp'] },
    { name: 'logs/helm-status.txt', file: 'helm', args: ['status', answers.release, ...ns] },
    { name: 'logs/helm-history.txt', file: 'helm', args: ['history', answers.release, ...ns, '--max', '20'] },
  ]
}

/** The newest stopped containers of a Compose project whose logs the bundle holds, and how much of each. */
export const STOPPED_CONTAINERS = 20
export const STOPPED_LOG_LINES = 500
export const STOPPED_LOG_BYTES = 256 * 1024

/** One row per container: what `docker ps` shows of it, tab-separated. */
const PS_FORMAT = '{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Status}}\t{{.CreatedAt}}\t{{.Image}}'

/** A command's output as a log entry shows it: the command, how it ended, stdout, then stderr. */
const shown = (file: string, r: CommandResult, stdout = r.stdout) =>
  `$ ${r.command}\n${r.notFound ? `(${file} is not installed here)\n` : `(exit code ${r.exitCode}${r.timedOut ? ', timed out' : ''})\n`}${stdout}\n${r.stderr ? `--- stderr ---\n${r.stderr}\n` : ''}`

/** docker logs --timestamps' two streams as one, in time order (a stable sort keeps each stream's order). */
function interleaved(stdout: string, stderr: string): string {
  const lines = [...stdout.split('\n'), ...stderr.split('\n')].filter(Boolean)
  const at = (line: string) => Date.parse(line.slice(0, line.indexOf(' '))) || 0
  return lines.sort((a, b) => at(a) - at(b)).join('\n')
}

/** The last `max` bytes of a text, from a line's start, saying how much was left out. */
function tail(text: string, max: number): string {
  const bytes = Buffer.from(text)
  if (bytes.length <= max) return text
  const kept = bytes.subarray(bytes.length - max).toString()
  const from = kept.indexOf('\n') + 1
  return `(${bytes.length - max + from} earlier bytes left out)\n${kept.slice(from)}`
}

/**
 * Every container of the Compose project by its label, whatever the bundle's files now say (one-off
 * runs and services an earlier release had included), and the logs of the newest stopped ones: an
 * exited one-shot container (migrate, minio-init) or one an upgrade left behind holds the cause of a
 * failure. `docker compose logs` covers the running ones.
 */
export async function stoppedContainerLogs(runner: Runner, project: string): Promise<{ name: string; data: string }[]> {
  const ps = await runner(
    'docker',
    ['ps', '--all', '--no-trunc', '--filter', `label=com.docker.compose.project=${project}`, '--format', PS_FORMAT],
    { timeoutMs: 60_000 },
  )
  const listed = { name: 'logs/containers.txt', data: shown('docker', ps) }
  if (ps.exitCode !== 0) return [listed]
  const stopped = ps.stdout
    .split('\n')
    .map((line) => line.split('\t'))
    .filter((f) => f.length === 6 && f[2] !== 'running')
    .slice(0, STOPPED_CONTAINERS)
  const logs = await Promise.all(
    stopped.map(async ([id, name, , status, created]) => {
      const r = await runner('docker', ['logs', '--timestamps', '--tail', String(STOPPED_LOG_LINES), id!], {
        timeoutMs: 60_000,
      })
      const text = tail(interleaved(r.stdout, r.stderr), STOPPED_LOG_BYTES)
      return {
        name: `logs/stopped/${name!.replace(/[^\w.-]/g, '_')}.txt`,
        data: `${status}, created ${created}\n${shown('docker', { ...r, stderr: '' }, text)}`,
      }
    }),
  )
  return [listed, ...logs]
}

export interface BundleInput {
  answers: Answers
  /** The configuration written for the target (secrets included: they are redacted here). */
  config: Record<string, string>
  checks: CheckResult[]
  runner: Runner
  envFile: string
  now?: Date
}

export async function bundleEntries(i: BundleInput): Promise<ZipEntry[]> {
  const compose = composeArgs(i.answers, i.envFile)
  const [logs, stopped] = await Promise.all([
    Promise.all(
      logCommands(i.answers, i.envFile).map(async (c) => ({
        name: c.name,
        data: shown(c.file, await i.runner(c.file, c.args, { timeoutMs: 60_000 })),
      })),
    ),
    i.answers.target === 'compose'
      ? stoppedContainerLogs(i.runner, compose[compose.indexOf('--project-name') + 1]!)
      : Promise.resolve([]),
  ])
  const versions = {
    atrium: VERSION,
    node: process.version,
    os: `${platform()} ${release()} ${arch()}`,
    tools: i.checks.filter((c) => c.id.startsWith('tools.')).map((c) => ({ id: c.id, found: c.found })),
    target: i.answers.target,
    mode: i.answers.mode,
    // As the written configuration has it, which is what the server runs with.
    airGapped: i.config.AIR_GAPPED === 'true',
    // The Compose project (and volume prefix) the logs are of: one engine may hold several sites.
    site: i.answers.target === 'compose' ? i.answers.site : undefined,
    secretName: i.answers.target === 'helm' ? secretName(i.answers.release) : undefined,
    createdAt: (i.now ?? new Date()).toISOString(),
  }
  const entries = [
    { name: 'versions.json', data: json(versions) },
    { name: 'checks.json', data: json(i.checks) },
    { name: 'config.redacted.json', data: json(redactConfig(i.config)) },
    { name: 'answers.yaml', data: renderAnswers(i.answers) },
    ...logs,
    ...stopped,
  ]
  // Every entry, whatever it is: a secret has no business in any of them.
  const clean = scrubber(i.config)
  return entries.map((e) => ({ name: e.name, data: clean(e.data) }))
}

export async function writeSupportBundle(path: string, i: BundleInput): Promise<{ size: number; sha256: string }> {
  const zip = zipStream(await bundleEntries(i), i.now)
  await pipeline(zip.stream, createWriteStream(path, { mode: 0o600 }))
  return zip.measured
}
