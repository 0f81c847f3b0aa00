#!/usr/bin/env node
// The installer's entry: flags, the commands, exit codes. Each command resolves its context once
// (core/context.ts) and hands it to every step; logic lives in core/, commands run only through
// deploy/run.ts, and the screens in ui/ only show what they are given.
//
//   npm run --silent installer -- preflight [--answers FILE] [--target compose|helm] [--air-gapped] [--json] [--strict]
//   npm run --silent installer -- configure --answers FILE --yes [--dry-run] [--json] [--strict]
//   npm run --silent installer -- install --answers FILE --yes [--dry-run] [--images FILE] [--registry HOST]
//   npm run --silent installer -- support-bundle [--answers FILE] [--output FILE] [--json]
//   npm run --silent installer -- images list|save|load|push [--output FILE] [--images FILE] [--registry HOST] [--dry-run]
//   npm run --silent installer                  (in a terminal: the interactive installer)
import { parseArgs } from 'node:util'
import React from 'react'
import { render } from 'ink'
import { overallStatus, type CheckResult } from './core/checks/check.js'
import { configure, replayCommand, type ConfigureResult } from './core/configure.js'
import { contextFor, loadContext, siteConfig, type Resolved } from './core/context.js'
import { runPreflight } from './core/preflight.js'
import { writeSupportBundle } from './core/support-bundle.js'
import { deploy, failedStep } from './deploy/deploy.js'
import { installPlan, runInstall, stepLine, summaryLines } from './deploy/install.js'
import { run } from './deploy/run.js'
import { loadCommands, pushCommands, registryProblem, saveCommands } from './deploy/airgap.js'
import { IMAGES, imageRef } from '../config/images.js'
import { App } from './ui/App.js'
import { CheckList } from './ui/CheckList.js'

/** Exit codes (issue 4): scripts branch on these. */
export const EXIT = { ok: 0, error: 1, badInput: 2, checkFailed: 3, warningsOnly: 4 } as const

const USAGE = `Atrium installer

Commands:
  (none)      in a terminal: the interactive installer (questions, checks, plan, write)
  preflight   check this machine and the services it will use
  configure   write the configuration for the target (compose: .env; helm: values.yaml and secret.yaml);
              without --answers, the interactive installer
  install     configure, then deploy (compose: docker compose up --wait; helm: upgrade --install
              --wait --atomic) and wait until /readyz answers
  support-bundle  one zip for the vendor's support: versions, check results, the configuration
              with secrets redacted, recent logs
  images list         every container image the bundles use (the air-gap kit)
  images save         pull them and save them to one tarball (--output FILE), where the internet is
  images load         load that tarball into this machine's Docker (--images FILE)
  images push         tag and push them to a private registry (--registry HOST, --images FILE to load first)

Options:
  --answers FILE          the answers (YAML); see docs/installer.md
  --yes                   do not ask; required with --answers for configure
  --target compose|helm   overrides the answers file
  --air-gapped            no outside network: features needing outside APIs are off
  --dry-run               show what would change; write nothing
  --json                  machine-readable results on stdout
  --strict                warnings count as failures (exit 4)
  --ignore-failed-checks  configure even though checks failed (they are still shown and reported)
  --output FILE           where support-bundle (default atrium-support-<time>.zip) or images save writes
  --images FILE           air-gapped: the images tarball (install with compose loads it first)
  --registry HOST         air-gapped helm: the private registry that holds the images

Exit codes: 0 ok, 1 error, 2 bad input, 3 a check failed, 4 only warnings (with --strict).`

class BadInput extends Error {}

interface Flags { answers?: string; output?: string; images?: string; registry?: string; yes: boolean; ignoreFailed: boolean; target?: string; airGapped: boolean; dryRun: boolean; json: boolean; strict: boolean; help: boolean }

function parseFlags(argv: string[]): { command: string | undefined; sub: string | undefined; flags: Flags } {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        answers: { type: 'string' }, output: { type: 'string' }, images: { type: 'string' }, registry: { type: 'string' }, yes: { type: 'boolean', short: 'y' }, target: { type: 'string' },
        'air-gapped': { type: 'boolean' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' },
        strict: { type: 'boolean' }, 'ignore-failed-checks': { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
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
      answers: v.answers, output: v.output, images: v.images, registry: v.registry, yes: Boolean(v.yes), ignoreFailed: Boolean(v['ignore-failed-checks']), target: v.target, airGapped: Boolean(v['air-gapped']),
      dryRun: Boolean(v['dry-run']), json: Boolean(v.json), strict: Boolean(v.strict), help: Boolean(v.help),
    },
  }
}

/** The context for a command; what is wrong with the answers is bad input, all of it at once. */
function resolved(flags: Flags): Resolved {
  const ctx = loadContext({ answersPath: flags.answers, target: flags.target, airGapped: flags.airGapped })
  if (ctx.problems.length) throw new BadInput(ctx.problems.join('\n'))
  return ctx
}

