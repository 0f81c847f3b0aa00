// The configuration the installer writes: an env file (Compose's `.env`) of Atrium settings, checked
// by the one schema (config/schema.ts). The rules that matter most: a secret that exists is never
// regenerated (a new ENCRYPTION_MASTER_KEY would make every stored customer secret unreadable), the
// file is private to its owner (0600), and an existing file is shown as a diff before it changes.
import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { parseConfig, settings, type Setting, type SettingName } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'

export type EnvValues = Partial<Record<SettingName, string>>

/** Secrets the installer makes itself when nobody supplied one, and keeps for good afterwards. */
export const GENERATED_SECRETS: Partial<Record<SettingName, () => string>> = {
  ENCRYPTION_MASTER_KEY: () => randomBytes(32).toString('base64'),
}

/** Secrets that must never change once written: changing them loses data rather than access. */
export const IMMUTABLE_SECRETS: readonly SettingName[] = ['ENCRYPTION_MASTER_KEY']

const isSetting = (name: string): name is SettingName => Object.hasOwn(settings, name)

/**
 * Reads KEY=VALUE lines as Compose does: `#` comments and blank lines skipped, an optional
 * `export `, values in single quotes taken literally, in double quotes with \" and \\ escapes.
 */
export function parseEnvFile(text: string): { values: Record<string, string>; problems: string[] } {
  const values: Record<string, string> = {}
  const problems: string[] = []
  text.split(/\r?\n/).forEach((line, i) => {
    const trimmed = line.trim()
    if (!trimmed || trimmed.startsWith('#')) return
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(trimmed)
    if (!m) {
      problems.push(`line ${i + 1} is not KEY=VALUE`)
      return
    }
    const [, key, raw] = m as unknown as [string, string, string]
    if (raw.startsWith("'")) {
      if (!raw.endsWith("'") || raw.length < 2) problems.push(`line ${i + 1}: ${key} has an unclosed quote`)
      else values[key] = raw.slice(1, -1)
    } else if (raw.startsWith('"')) {
      if (!/^"(?:[^"\\]|\\.)*"$/.test(raw)) problems.push(`line ${i + 1}: ${key} has an unclosed quote`)
      else values[key] = raw.slice(1, -1).replace(/\\(.)/g, '$1')
    } else {
      values[key] = raw.replace(/\s+#.*$/, '')
    }
  })
  return { values, problems }
}

/** Quotes a value so parseEnvFile (and Compose) read it back unchanged. */
function quote(value: string): string {
  if (/^[A-Za-z0-9_./:@,+=-]*$/.test(value)) return value
  if (!value.includes("'")) return `'${value}'`
  return `"${value.replace(/["\\]/g, '\\$&')}"`
}

/** The env file, in the schema's order, with each setting's description above it. */
export function renderEnvFile(values: EnvValues): string {
  const lines = [
    '# Atrium settings, written by the installer. Keep this file private (mode 0600) and backed up:',
    '# it holds ENCRYPTION_MASTER_KEY, without which stored secrets cannot be read.',
  ]
  for (const [name, s] of Object.entries(settings) as [SettingName, Setting][]) {
    const value = values[name]
    if (value === undefined || value === '') continue
    lines.push('', `# ${s.description}`, `${name}=${quote(value)}`)
  }
  return lines.join('\n') + '\n'
}

export interface ConfigChange {
  name: SettingName
  change: 'added' | 'changed' | 'removed'
  /** What a person sees: the values for ordinary settings, never a secret's value. */
  shown: string
}

export interface ConfigPlan {
  values: EnvValues
  /** Secrets made now because none existed (settings, and the Compose bundle's passwords). */
  generated: string[]
  /** Differences from the file on disk (everything is added on a first install). */
  changes: ConfigChange[]
  /** Why this configuration cannot be written; empty when it can. */
  problems: string[]
}

/**
 * Merges what the admin answered over what is already configured, fills in secrets that have never
 * existed, and checks the result against the schema. Blank answers keep the existing value.
 */
export function planConfig(answers: Record<string, string>, existing: Record<string, string> | null): ConfigPlan {
  const problems: string[] = []
  const values: EnvValues = {}
  for (const [name, value] of Object.entries(existing ?? {})) if (isSetting(name)) values[name] = value
  for (const [name, value] of Object.entries(answers)) {
    if (!isSetting(name)) {
      problems.push(`${name} is not an Atrium setting`)
      continue
    }
    if (value === '') continue
    const before = existing?.[name]
    if (IMMUTABLE_SECRETS.includes(name) && before && before !== value) {
      problems.push(
        `${name} is already set and cannot be changed: every secret stored under it would become unreadable. Remove it from the answers to keep the existing one.`,
      )
      continue
    }
    values[name] = value
  }
  const generated: SettingName[] = []
  for (const [name, make] of Object.entries(GENERATED_SECRETS) as [SettingName, () => string][]) {
    if (values[name]) continue
    values[name] = make()
    generated.push(name)
  }
  problems.push(...parseConfig(values).problems)
  return { values, generated, changes: diffConfig(existing ?? {}, values), problems }
}

export function diffConfig(before: Record<string, string>, after: EnvValues): ConfigChange[] {
  const changes: ConfigChange[] = []
  for (const name of Object.keys(settings) as SettingName[]) {
    const a = before[name] ?? ''
    const b = after[name] ?? ''
    if (a === b) continue
    const change = !a ? 'added' : !b ? 'removed' : 'changed'
    const shown = isSecret(name)
      ? `(secret ${change})`
      : change === 'changed'
        ? `${a} -> ${b}`
        : change === 'added'
          ? b
          : a
    changes.push({ name, change, shown })
  }
  return changes
}

/** The env file on disk, or null when there is none yet. */
export function readEnvFile(path: string): { values: Record<string, string>; problems: string[] } | null {
  if (!existsSync(path)) return null
  return parseEnvFile(readFileSync(path, 'utf8'))
}

/**
 * Writes a file whole or not at all (a temporary file renamed over it), created 0600 so no other
 * user can read the secrets even for a moment.
 */
export function writePrivateFile(path: string, text: string): void {
  const tmp = join(dirname(path), `.${Date.now()}-${process.pid}.atrium-tmp`)
  try {
    writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' })
    chmodSync(tmp, 0o600)
    renameSync(tmp, path)
  } catch (err) {
    // A full disk leaves no half-written temporary file behind, and says so in words.
    rmSync(tmp, { force: true })
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOSPC' || code === 'EDQUOT')
      throw new Error(`cannot write ${path}: the disk under ${dirname(path)} is full (${code})`, {
        cause: err,
      })
    throw err
  }
}

export const writeEnvFile = (path: string, values: EnvValues): void => writePrivateFile(path, renderEnvFile(values))

/** The file holds exactly `text`, private (0600): writing it again would change nothing. */
export function holdsPrivately(path: string, text: string): boolean {
  try {
    return (statSync(path).mode & 0o777) === 0o600 && readFileSync(path, 'utf8') === text
  } catch {
    return false
  }
}
