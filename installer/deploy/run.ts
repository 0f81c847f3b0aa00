// The one place the installer runs commands (DESIGN.md). Everything else asks this module, so a
// dry run, a test or an air-gapped audit has a single door to watch.
import { execa } from 'execa'

export interface CommandResult {
  command: string
  exitCode: number | null
  stdout: string
  stderr: string
  /** The program is not installed (or not on PATH). */
  notFound: boolean
  timedOut: boolean
}

export interface RunOptions {
  timeoutMs?: number
  cwd?: string
  env?: Record<string, string>
  input?: string
}

export type Runner = (file: string, args: readonly string[], opts?: RunOptions) => Promise<CommandResult>

/** Runs a program without a shell (arguments are never re-parsed); never throws. */
export const run: Runner = async (file, args, opts = {}) => {
  const r = await execa(file, args, {
    reject: false,
    timeout: opts.timeoutMs ?? 60_000,
    cwd: opts.cwd,
    env: opts.env,
    input: opts.input,
    stripFinalNewline: true,
  })
  const code = (r as { code?: string }).code
  return {
    command: [file, ...args].join(' '),
    exitCode: r.exitCode ?? null,
    stdout: String(r.stdout ?? ''),
    stderr: String(r.stderr ?? ''),
    notFound: code === 'ENOENT',
    timedOut: Boolean(r.timedOut),
  }
}