function exitFor(checks: readonly CheckResult[], strict: boolean): number {
  const status = overallStatus(checks)
  if (status === 'fail') return EXIT.checkFailed
  if (status === 'warn' && strict) return EXIT.warningsOnly
  return EXIT.ok
}

/** Renders the list once and unmounts, which writes the final frame (nothing waits for input). */
function show(checks: readonly CheckResult[]) {
  render(<CheckList checks={checks} />).unmount()
}

async function preflight(flags: Flags): Promise<number> {
  const ctx = resolved(flags)
  const checks = await runPreflight(ctx.answers, ctx.values, { runner: run })
  if (flags.json) process.stdout.write(JSON.stringify({ checks, status: overallStatus(checks) }) + '\n')
  else show(checks)
  return exitFor(checks, flags.strict)
}

/** The Ink installer; resolves with the exit code when the admin is done. */
async function interactive(flags: Flags): Promise<number> {
  if (!process.stdin.isTTY) throw new BadInput('the interactive installer needs a terminal; without one use: configure --answers FILE --yes')
  const ctx = resolved(flags)
  let code: number = EXIT.error
  const ui = render(
    <App
      initial={ctx}
      resolve={(answers) => contextFor(answers, { baseDir: ctx.baseDir })}
      preflight={(c) => runPreflight(c.answers, c.values, { runner: run })}
      configure={configure}
      install={(c, written, onStep) => runInstall(c, written.plan.values, { imagesTarball: flags.images, registry: flags.registry }, onStep)}
      onDone={(r) => {
        code = r.installed ? (r.installed.ok ? EXIT.ok : EXIT.error) : r.written ? EXIT.ok : r.checks && overallStatus(r.checks) === 'fail' ? EXIT.checkFailed : EXIT.error
      }}
    />,
  )
  await ui.waitUntilExit()
  return code
}

async function configureCommand(flags: Flags): Promise<number> {
  if (!flags.answers) return interactive(flags)
  if (!flags.yes && !flags.dryRun) throw new BadInput('configure --answers changes files without asking: add --yes (or --dry-run to see the plan)')
  return (await configureStep(resolved(flags), flags)).code
}

/** The preflight, then the configuration planned and (unless a dry run) written; the plan is kept for install. */
async function configureStep(ctx: Resolved, flags: Flags): Promise<{ code: number; result: ConfigureResult | null }> {
  const checks = await runPreflight(ctx.answers, ctx.values, { runner: run })
  const code = exitFor(checks, flags.strict)
  if (code !== EXIT.ok && !flags.ignoreFailed) {
    if (flags.json) process.stdout.write(JSON.stringify({ checks, status: overallStatus(checks), written: false }) + '\n')
    else show(checks)
    return { code, result: null }
  }
  const r = configure(ctx, { dryRun: flags.dryRun })
  if (r.plan.problems.length) {
    if (flags.json) process.stdout.write(JSON.stringify({ checks, status: overallStatus(checks), problems: r.plan.problems, written: false }) + '\n')
    else process.stderr.write(`The configuration has problems; nothing was written:\n${r.plan.problems.map((p) => `  - ${p}`).join('\n')}\n`)
    return { code: EXIT.badInput, result: r }
  }
  const replay = replayCommand(r.answersPath)
  if (flags.json) {
    process.stdout.write(JSON.stringify({ checks, status: overallStatus(checks), changes: r.plan.changes, generated: r.plan.generated, files: r.files, written: r.written, replay }) + '\n')
    return { code: EXIT.ok, result: r }
  }
  show(checks)
  const lines = [
    code !== EXIT.ok ? '\nSome checks did not pass; continuing because of --ignore-failed-checks.' : '',
    r.plan.changes.length ? 'Configuration changes:' : 'The configuration is already up to date.',
    ...r.plan.changes.map((c) => `  ${c.change.padEnd(8)} ${c.name}: ${c.shown}`),
    ...r.plan.generated.map((n) => `  generated ${n} (kept on every re-run; back it up: without it stored secrets cannot be read)`),
    '',
    r.written ? `Wrote ${r.files.join(', ')} (mode 0600).` : `Dry run: would write ${r.files.join(', ')}; nothing was changed.`,
    r.written ? `Replay this run with: ${replay}` : '',
  ]
  process.stdout.write(lines.join('\n') + '\n')
  return { code: EXIT.ok, result: r }
}

