// The support bundle: one zip for the vendor's support with versions, the check results, the
// configuration with every secret redacted, and recent logs. Secrets are removed from the logs
// too, wherever their values appear, because programs do log connection strings.
import { createWriteStream } from 'node:fs'
import { arch, platform, release } from 'node:os'
import { pipeline } from 'node:stream/promises'
import { settings, type Setting, type SettingName } from '../../config/schema.js'
import { json, zipStream, type ZipEntry } from '../../server/zip.js'
import { VERSION } from '../../server/version.js'
import type { Runner } from '../deploy/run.js'
import { renderAnswers, type Answers } from './answers.js'
import type { CheckResult } from './checks/check.js'
import { secretName } from './helm-values.js'

export const LOG_LINES = 2000

const isSecret = (name: string) => Object.hasOwn(settings, name) && (settings[name as SettingName] as Setting).secret

/** The configuration as a support engineer may see it: secret values replaced by their length. */
export function redactConfig(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, isSecret(k) && v ? `<redacted: ${v.length} characters>` : v]))
}

/**
 * Removes every secret value (and the password part of secret URLs, which may be logged apart
 * from the URL) from a text.
 */
export function scrub(text: string, values: Record<string, string>): string {
  const needles = new Set<string>()
  for (const [k, v] of Object.entries(values)) {
    if (!isSecret(k) || v.length < 4) continue
    needles.add(v)
    try {
      const u = new URL(v)
      if (u.password) needles.add(decodeURIComponent(u.password)).add(u.password)
    } catch { /* not a URL */ }
  }
  let out = text
  // Longest first, so a URL goes whole before its password is looked for.
  for (const n of [...needles].sort((a, b) => b.length - a.length)) out = out.split(n).join('<redacted>')
  return out
}

/** The commands whose output the bundle holds, for the target. */
export function logCommands(answers: Answers, envFile: string): { name: string; file: string; args: string[] }[] {
  if (answers.target === 'compose') {
    return [
      { name: 'logs/compose-ps.txt', file: 'docker', args: ['compose', '--env-file', envFile, 'ps', '--all'] },
      { name: 'logs/compose.txt', file: 'docker', args: ['compose', '--env-file', envFile, 'logs', '--no-color', '--timestamps', '--tail', String(LOG_LINES)] },
    ]
  }
  const selector = `app.kubernetes.io/instance=${answers.release}`
  return [
    { name: 'logs/kubectl-get.txt', file: 'kubectl', args: ['get', 'pods,jobs,deployments,events', '-n', answers.namespace, '-o', 'wide'] },
    { name: 'logs/pods.txt', file: 'kubectl', args: ['logs', '-n', answers.namespace, '-l', selector, '--all-containers', '--prefix', '--timestamps', '--tail', String(LOG_LINES)] },
    { name: 'logs/helm-status.txt', file: 'helm', args: ['status', answers.release, '-n', answers.namespace] },
  ]
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
  const logs = await Promise.all(logCommands(i.answers, i.envFile).map(async (c) => {
    const r = await i.runner(c.file, c.args, { timeoutMs: 60_000 })
    const head = `$ ${r.command}\n${r.notFound ? `(${c.file} is not installed here)\n` : `(exit code ${r.exitCode}${r.timedOut ? ', timed out' : ''})\n`}`
    return { name: c.name, data: scrub(`${head}${r.stdout}\n${r.stderr ? `--- stderr ---\n${r.stderr}\n` : ''}`, i.config) }
  }))
  const versions = {
    atrium: VERSION, node: process.version, os: `${platform()} ${release()} ${arch()}`,
    tools: i.checks.filter((c) => c.id.startsWith('tools.')).map((c) => ({ id: c.id, found: c.found })),
    target: i.answers.target, mode: i.answers.mode, secretName: i.answers.target === 'helm' ? secretName(i.answers.release) : undefined,
    createdAt: (i.now ?? new Date()).toISOString(),
  }
  return [
    { name: 'versions.json', data: json(versions) },
    { name: 'checks.json', data: scrub(json(i.checks), i.config) },
    { name: 'config.redacted.json', data: json(redactConfig(i.config)) },
    { name: 'answers.yaml', data: scrub(renderAnswers(i.answers), i.config) },
    ...logs,
  ]
}

export async function writeSupportBundle(path: string, i: BundleInput): Promise<{ size: number; sha256: string }> {
  const zip = zipStream(await bundleEntries(i), i.now)
  await pipeline(zip.stream, createWriteStream(path, { mode: 0o600 }))
  return zip.measured
}
