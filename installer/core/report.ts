// What each command returns: plain data (status, checks, files written, messages, exit code). One
// renderer (ui/output.tsx) shows it, either as text for people or, with --json, as the object
// itself; the text is made here, from the data alone, so both always say the same thing.
import type { Image } from '../../config/images.js'
import { neverAccepted, refusals, type AcceptedCheck } from './accepted-checks.js'
import type { Created, FirstAdmin } from './first-admin.js'
import { overallStatus, type CheckResult, type CheckStatus } from './checks/check.js'
import type { ConfigChange } from './config-file.js'
import type { StepRecord } from './steps.js'

/** One image as the kit pins it. */
export interface KitImage {
  name: string
  /** registry/repository:tag, as the bundles name it. */
  ref: string
  /** The image ID: sha256 of its configuration, unchanged by save, load and push. */
  id: string
  /** registry/repository@sha256:... where it was pulled from a registry; null for an image built locally. */
  digest: string | null
  /** os/architecture. */
  platform: string
}

/** A kit as opened and checked (deploy/airgap.ts openKit), or as images save wrote it. */
export interface Kit {
  dir: string
  /** The images tarball. */
  path: string
  bytes: number
  images: KitImage[]
  /** The vendor key's kid, or null for a kit saved on site (`images save`), which is unsigned. */
  signedBy: string | null
  /** That key's JWK thumbprint (RFC 7638, SHA-256): what the admin compares with the vendor's published one. */
  fingerprint: string | null
}

/** Exit codes (docs/installer.md): scripts branch on these. */
export const EXIT = { ok: 0, error: 1, badInput: 2, checkFailed: 3, warningsOnly: 4 } as const
export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** A failed check stops a command (3); with --strict, so does a warning (4). */
export function exitFor(checks: readonly CheckResult[], strict: boolean): ExitCode {
  const status = overallStatus(checks)
  if (status === 'fail') return EXIT.checkFailed
  if (status === 'warn' && strict) return EXIT.warningsOnly
  return EXIT.ok
}

/** A command that was, or would be, run: for a dry run's plan. */
export interface PlannedCommand {
  title: string
  command: string[]
}

/** A command that ran (null exit code: it never ended, or was skipped because a probe made it unnecessary). */
export interface StepReport {
  title: string
  command: string
  exitCode: number | null
  skipped: boolean
}

export interface PreflightReport {
  command: 'preflight'
  exitCode: ExitCode
  status: CheckStatus
  checks: CheckResult[]
}

export interface ConfigureReport {
  command: 'configure'
  exitCode: ExitCode
  status: CheckStatus
  checks: CheckResult[]
  /** Where it stopped before writing: at checks that did not pass, or at problems in the configuration. */
  stopped: 'checks' | 'problems' | null
  /** The acceptances that let a stopping check through this run (--accept-check, or recorded in the answers). */
  accepted: AcceptedCheck[]
  /** Why the configuration cannot be written; empty when it can. */
  problems: string[]
  /** Differences from the configuration already written; a secret only as `(secret changed)`. */
  changes: ConfigChange[]
  /** Secrets made by this run (kept on every re-run after it). */
  generated: string[]
  /** The files this run writes (or would write, on a dry run). */
  files: string[]
  /** Those of them that hold this configuration already: left as they are. */
  unchanged: string[]
  written: boolean
  /** The command that replays this run; null when it stopped before planning. */
  replay: string | null
  /** A run before this one stopped before its deploy answered; what it had staged was dropped. */
  leftBehind: boolean
  /** Written staged (install): they replace the files in use once the deploy answers. */
  staged: boolean
}

/** A configure report that stops at its checks: nothing planned yet (configure fills in the rest when it goes on). */
export const checkedOnly = (checks: CheckResult[], exitCode: ExitCode): ConfigureReport => ({
  command: 'configure',
  exitCode,
  status: overallStatus(checks),
  checks,
  stopped: 'checks',
  accepted: [],
  problems: [],
  changes: [],
  generated: [],
  files: [],
  unchanged: [],
  written: false,
  replay: null,
  leftBehind: false,
  staged: false,
})

