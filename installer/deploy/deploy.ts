// The deploy step: the exact commands for the target, run one after another through the command
// runner, stopping at the first that fails. Compose: `docker compose up --detach --wait`. Helm: the
// namespace, the Secret, then `helm upgrade --install --wait --atomic`, so an upgrade is the same
// command and a failed one rolls back. Air-gapped: images are loaded from a tarball (compose) or
// the chart is pointed at the private registry that holds them (helm).
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { CONTAINER_CLI } from '../../config/bundles.js'
import type { Answers } from '../core/answers.js'
import { BUNDLES, composeArgs } from '../core/compose-bundle.js'
import type { ConfigFiles } from '../core/context.js'
import type { KitImage } from '../core/report.js'
import { loadCommands, type KitTrust } from './airgap.js'
import { volumeCommands } from './volumes.js'
import type { Command, CommandResult, Runner } from '../core/run.js'

export interface DeployOptions {
  bundles?: typeof BUNDLES
  /** Air-gapped compose: the air-gap kit (its folder or its images tarball), checked and loaded first. */
  kit?: string
  /** Whose signature the kit must carry. */
  trust?: KitTrust
  /** The kit's pins as openKit checked them (what is loaded is checked against these). */
  kitImages?: readonly KitImage[]
  /** Air-gapped helm: the private registry that holds the images (global.imageRegistry). */
  registry?: string
  /** Helm: the server image's digest in that registry (image.digest), once the kit is pushed there. */
  digest?: string
  /** Compose: let one upgrade skip versions (the admin has read the release notes). */
  allowSkip?: boolean
  /**
   * Compose: the data folders whose volumes the configuration uses (compose-bundle.ts volumesInUse); every one when not
   * known yet (a dry run's plan).
   */
  folders?: readonly string[]
}

const WAIT = 15 * 60_000

/**
 * A Compose deploy in its phases. Nothing in `prepare` or `migrate` touches the running site: the
 * kit's images are loaded, the files validated, the volumes found or made, then the new release's
 * migrations run in a one-off container beside the running server (a release before them keeps
 * working on the schema they leave: migrations only add). Only `switch` replaces containers.
 */
function composePhases(
  answers: Answers,
  files: Extract<ConfigFiles, { target: 'compose' }>,
  o: DeployOptions,
): DeployPhases {
  const compose = composeArgs(answers, files.env, o)
  // External volumes: `docker compose down -v` cannot delete them; made once, found on a re-run.
  const volumes = volumeCommands(answers, o.folders)
  const pull = answers.mode === 'air-gapped' ? ['--pull', 'never'] : []
  return {
    prepare: [
      ...(o.kit ? loadCommands(o.kit, { images: o.kitImages }) : []),
      {
        file: 'docker',
        args: [...compose, 'config', '--quiet'],
        title: 'Validate the Compose files with the configuration',
      },
      ...volumes,
    ],
    migrate: [
      {
        file: 'docker',
        args: [...compose, 'run', '--rm', '-T', ...pull, 'migrate'],
        title: 'Run the migrations of this release (the running server keeps serving)',
        timeoutMs: WAIT,
      },
    ],
    switch: [
      {
        file: 'docker',
        args: [...compose, 'up', '--detach', '--wait', '--wait-timeout', '600', '--remove-orphans', ...pull],
        title: 'Start Atrium and wait until every service is healthy',
        timeoutMs: WAIT,
      },
    ],
  }
}

/**
 * The private registry a Helm site's images come from: the flag, else the answers' (the interactive installer asks); ''
 * for none.
 */
export const registryOf = (answers: Pick<Answers, 'registry'>, o: Pick<DeployOptions, 'registry'>): string =>
  o.registry || answers.registry || ''

/** Null unless a Helm install is given a kit but no registry to push its images to; then what to add. */
export const kitRegistryProblem = (
  answers: Pick<Answers, 'target' | 'registry'>,
  o: Pick<DeployOptions, 'registry' | 'kit'>,
): string | null =>
  answers.target === 'helm' && o.kit && !registryOf(answers, o)
    ? "a Helm install from the kit (--images) pushes its images to the site's registry: add --registry HOST[:PORT][/PATH] (or registry in the answers)"
    : null

/** A Helm deploy: the namespace is prepared; the Secret and the release are the switch (`--atomic` rolls a failed one back). */
function helmPhases(answers: Answers, files: Extract<ConfigFiles, { target: 'helm' }>, o: DeployOptions): DeployPhases {
  const ns = answers.namespace
  const from = registryOf(answers, o)
  const registry = [
    ...(from ? ['--set', `global.imageRegistry=${from}`] : []),
    ...(o.digest ? ['--set', `image.digest=${o.digest}`] : []),
  ]
  return {
    prepare: [
      { file: 'kubectl', args: ['get', 'namespace', ns], title: `Look for the namespace ${ns}`, probe: true },
      { file: 'kubectl', args: ['create', 'namespace', ns], title: `Create the namespace ${ns}` },
    ],
    migrate: [],
    switch: [
      secretApply(answers, files),
      {
        file: 'helm',
        args: [
          'upgrade',
          '--install',
          answers.release,
          (o.bundles ?? BUNDLES).chart,
          '--namespace',
          ns,
          '-f',
          resolve(files.values),
          ...registry,
          '--wait',
          '--atomic',
          '--timeout',
          '15m',
        ],
        title: 'Install or upgrade the release (rolls back if it does not become ready)',
        timeoutMs: WAIT + 60_000,
      },
    ],
  }
}

