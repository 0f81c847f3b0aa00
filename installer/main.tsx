// The installer's entry: flags, then one command, then its report shown, then the exit code. The
// context is resolved once per command (core/context.ts); the commands (commands.ts) return plain
// reports (core/report.ts) that one renderer shows as text or JSON (ui/output.tsx); logic lives in
// core/, commands run only through core/run.ts, and the screens in ui/ only show what they are given.
//
//   npm run --silent installer -- preflight [--answers FILE] [--target compose|helm] [--air-gapped] [--json] [--strict]
//   npm run --silent installer -- configure --answers FILE --yes [--dry-run] [--json] [--strict]
//   npm run --silent installer -- install --answers FILE --yes [--dry-run] [--json] [--images FILE] [--registry HOST]
//   npm run --silent installer -- support-bundle [--answers FILE] [--output FILE] [--json]
//   npm run --silent installer -- backup --answers FILE --output FILE --passphrase-file FILE [--json]
//   npm run --silent installer -- restore --answers FILE --input FILE --passphrase-file FILE --yes [--force] [--dry-run] [--json]
//   npm run --silent installer -- images list|save|load|push [--output DIR] [--images DIR] [--registry HOST] [--platform P] [--allow-unsigned] [--dry-run] [--json]
//   npm run --silent installer                  (in a terminal: the interactive installer)
import { parseArgs } from 'node:util'
import React from 'react'
import { render } from 'ink'
import { BadInput, backupCommand, restoreCommand, configureCommand, imagesCommand, installCommand, preflightCommand, supportBundleCommand, type CommandOptions, type Progress } from './commands.js'
import { overallStatus } from './core/checks/check.js'
import { configure } from './core/configure.js'
import { contextFor, interactiveAnswersPath, loadContext, preflightValues, type Resolved } from './core/context.js'
import { runPreflight } from './core/preflight.js'
import { EXIT, type ExitCode, type Report } from './core/report.js'
import { runInstall } from './deploy/install.js'
import { run } from './core/run.js'
import { readPassphrase } from './backup/seal.js'
import { VERSION } from '../common/version.js'
import { App, type AppResult } from './ui/App.js'
import { output } from './ui/output.js'

export { EXIT }

const USAGE = `Atrium installer

Commands:
  (none)      in a terminal: the interactive installer (questions, checks, plan, write)
  preflight   check this machine and the services it will use
  configure   write the configuration for the target (compose: .env; helm: values.yaml and secret.yaml);
              without --answers, the interactive installer
  install     configure, then deploy (compose: docker compose up --wait; helm: upgrade --install
              --wait --atomic) and wait until /readyz answers. Over a running Atrium it is the
              upgrade: it backs the site up first (--passphrase-file, or --skip-backup)
  backup      one archive of the whole site (--output FILE): every database row (pg_dump), every
              object of its buckets, the configuration encrypted with --passphrase-file
  restore     put a backup back (--input FILE): checks every checksum, the passphrase and the
              versions first, needs an empty site (or --force), then migrates and starts Atrium
  support-bundle  one zip for the vendor's support: versions, check results, the configuration
              with secrets redacted, recent logs
  images list         every container image the bundles use (the air-gap kit)
  images save         save them into a kit folder (--output DIR): the tarball, images.json pinning
                      each image, SHA256SUMS; where they can be pulled (held images are not pulled again)
  images load         check the kit (the vendor's signature, every checksum), load it, and check
                      each image against its pin (--images DIR)
  images push         tag and push them to a private registry (--registry HOST, --images DIR to
                      load first); prints each image by its digest there

Options:
  --answers FILE          the answers (YAML); see docs/installer.md
  --yes                   do not ask; required with --answers for configure and install
  --target compose|helm   overrides the answers file
  --air-gapped            no outside network: features needing outside APIs are off
  --dry-run               show what would change; write nothing
  --json                  one JSON object on stdout: the command's report (every command but the
                          interactive installer)
  --strict                warnings count as failures (exit 4)
  --ignore-failed-checks  configure even though checks failed (they are still shown and reported)
  --output FILE|DIR       where support-bundle (default atrium-support-<time>.zip), backup or images save writes
  --images DIR            air-gapped: the air-gap kit's folder (install with compose loads it first)
  --allow-unsigned        accept a kit without the vendor's signature (one saved with images save)
  --platform OS/ARCH      images save: pull for this platform (linux/amd64, linux/arm64)
  --allow-skip            install (compose): let this upgrade skip a minor version (read the release notes)
  --registry HOST         air-gapped helm: the private registry that holds the images
  --only NAME,...         images save and push: only these (names from images list)
  --passphrase-file FILE  backup, restore, and install's upgrade backup: the passphrase (12+ characters)
  --input FILE            restore: the backup archive
  --force                 restore: delete what the target database and buckets hold first
  --skip-backup           install: upgrade without taking a backup first
  --version               the installer's version

Exit codes: 0 ok, 1 error, 2 bad input, 3 a check failed, 4 only warnings (with --strict).`