export interface InstallReport extends Omit<ConfigureReport, 'command'> {
  command: 'install'
  /** A dry run: every command the deploy would run. */
  deploy: PlannedCommand[]
  steps: StepReport[]
  /**
   * Where the deploy stopped (done when it all worked); null when it did not start (a dry run, or configure stopped).
   */
  stage: 'bundle' | 'deploy' | 'ready' | 'tenant' | 'done' | null
  deployed: boolean
  ready: boolean
  /** Where Atrium answers. */
  url: string | null
  /** The first admin: made by this run (its password and API key, shown this once), or by an earlier one. */
  firstAdmin: Created | FirstAdmin | null
  /** What went wrong, with the failing command's output. */
  error: string | null
  /** What an admin reads at the end. */
  summary: string[]
  /** An upgrade: the version it replaced and the backup it took first (null when --skip-backup). */
  upgrade: { from: string; backup: { path: string; sha256: string } | null } | null
  /** Each step of the install (and upgrade) that the step runner reached: its stage, outcome and time. */
  record: StepRecord[]
}

/** A site backup in the numbers an admin checks. */
export interface BackupSummary {
  atriumVersion: string
  schemaVersion: number
  createdAt: string
  tables: number
  rows: number
  databaseBytes: number
  objects: number
  objectBytes: number
}

export interface BackupReport {
  command: 'backup'
  exitCode: ExitCode
  path: string
  bytes: number
  /** Of the whole archive, as sha256sum prints it. */
  sha256: string
  backup: BackupSummary | null
  error: string | null
}

export interface RestoreReport {
  command: 'restore'
  exitCode: ExitCode
  input: string
  backup: BackupSummary | null
  /** Refused before anything changed (damaged, wrong passphrase, newer, target not empty). */
  refused: boolean
  /** The data is back (the deploy after it may still have failed). */
  restored: boolean
  steps: StepReport[]
  ready: boolean
  url: string | null
  error: string | null
  summary: string[]
  /** Each step of the restore that the step runner reached (the checks, then the changes). */
  record: StepRecord[]
}

export interface UninstallReport {
  command: 'uninstall'
  exitCode: ExitCode
  /** The site's name: its Compose project, or its Helm release. */
  site: string
  dryRun: boolean
  /** Every command it runs (or, on a dry run, would run). */
  plan: PlannedCommand[]
  steps: StepReport[]
  /** What --delete-data removed (or, on a dry run, would remove): volumes, folders, files, Kubernetes objects. */
  deleted: string[]
  /** What stays, and where. */
  kept: string[]
  error: string | null
  summary: string[]
}

export interface SupportBundleReport {
  command: 'support-bundle'
  exitCode: ExitCode
  path: string
  size: number
  sha256: string
}

export interface ImagesReport {
  command: 'images'
  exitCode: ExitCode
  action: 'list' | 'save' | 'load' | 'push'
  /** list: every image the bundles use. */
  images: (Image & { ref: string })[]
  /** A dry run: the commands it would run. */
  commands: PlannedCommand[]
  steps: StepReport[]
  ok: boolean
  error: string | null
  /** save: the kit written; load and push: the kit checked. */
  kit: Kit | null
  /** push: each image by the digest the private registry gave it. */
  pushed: { name: string; ref: string }[]
}

/** An images report before its action has done anything. */
export const imagesReport = (action: ImagesReport['action']): ImagesReport => ({
  command: 'images',
  exitCode: EXIT.ok,
  action,
  images: [],
  commands: [],
  steps: [],
  ok: true,
  error: null,
  kit: null,
  pushed: [],
})

export interface HelpReport {
  command: 'help'
  exitCode: ExitCode
  usage: string
}

/** The interactive installer shows everything itself; only its exit code is left. */
export interface InteractiveReport {
  command: 'interactive'
  exitCode: ExitCode
}

/** A command that could not run: bad input (flags, answers: 2) or an error of the installer's own (1). */
export interface FailureReport {
  command: string | null
  exitCode: ExitCode
  failure: 'bad-input' | 'error'
  problems: string[]
}

export type Report =
  | PreflightReport
  | ConfigureReport
  | InstallReport
  | SupportBundleReport
  | ImagesReport
  | BackupReport
  | RestoreReport
  | UninstallReport
  | HelpReport
  | InteractiveReport
  | FailureReport