/** `kubectl apply` of the installer's Secret (also how a failed upgrade puts the previous one back). */
export const secretApply = (answers: Pick<Answers, 'namespace'>, files: { secret: string }): Command => ({
  file: 'kubectl',
  args: ['apply', '--namespace', answers.namespace, '-f', resolve(files.secret)],
  title: 'Apply the Secret with the secret settings',
})

/** The chart's name for the release's resources (atrium.fullname in charts/atrium/templates/_helpers.tpl). */
export const chartFullname = (release: string) =>
  (release.includes('atrium') ? release : `${release}-atrium`).slice(0, 63).replace(/-+$/, '')

/**
 * The admin CLI inside the running server container, for the first tenant; `input` is its standard input (the
 * password: never an argument). Compose's exec passes its standard input on by default (-T only drops the terminal);
 * kubectl's needs -i.
 */
export function adminCommand(
  answers: Answers,
  files: ConfigFiles,
  cli: string[],
  o: DeployOptions = {},
  input?: string,
): Command {
  const inside = [...CONTAINER_CLI, ...cli]
  const title = `Run the admin CLI: ${cli[0]}`
  const stdin = input === undefined ? {} : { input }
  return files.target === 'compose'
    ? {
        file: 'docker',
        args: [...composeArgs(answers, files.env, o), 'exec', '-T', 'server', ...inside],
        title,
        ...stdin,
      }
    : {
        file: 'kubectl',
        args: [
          '--namespace',
          answers.namespace,
          'exec',
          ...(input === undefined ? [] : ['-i']),
          `deploy/${chartFullname(answers.release)}`,
          '-c',
          'server',
          '--',
          ...inside,
        ],
        title,
        ...stdin,
      }
}

/** A deploy's commands by phase: what prepares without touching the running site, the migrations, and the switch. */
export interface DeployPhases {
  prepare: Command[]
  migrate: Command[]
  switch: Command[]
}

export function deployPhases(answers: Answers, files: ConfigFiles, o: DeployOptions = {}): DeployPhases {
  return files.target === 'compose'
    ? composePhases(answers, files, o)
    : helmPhases(answers, files as Extract<ConfigFiles, { target: 'helm' }>, o)
}

/** The commands, in order. A resource is created only when the probe before it fails. */
export function deployCommands(answers: Answers, files: ConfigFiles, o: DeployOptions = {}): Command[] {
  const p = deployPhases(answers, files, o)
  return [...p.prepare, ...p.migrate, ...p.switch]
}

/** Whether this package holds the bundle the target deploys. */
export function bundleMissing(answers: Answers, o: DeployOptions = {}): string | null {
  const b = o.bundles ?? BUNDLES
  const path =
    answers.target === 'compose'
      ? join(b.compose, 'compose.yaml')
      : b.chart.endsWith('.tgz')
        ? b.chart
        : join(b.chart, 'Chart.yaml')
  return existsSync(path) ? null : path
}

export interface DeployStep {
  command: Command
  result: CommandResult | null
  skipped?: boolean
}

/** A result that printed other than the command expects, made a failure that says what it found. */
function expected(command: Command, r: CommandResult): CommandResult {
  if (command.expect === undefined || r.exitCode !== 0 || r.stdout.trim() === command.expect) return r
  return { ...r, exitCode: 1, stderr: `expected ${command.expect}, found ${r.stdout.trim() || 'nothing'}` }
}

/** Runs the commands; stops at the first failure. `onStep` reports progress as each one starts and ends. */
export async function deploy(
  commands: Command[],
  runner: Runner,
  onStep: (s: DeployStep) => void = () => {},
): Promise<{ ok: boolean; steps: DeployStep[] }> {
  const steps: DeployStep[] = []
  let probeSucceeded = false
  for (const command of commands) {
    // A probe that succeeded makes the command after it unnecessary (the namespace exists).
    if (probeSucceeded) {
      probeSucceeded = false
      const skipped = { command, result: null, skipped: true }
      steps.push(skipped)
      onStep(skipped)
      continue
    }
    onStep({ command, result: null })
    const result = expected(
      command,
      await runner(command.file, command.args, { timeoutMs: command.timeoutMs ?? 120_000, input: command.input }),
    )
    const step = { command, result }
    steps.push(step)
    onStep(step)
    if (command.probe) {
      probeSucceeded = result.exitCode === 0
      continue
    }
    if (result.exitCode !== 0) return { ok: false, steps }
  }
  return { ok: true, steps }
}

/**
 * The command a failed deploy stopped at and the end of what it said (`tail` characters), for the admin. Both streams:
 * `docker compose run` gives the container's own lines on stdout, Compose's on stderr.
 */
export function failedStep(steps: readonly DeployStep[], tail: number): string {
  const last = steps.at(-1)!.result!
  const said = [last.stderr, last.stdout].filter((x) => x.trim()).join('\n')
  return `${last.command}\n${said.slice(-tail)}`
}

/** fetch hides the socket's code (ECONNREFUSED...) in its cause, sometimes inside an AggregateError. */
function networkError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }).cause
  return cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? (err as Error).message
}

/** Polls GET <url>/readyz until it answers 200 or the time is up. */
export async function waitReady(
  publicUrl: string,
  o: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<{ ready: boolean; last: string }> {
  const until = Date.now() + (o.timeoutMs ?? 5 * 60_000)
  let last = 'no answer yet'
  for (;;) {
    try {
      const res = await fetch(`${publicUrl.replace(/\/+$/, '')}/readyz`, { signal: AbortSignal.timeout(5000) })
      if (res.status === 200) return { ready: true, last: 'HTTP 200' }
      last = `HTTP ${res.status}`
    } catch (err) {
      last = networkError(err)
    }
    if (Date.now() > until) return { ready: false, last }
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 2000))
  }
}