interface Flags {
  answers?: string
  output?: string
  images?: string
  registry?: string
  only?: string
  platform?: string
  allowUnsigned: boolean
  allowSkip: boolean
  passphraseFile?: string
  input?: string
  force: boolean
  skipBackup: boolean
  version: boolean
  yes: boolean
  ignoreFailed: boolean
  target?: string
  airGapped: boolean
  dryRun: boolean
  json: boolean
  strict: boolean
  help: boolean
}

function parseFlags(argv: string[]): { command: string | undefined; sub: string | undefined; flags: Flags } {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        answers: { type: 'string' },
        output: { type: 'string' },
        images: { type: 'string' },
        registry: { type: 'string' },
        only: { type: 'string' },
        platform: { type: 'string' },
        'allow-unsigned': { type: 'boolean' },
        'allow-skip': { type: 'boolean' },
        'passphrase-file': { type: 'string' },
        input: { type: 'string' },
        force: { type: 'boolean' },
        'skip-backup': { type: 'boolean' },
        version: { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
        target: { type: 'string' },
        'air-gapped': { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        strict: { type: 'boolean' },
        'ignore-failed-checks': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    })
  } catch (err) {
    throw new BadInput((err as Error).message)
  }
  const v = parsed.values
  const [command, sub, ...more] = parsed.positionals
  if ((command !== 'images' && sub !== undefined) || more.length) throw new BadInput(`one command at a time (got ${parsed.positionals.join(' ')})`)
  return {
    command,
    sub,
    flags: {
      answers: v.answers,
      output: v.output,
      images: v.images,
      registry: v.registry,
      only: v.only,
      platform: v.platform,
      allowUnsigned: Boolean(v['allow-unsigned']),
      allowSkip: Boolean(v['allow-skip']),
      passphraseFile: v['passphrase-file'],
      input: v.input,
      force: Boolean(v.force),
      skipBackup: Boolean(v['skip-backup']),
      version: Boolean(v.version),
      yes: Boolean(v.yes),
      ignoreFailed: Boolean(v['ignore-failed-checks']),
      target: v.target,
      airGapped: Boolean(v['air-gapped']),
      dryRun: Boolean(v['dry-run']),
      json: Boolean(v.json),
      strict: Boolean(v.strict),
      help: Boolean(v.help),
    },
  }
}

/**
 * The context for a command; what is wrong with the answers is bad input, all of it at once. For a
 * command that writes the configuration, that includes every setting the configuration would
 * refuse: one report, before the checks run, not one round per kind of mistake.
 */
function resolved(flags: Flags, o: { writes?: boolean } = {}): Resolved {
  const ctx = loadContext({ answersPath: flags.answers, target: flags.target, airGapped: flags.airGapped })
  const problems = o.writes ? configure(ctx, { dryRun: true }).plan.problems : ctx.problems
  if (problems.length) throw new BadInput(problems)
  return ctx
}

/** 0 when the configuration was written (or installed), 3 when the admin quit at failed checks, 1 otherwise. */
export function interactiveExit(r: AppResult): ExitCode {
  if (r.installed) return r.installed.ok ? EXIT.ok : EXIT.error
  if (r.written) return EXIT.ok
  return r.checks && overallStatus(r.checks) === 'fail' ? EXIT.checkFailed : EXIT.error
}