/** What an images command did to the kit, for the admin. */
function imagesLines(r: ImagesReport): string[] {
  const kit = r.kit
  if (!kit) return []
  const pins = kit.images.map((i) => `  ${i.ref}  ${i.digest ?? i.id}  ${i.platform}`)
  if (r.action === 'save')
    return [
      `Wrote the air-gap kit's images to ${kit.dir} (${kit.path}, ${kit.bytes} bytes; images.json pins them; SHA256SUMS): carry the folder to the site.`,
      ...pins,
    ]
  const trust = kit.signedBy
    ? `signed by the vendor (key ${kit.signedBy}, fingerprint ${kit.fingerprint}: compare it with the one your vendor publishes)`
    : 'unsigned (saved on site)'
  const lines = [`The kit in ${kit.dir} is ${trust}; every file matches SHA256SUMS and every image its pinned ID.`]
  if (r.pushed.length)
    lines.push(
      'Pushed, by digest (pin the chart to the server image with --set image.digest=sha256:...):',
      ...r.pushed.map((p) => `  ${p.ref}`),
    )
  return lines
}

/** A report in words: the check list first (ui/CheckList.tsx draws it), then lines for stdout and stderr. */
export interface ReportText {
  checks: CheckResult[] | null
  stdout: string[]
  stderr: string[]
}

const commandLine = (c: PlannedCommand) => c.command.join(' ')

/**
 * What each step of an install, upgrade or restore did, as a short table (step, outcome, seconds), so
 * an admin sees where the time went and which step stopped it; nothing when no step ran.
 */
export function recordTable(record: readonly StepRecord[]): string[] {
  if (!record.length) return []
  const width = Math.max(4, ...record.map((r) => r.name.length))
  const row = (name: string, outcome: string, seconds: string) =>
    `  ${name.padEnd(width)}  ${outcome.padEnd(7)}  ${seconds.padStart(7)}`
  return [
    '',
    row('step', 'outcome', 'seconds'),
    ...record.map((r) => row(r.name, r.outcome, r.outcome === 'skipped' ? '-' : (r.ms / 1000).toFixed(1))),
  ]
}

/** The files a configure run writes (or would write): those that do not hold their content already. */
export const toWrite = (r: { files: readonly string[]; unchanged: readonly string[] }): string[] =>
  r.files.filter((f) => !r.unchanged.includes(f))

/** What a configure run wrote (or, a dry run, would write): one sentence, true either way. */
export function writtenLine(r: { files: string[]; unchanged: string[]; written: boolean }): string {
  const changed = toWrite(r)
  if (!changed.length)
    return r.written
      ? 'The configuration is already up to date: nothing was written.'
      : 'Dry run: the configuration is already up to date; nothing would be written.'
  const same = r.unchanged.length ? ` (${r.unchanged.join(', ')}: already up to date)` : ''
  return r.written
    ? `Wrote ${changed.join(', ')} (mode 0600)${same}.`
    : `Dry run: would write ${changed.join(', ')}${same}; nothing was changed.`
}

/**
 * Under the checks that stopped a run: how to accept those that may be accepted, and why the others
 * cannot be. The checks that stopped it are the failed ones, or the warnings when only they did (--strict).
 */
function acceptHint(r: Omit<ConfigureReport, 'command'>): string[] {
  const status = r.exitCode === EXIT.warningsOnly ? 'warn' : 'fail'
  const stopping = r.checks.filter((c) => c.status === status && !r.accepted.some((a) => a.id === c.id))
  const may = stopping.filter((c) => !neverAccepted(c.id))
  return [
    ...(may.length
      ? [
          `To go on without fixing ${may.length > 1 ? 'these' : 'this'}, accept ${may.length > 1 ? 'each' : 'it'} (recorded in answers.yaml with who and when): ${[...new Set(may.map((c) => `--accept-check ${c.id}`))].join(' ')}`,
        ]
      : []),
    ...refusals(stopping.map((c) => c.id)),
  ]
}