/** configure, then the deploy commands, the wait for /readyz and the first tenant. --dry-run prints the commands. */
async function install(flags: Flags): Promise<number> {
  if (!flags.yes && !flags.dryRun) throw new BadInput('install --answers changes files without asking: add --yes (or --dry-run to see the plan)')
  const ctx = resolved(flags)
  const configured = await configureStep(ctx, flags)
  if (configured.code !== EXIT.ok || !configured.result) return configured.code
  const o = { imagesTarball: flags.images, registry: flags.registry }
  if (flags.dryRun) {
    const all = installPlan(ctx, o)
    if (flags.json) process.stdout.write(JSON.stringify({ deploy: all.map((c) => ({ title: c.title, command: [c.file, ...c.args] })) }) + '\n')
    else process.stdout.write(['Deploy would run:', ...all.map((c) => `  ${c.file} ${c.args.join(' ')}`)].join('\n') + '\n')
    return EXIT.ok
  }
  // The settings as written say where the server listens.
  const r = await runInstall(ctx, configured.result.plan.values, o, (s) => { if (!flags.json) process.stdout.write(stepLine(s) + '\n') })
  if (flags.json) {
    process.stdout.write(JSON.stringify({ deployed: r.stage !== 'bundle' && r.stage !== 'deploy', ready: r.ok || r.stage === 'tenant', stage: r.stage, url: r.url, firstAdmin: r.created ?? r.existing, error: r.error }) + '\n')
  } else if (r.ok) process.stdout.write(`\n${summaryLines(ctx.answers, r).join('\n')}\n`)
  else process.stderr.write(`${r.error}\n`)
  return r.ok ? EXIT.ok : EXIT.error
}

/** The air-gap kit: list, save (connected side), load or push (air-gapped side) every image. */
async function images(sub: string | undefined, flags: Flags): Promise<number> {
  if (sub === 'list' || sub === undefined) {
    if (flags.json) process.stdout.write(JSON.stringify({ images: IMAGES.map((i) => ({ ...i, ref: imageRef(i) })) }) + '\n')
    else process.stdout.write(IMAGES.map((i) => imageRef(i)).join('\n') + '\n')
    return EXIT.ok
  }
  let commands
  if (sub === 'save') {
    if (!flags.output) throw new BadInput('images save needs --output FILE (the tarball to write)')
    commands = saveCommands(flags.output)
  } else if (sub === 'load') {
    if (!flags.images) throw new BadInput('images load needs --images FILE (the tarball from images save)')
    commands = loadCommands(flags.images)
  } else if (sub === 'push') {
    if (!flags.registry) throw new BadInput('images push needs --registry HOST[:PORT][/PATH]')
    const problem = registryProblem(flags.registry)
    if (problem) throw new BadInput(problem)
    commands = pushCommands(flags.registry, flags.images)
  } else throw new BadInput(`unknown images command ${sub} (list, save, load, push)`)
  if (flags.dryRun) {
    process.stdout.write(commands.map((c) => `${c.file} ${c.args.join(' ')}`).join('\n') + '\n')
    return EXIT.ok
  }
  const r = await deploy(commands, run, (s) => { if (!flags.json && s.result) process.stdout.write(stepLine(s) + '\n') })
  if (flags.json) process.stdout.write(JSON.stringify({ ok: r.ok, steps: r.steps.map((s) => ({ title: s.command.title, exitCode: s.result?.exitCode ?? null })) }) + '\n')
  if (!r.ok) {
    process.stderr.write(`Failed at: ${failedStep(r.steps, 2000)}\n`)
    return EXIT.error
  }
  return EXIT.ok
}

async function supportBundle(flags: Flags): Promise<number> {
  const ctx = resolved(flags)
  // The site as it is: the written configuration is what runs, so it is what support needs to see.
  const config = siteConfig(ctx)
  const checks = await runPreflight(ctx.answers, config, { runner: run })
  const path = flags.output ?? `atrium-support-${new Date().toISOString().replace(/[:.]/g, '-')}.zip`
  const r = await writeSupportBundle(path, { answers: ctx.answers, config, checks, runner: run, envFile: ctx.files.target === 'compose' ? ctx.files.env : '' })
  if (flags.json) process.stdout.write(JSON.stringify({ path, ...r }) + '\n')
  else process.stdout.write(`Wrote ${path} (${r.size} bytes, sha256 ${r.sha256}). Secrets are redacted; send it to your vendor's support.\n`)
  return EXIT.ok
}

export async function main(argv: string[]): Promise<number> {
  try {
    const { command, sub, flags } = parseFlags(argv)
    if (command === undefined && !flags.help && process.stdin.isTTY && process.stdout.isTTY) return await interactive(flags)
    if (flags.help || command === undefined || command === 'help') {
      process.stdout.write(USAGE + '\n')
      return command === undefined && !flags.help ? EXIT.badInput : EXIT.ok
    }
    if (command === 'preflight') return await preflight(flags)
    if (command === 'configure') return await configureCommand(flags)
    if (command === 'install') {
      if (!flags.answers) throw new BadInput('install needs --answers FILE (the interactive installer writes one: run the installer without a command)')
      return await install(flags)
    }
    if (command === 'support-bundle') return await supportBundle(flags)
    if (command === 'images') return await images(sub, flags)
    throw new BadInput(`unknown command ${command} (commands: preflight, configure, install, support-bundle, images)`)
  } catch (err) {
    if (err instanceof BadInput) {
      process.stderr.write(`${err.message}\n(run with --help for usage)\n`)
      return EXIT.badInput
    }
    process.stderr.write(`installer error: ${(err as Error).stack ?? String(err)}\n`)
    return EXIT.error
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('installer/main.tsx')) {
  process.exitCode = await main(process.argv.slice(2))
}