/** The Ink installer, given every action it may take; resolves when the admin is done. */
async function interactive(flags: Flags): Promise<Report> {
  if (flags.json) throw new BadInput('the interactive installer has no JSON output; for JSON use: configure --answers FILE --yes --json')
  if (!process.stdin.isTTY) throw new BadInput('the interactive installer needs a terminal; without one use: configure --answers FILE --yes')
  const ctx = resolved({ ...flags, answers: interactiveAnswersPath(flags.answers) })
  const read = flags.passphraseFile ? readPassphrase(flags.passphraseFile) : null
  if (read && 'problem' in read) throw new BadInput(read.problem)
  const backupPassphrase = read?.passphrase
  let exitCode: ExitCode = EXIT.error
  const ui = render(
    <App
      initial={ctx}
      resolve={(answers) => contextFor(answers, { baseDir: ctx.baseDir })}
      preflight={(c) => runPreflight(c.answers, preflightValues(c), { runner: run })}
      configure={configure}
      install={(c, written, onStep) =>
        runInstall(
          c,
          written.plan.values,
          { kit: flags.images, registry: flags.registry, trust: { allowUnsigned: flags.allowUnsigned }, allowSkip: flags.allowSkip, skipBackup: flags.skipBackup, backupPassphrase },
          onStep,
        )
      }
      onDone={(r) => {
        exitCode = interactiveExit(r)
      }}
    />,
  )
  await ui.waitUntilExit()
  return { command: 'interactive', exitCode }
}

/** A command that changes files without asking needs --yes (or --dry-run, which changes nothing). */
function requireYes(command: string, flags: Flags): void {
  if (!flags.yes && !flags.dryRun) throw new BadInput(`${command} --answers changes files without asking: add --yes (or --dry-run to see the plan)`)
}

async function dispatch(command: string | undefined, sub: string | undefined, flags: Flags, progress: Progress): Promise<Report> {
  if (flags.version) return { command: 'help', exitCode: EXIT.ok, usage: `Atrium installer ${VERSION}` }
  if (command === undefined && !flags.help && process.stdin.isTTY && process.stdout.isTTY) return interactive(flags)
  if (flags.help || command === undefined || command === 'help') {
    return { command: 'help', exitCode: command === undefined && !flags.help ? EXIT.badInput : EXIT.ok, usage: USAGE }
  }
  const o: CommandOptions = {
    strict: flags.strict,
    ignoreFailed: flags.ignoreFailed,
    dryRun: flags.dryRun,
    images: flags.images,
    registry: flags.registry,
    output: flags.output,
    only: flags.only,
    platform: flags.platform,
    allowUnsigned: flags.allowUnsigned,
    allowSkip: flags.allowSkip,
    passphraseFile: flags.passphraseFile,
    input: flags.input,
    force: flags.force,
    skipBackup: flags.skipBackup,
  }
  switch (command) {
    case 'preflight':
      return preflightCommand(resolved(flags), o)
    case 'configure':
      if (!flags.answers) return interactive(flags)
      requireYes(command, flags)
      return configureCommand(resolved(flags, { writes: true }), o)
    case 'install':
      if (!flags.answers) throw new BadInput('install needs --answers FILE (the interactive installer writes one: run the installer without a command)')
      requireYes(command, flags)
      return installCommand(resolved(flags, { writes: true }), o, progress)
    case 'support-bundle':
      return supportBundleCommand(resolved(flags), o)
    case 'backup':
      if (!flags.answers) throw new BadInput('backup needs --answers FILE (the site to back up)')
      return backupCommand(resolved(flags), o, progress)
    case 'restore':
      if (!flags.answers) throw new BadInput('restore needs --answers FILE (the site to restore into)')
      requireYes(command, flags)
      return restoreCommand(resolved(flags), o, progress)
    case 'images':
      return imagesCommand(sub, o, progress)
  }
  throw new BadInput(`unknown command ${command} (commands: preflight, configure, install, backup, restore, support-bundle, images)`)
}

export async function main(argv: string[]): Promise<number> {
  // Looked for before the flags are read, so that even a bad flag is answered in JSON.
  const out = output({ json: argv.includes('--json') })
  let command: string | null = null
  let report: Report
  try {
    const parsed = parseFlags(argv)
    command = parsed.command ?? null
    report = await dispatch(parsed.command, parsed.sub, parsed.flags, out.progress)
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