/** The configuration part of configure and install. */
export function configureText(r: Omit<ConfigureReport, 'command'>): ReportText {
  if (r.stopped === 'checks') return { checks: r.checks, stdout: acceptHint(r), stderr: [] }
  if (r.stopped === 'problems')
    return {
      checks: null,
      stdout: [],
      stderr: ['The configuration has problems; nothing was written:', ...r.problems.map((p) => `  - ${p}`)],
    }
  return {
    checks: r.checks,
    stdout: [
      r.leftBehind
        ? 'A run before this one stopped before its deploy answered; what it had staged was dropped, and this run starts from the configuration in use.'
        : '',
      ...(r.accepted.length ? ['', 'Going on past checks that did not pass, accepted:'] : []),
      ...r.accepted.map((a) => `  ${a.id} (accepted by ${a.by} at ${a.at})`),
      // Nothing about the settings when nothing is written: the line below says it is all up to date.
      r.changes.length ? 'Configuration changes:' : toWrite(r).length ? 'No setting changes.' : '',
      ...r.changes.map((c) => `  ${c.change.padEnd(8)} ${c.name}: ${c.shown}`),
      ...r.generated.map(
        (n) => `  generated ${n} (kept on every re-run; back it up: without it stored secrets cannot be read)`,
      ),
      '',
      r.written && r.staged
        ? `Prepared ${r.files.join(', ')} (mode 0600, in ${'.pending/'}): they replace the files in use once the deploy answers; until then the site keeps its configuration.`
        : writtenLine(r),
      r.written ? `Replay this run with: ${r.replay}` : '',
    ],
    stderr: [],
  }
}

/**
 * The text of a report. Install's configuration part is not in it: it is shown as soon as it is
 * done (ui/output.tsx, `configured`), before the deploy's progress, and only the deploy's end here.
 */
export function reportText(r: Report): ReportText {
  const text = (stdout: string[], stderr: string[] = []): ReportText => ({ checks: null, stdout, stderr })
  if ('failure' in r)
    return r.failure === 'bad-input'
      ? text([], [...r.problems, '(run with --help for usage)'])
      : text(
          [],
          r.problems.map((p) => `installer error: ${p}`),
        )
  switch (r.command) {
    case 'preflight':
      return { checks: r.checks, stdout: [], stderr: [] }
    case 'configure':
      return configureText(r)
    case 'install':
      if (r.stopped) return text([])
      // Not stopped, not written: a dry run.
      if (!r.written) return text(['Deploy would run:', ...r.deploy.map((c) => `  ${commandLine(c)}`)])
      return r.error ? text(recordTable(r.record), [r.error]) : text(['', ...r.summary, ...recordTable(r.record)])
    case 'support-bundle':
      return text([
        `Wrote ${r.path} (${r.size} bytes, sha256 ${r.sha256}). Secrets are redacted; send it to your vendor's support.`,
      ])
    case 'images':
      if (r.action === 'list') return text(r.images.map((i) => i.ref))
      if (r.commands.length) return text(r.commands.map(commandLine))
      if (r.error) return text([], [r.error])
      return text(imagesLines(r))
    case 'backup': {
      if (r.error || !r.backup) return text([], [r.error ?? 'No backup was written.'])
      const b = r.backup
      return text([
        `Wrote ${r.path} (${r.bytes} bytes, sha256 ${r.sha256}): Atrium ${b.atriumVersion}, schema ${b.schemaVersion}; ${b.rows} rows in ${b.tables} tables (dump ${b.databaseBytes} bytes); ${b.objects} objects (${b.objectBytes} bytes).`,
        'The configuration part (with ENCRYPTION_MASTER_KEY) is encrypted with your passphrase: keep the passphrase apart from the archive, and both off this machine.',
      ])
    }
    case 'restore': {
      const stdout = [...r.summary, ...recordTable(r.record)]
      return r.error ? text(stdout, [r.error]) : text(stdout)
    }
    case 'uninstall': {
      if (r.dryRun) return text(['Uninstall would run:', ...r.plan.map((c) => `  ${commandLine(c)}`), ...r.summary])
      return r.error ? text(r.summary, [r.error]) : text(r.summary)
    }
    case 'help':
      return text([r.usage])
    case 'interactive':
      return text([])
  }
}
