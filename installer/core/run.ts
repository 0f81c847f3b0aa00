// The one place the installer runs commands. Everything else asks this module, so a
// dry run, a test or an air-gapped audit has a single door to watch.
import { spawn } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'
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

/** One program to run, as a plan lists it and the progress screen shows it. */
export interface Command {
  file: string
  args: string[]
  /** What it does, for the plan and the progress screen. */
  title: string
  /** Allowed to fail (e.g. "does the namespace exist?"): the next command depends on it. */
  probe?: boolean
  timeoutMs?: number
  /** What it must print (trimmed): anything else fails it, as a non-zero exit would (a pinned image's ID). */
  expect?: string
  /**
   * Its standard input: a secret it needs (the first admin's password), which an argument would show to every user
   * (ps) and to the engine's event stream. Never part of what a plan or report shows.
   */
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

export interface StreamOptions {
  /**
   * Settings for the program (merged over this process's environment): libpq's PGPASSWORD, say, which must not be an
   * argument.
   */
  env?: Record<string, string>
  /** Feed the program's standard input (pg_restore reading a dump); closed at once otherwise. */
  stdin?: boolean
}

export interface StreamedCommand {
  /** The program's standard output, to be read as it comes (pg_dump's archive). */
  stdout: Readable
  /** Its standard input, when asked for. */
  stdin: Writable | null
  /** How it ended: stderr kept (its last 64 KB), never thrown. */
  done: Promise<CommandResult>
  /**
   * Ends it now (SIGKILL): a pg_dump nobody will read, a pg_restore whose input turned out wrong (its transaction is
   * not committed).
   */
  kill(): void
}

/**
 * Runs a program whose output or input is too big to hold (a database dump): the streams are handed
 * over as they are, and memory stays bounded whatever their size. Never throws; `done` says how it ended.
 */
export function runStreaming(file: string, args: readonly string[], opts: StreamOptions = {}): StreamedCommand {
  const child = spawn(file, args, {
    env: { ...process.env, ...opts.env },
    stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr = (stderr + s).slice(-65_536)
  })
  // A reader that stops early (a failed upload) must not leave EPIPE unhandled on the child's input.
  child.stdin?.on('error', () => {})
  const done = new Promise<CommandResult>((resolve) => {
    let notFound = false
    child.on('error', (err: NodeJS.ErrnoException) => {
      notFound = err.code === 'ENOENT'
      if (notFound)
        resolve({
          command: [file, ...args].join(' '),
          exitCode: null,
          stdout: '',
          stderr: `${file} is not installed (or not on PATH)`,
          notFound,
          timedOut: false,
        })
    })
    child.on('close', (code) =>
      resolve({
        command: [file, ...args].join(' '),
        exitCode: code,
        stdout: '',
        stderr: stderr.trim(),
        notFound,
        timedOut: false,
      }),
    )
  })
  return { stdout: child.stdout!, stdin: child.stdin, done, kill: () => void child.kill('SIGKILL') }
}
