// What a command of the installer is: a name, what it does, its flags (each declared once, with its
// type and help) and run. main.tsx builds the usage, the parser and the dispatch from the table of
// them, so a flag is added in the one file that reads it. Also what the commands share: bad input,
// progress, the context resolved from the flags, and the small conversions their reports use.
import { configure } from '../core/configure.js'
import { loadContext, type Resolved } from '../core/context.js'
import type { PlannedCommand, Report, StepReport } from '../core/report.js'
import type { Command as Program, Runner } from '../core/run.js'
import type { KitTrust } from '../deploy/airgap.js'
import type { DeployStep } from '../deploy/deploy.js'
import { readPassphrase } from '../backup/seal.js'
import type { Progress } from '../ui/output.js'

/** Input a command cannot work with (exit 2): every problem, said to the admin as it is. */
export class BadInput extends Error {
  readonly problems: string[]

  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : [...problems]
    super(list.join('\n'))
    this.problems = list
  }
}

/** One command-line flag. Its key in a command's flags is the name its value has in the command's options. */
export interface Flag {
  /** A list flag takes a value and may be given again: each value is kept, in order. */
  type: 'string' | 'boolean' | 'list'
  /** As typed after --; the key in kebab-case unless given. */
  name?: string
  short?: string
  /** What a string or list flag's value is, as the usage shows it (FILE, DIR, HOST). */
  value?: string
  /** The usage's text for it; a line break continues it under the first line. */
  help: string
}

export type Flags = Record<string, Flag>

/** The values a command's flags give it (absent when not given). */
export type FlagValues<F extends Flags> = {
  -readonly [K in keyof F]?: F[K]['type'] extends 'boolean'
    ? boolean
    : F[K]['type'] extends 'string'
      ? string
      : F[K]['type'] extends 'list'
        ? string[]
        : string | boolean | string[]
}

/** What tests give a command in place of the outside world. */
export interface Hooks {
  /** The command runner (core/run.ts unless a test gives another). */
  runner?: Runner
  /** The keys a kit's signature may be made with (tests); the vendor's otherwise. */
  trustedKeys?: KitTrust['keys']
  /** How long /readyz may take after a deploy (tests). */
  readyTimeoutMs?: number
  /** The release a restore compares an archive with (tests); this installer's otherwise. */
  release?: { version: string; schema: number }
}

/** A command as main.tsx's table lists it. */
export interface Command<F extends Flags = Flags> {
  name: string
  /** What it does, for the usage; a line break continues it under the first line. */
  summary: string
  /** Its actions (images list, save...), each with its summary; a command without them takes none. */
  actions?: Record<string, string>
  /** Every flag it reads. */
  flags: F
  run(input: { flags: FlagValues<F>; action: string | undefined; progress: Progress }): Promise<Report>
}

/** Declares a command, its flags' types kept for its run. */
export const command = <F extends Flags>(c: Command<F>): Command<F> => c

/** The flag's name as typed: its key in kebab-case unless it says otherwise. */
export const flagName = (key: string, flag: Flag): string =>
  flag.name ?? key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

/**
 * The context for a command; what is wrong with the answers is bad input, all of it at once. For a
 * command that writes the configuration, that includes every setting the configuration would
 * refuse: one report, before the checks run, not one round per kind of mistake.
 */
export function resolved(
  flags: { answers?: string; target?: string; airGapped?: boolean; dryRun?: boolean },
  o: { writes?: boolean } = {},
): Resolved {
  const ctx = loadContext({
    answersPath: flags.answers,
    target: flags.target,
    airGapped: Boolean(flags.airGapped),
    // A run that writes starts from the configuration in use, should one before it have stopped half-way.
    recover: Boolean(o.writes && !flags.dryRun),
  })
  const problems = o.writes ? configure(ctx, { dryRun: true }).plan.problems : ctx.problems
  if (problems.length) throw new BadInput(problems)
  return ctx
}

/** What a command on a site requires before it resolves it: --answers (saying what for), --yes, a writable configuration. */
export interface SiteNeeds {
  answers?: string
  yes?: boolean
  /** It writes the configuration: every setting the configuration would refuse is bad input up front. */
  writes?: boolean
}

/**
 * Declares a command that works on one site (every one but images and the interactive installer):
 * what it needs from the flags is checked, then `run` gets the site resolved from them.
 */
export function siteCommand<F extends Flags>(
  c: Omit<Command<F>, 'run' | 'actions'> & {
    needs?: SiteNeeds
    run: (ctx: Resolved, flags: FlagValues<F>, progress: Progress) => Promise<Report>
  },
): Command<F> {
  const { needs = {}, run, ...declared } = c
  return {
    ...declared,
    run: ({ flags, progress }) => {
      // Each of these commands reads the site's flags (flags.ts `site`), and --yes and --dry-run when it needs --yes.
      const read = flags as { answers?: string; target?: string; airGapped?: boolean; yes?: boolean; dryRun?: boolean }
      if (needs.answers) requireAnswers(c.name, read, needs.answers)
      if (needs.yes) requireYes(c.name, read)
      return run(resolved(read, { writes: needs.writes }), flags, progress)
    },
  }
}

/** A command that works on a site needs its answers: bad input saying what for, otherwise. */
export function requireAnswers(command: string, flags: { answers?: string }, why: string): void {
  if (!flags.answers) throw new BadInput(`${command} needs --answers FILE (${why})`)
}

/** A command that changes files without asking needs --yes (or --dry-run, which changes nothing). */
export function requireYes(command: string, flags: { yes?: boolean; dryRun?: boolean }): void {
  if (!flags.yes && !flags.dryRun)
    throw new BadInput(`${command} --answers changes files without asking: add --yes (or --dry-run to see the plan)`)
}

/** The passphrase in the file, or bad input saying why it cannot serve. */
export function passphraseOf(path: string): string {
  const read = readPassphrase(path)
  if ('problem' in read) throw new BadInput(read.problem)
  return read.passphrase
}

export const trustOf = (o: { trustedKeys?: KitTrust['keys']; allowUnsigned?: boolean }): KitTrust => ({
  keys: o.trustedKeys,
  allowUnsigned: o.allowUnsigned,
})

export const planned = (c: Program): PlannedCommand => ({ title: c.title, command: [c.file, ...c.args] })

export const stepReport = (s: DeployStep): StepReport => ({
  title: s.command.title,
  command: [s.command.file, ...s.command.args].join(' '),
  exitCode: s.result?.exitCode ?? null,
  skipped: Boolean(s.skipped),
})
