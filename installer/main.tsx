// The installer's entry: flags, then one command, then its report shown, then the exit code. The
// commands are a table (commands/<name>.ts, one file each: name, summary, flags with their help,
// run); the usage, the parser's options and the dispatch are all read from it, so a command or a
// flag is added in one file. The context is resolved once per command (commands/command.ts); the
// commands return plain reports (core/report.ts) that one renderer shows as text or JSON
// (ui/output.tsx); logic lives in core/ and deploy/, install and restore are step lists run by
// core/steps.ts, every program runs through core/run.ts, and the screens in ui/ only show what
// they are given.
//
//   npm run --silent installer -- <command> [flags]     (--help for the commands and flags)
//   npm run --silent installer                  (in a terminal: the interactive installer)
import { parseArgs } from 'node:util'
import { BadInput, flagName, type Command, type Flag, type Flags } from './commands/command.js'
import { backup } from './commands/backup.js'
import { configure } from './commands/configure.js'
import * as shared from './commands/flags.js'
import { images } from './commands/images.js'
import { install } from './commands/install.js'
import { interactive } from './commands/interactive.js'
import { preflight } from './commands/preflight.js'
import { restore } from './commands/restore.js'
import { supportBundle } from './commands/support-bundle.js'
import { installerCommand } from './core/invocation.js'
import { uninstall } from './commands/uninstall.js'
import { NEVER_ACCEPTED } from './core/accepted-checks.js'
import { EXIT, type Report } from './core/report.js'
import { VERSION } from '../common/version.js'
import { output, type Progress } from './ui/output.js'

export { EXIT }
export { interactiveExit } from './commands/interactive.js'

/** Every command, in the order the usage lists them. */
const COMMANDS: readonly Command[] = [preflight, configure, install, backup, restore, supportBundle, uninstall, images]

/** Read whatever the command: the usage and the version. */
const GLOBAL = {
  help: { type: 'boolean', short: 'h', help: 'this text' },
  version: { type: 'boolean', help: "the installer's version" },
} as const satisfies Flags

/** Every flag once, by the name its value has (a flag several commands read is one object): the shared ones first. */
const FLAGS: Flags = Object.assign(
  Object.fromEntries(Object.entries(shared).filter(([, f]) => 'help' in f)),
  interactive.flags,
  ...COMMANDS.map((c) => c.flags),
  GLOBAL,
)

/** Text after a first column of `width`; a help's further lines go under its first. */
const row = (left: string, text: string, width: number): string =>
  `  ${left.padEnd(width)}  ${text.split('\n').join(`\n${' '.repeat(width + 4)}`)}`

const USAGE = [
  'Atrium installer',
  '',
  // As this installer was started (the kit's script, or npm's in a checkout), from any working directory.
  `Run as: ${installerCommand([])} [command] [options]`,
  '',
  'Commands:',
  row('(none)', interactive.summary, 10),
  ...COMMANDS.flatMap((c) =>
    c.actions
      ? Object.entries(c.actions).map(([action, text]) => row(`${c.name} ${action}`, text, 18))
      : [row(c.name, c.summary, 10)],
  ),
  '',
  'Options:',
  ...Object.entries(FLAGS).map(([key, f]: [string, Flag]) =>
    row(`--${flagName(key, f)}${f.value ? ` ${f.value}` : ''}`, f.help, 22),
  ),
  '',
  'Exit codes: 0 ok, 1 error, 2 bad input, 3 a check failed, 4 only warnings (with --strict).',
].join('\n')

type Values = Record<string, string | boolean | string[] | undefined>

/** Flags that are gone, each with what to use instead: a script that still gives one learns why, not just "unknown". */
const RETIRED: Record<string, string> = {
  'ignore-failed-checks': `--ignore-failed-checks is gone: it let every failed check through, a wrong database password included. Accept each failed check you mean to go on without, by its id: --accept-check ID (repeatable; a check that stops the run says its id; what is accepted is recorded in answers.yaml and applied again on replay). The site's own services' connectivity and credential checks and the preflight's deadline (${NEVER_ACCEPTED.join(', ')}) cannot be accepted: fix them.`,
}

function parseFlags(argv: string[]): { command: string | undefined; action: string | undefined; flags: Values } {
  const retired = Object.keys(RETIRED).filter((name) =>
    argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`)),
  )
  if (retired.length) throw new BadInput(retired.map((name) => RETIRED[name]!))
  let parsed
  try {
    const options = Object.fromEntries(
      Object.entries(FLAGS).map(([key, f]) => [
        flagName(key, f),
        f.type === 'list'
          ? { type: 'string' as const, multiple: true, ...(f.short && { short: f.short }) }
          : { type: f.type, ...(f.short && { short: f.short }) },
      ]),
    )
    parsed = parseArgs({ args: argv, allowPositionals: true, options })
  } catch (err) {
    throw new BadInput((err as Error).message)
  }
  const [command, action, ...more] = parsed.positionals
  const takesAction = COMMANDS.find((c) => c.name === command)?.actions
  if ((!takesAction && action !== undefined) || more.length)
    throw new BadInput(`one command at a time (got ${parsed.positionals.join(' ')})`)
  // By the names the commands read them; a boolean flag not given is false.
  const flags = Object.fromEntries(
    Object.entries(FLAGS).map(([key, f]) => {
      const v = parsed.values[flagName(key, f)]
      return [key, f.type === 'boolean' ? Boolean(v) : v]
    }),
  )
  return { command, action, flags }
}

async function dispatch(
  command: string | undefined,
  action: string | undefined,
  flags: Values,
  progress: Progress,
): Promise<Report> {
  if (flags.version) return { command: 'help', exitCode: EXIT.ok, usage: `Atrium installer ${VERSION}` }
  if (command === undefined && !flags.help && process.stdin.isTTY && process.stdout.isTTY)
    return interactive.run({ flags, action, progress })
  if (flags.help || command === undefined || command === 'help') {
    return { command: 'help', exitCode: command === undefined && !flags.help ? EXIT.badInput : EXIT.ok, usage: USAGE }
  }
  const found = COMMANDS.find((c) => c.name === command)
  if (!found) throw new BadInput(`unknown command ${command} (commands: ${COMMANDS.map((c) => c.name).join(', ')})`)
  return found.run({ flags, action, progress })
}

export async function main(argv: string[]): Promise<number> {
  // Looked for before the flags are read, so that even a bad flag is answered in JSON.
  const out = output({ json: argv.includes('--json') })
  let command: string | null = null
  let report: Report
  try {
    const parsed = parseFlags(argv)
    command = parsed.command ?? null
    report = await dispatch(parsed.command, parsed.action, parsed.flags, out.progress)
  } catch (err) {
    report =
      err instanceof BadInput
        ? { command, exitCode: EXIT.badInput, failure: 'bad-input', problems: err.problems }
        : // What went wrong in words, not a stack trace: the admin acts on the message.
          { command, exitCode: EXIT.error, failure: 'error', problems: [(err as Error).message || String(err)] }
  }
  out.result(report)
  return report.exitCode
}
