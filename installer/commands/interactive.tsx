// The interactive installer (no command, in a terminal; or configure without --answers): the Ink
// screens, given every action they may take (ui/App.tsx shows; the actions are core/'s and deploy/'s).
import React from 'react'
import { render } from 'ink'
import { overallStatus } from '../core/checks/check.js'
import { configure } from '../core/configure.js'
import { contextFor, interactiveAnswersPath, preflightValues } from '../core/context.js'
import { runPreflight } from '../core/preflight.js'
import { answerProblem } from '../core/prompts.js'
import { installerCommand } from '../core/invocation.js'
import { EXIT, type ExitCode } from '../core/report.js'
import { run } from '../core/run.js'
import { runInstall } from '../deploy/install.js'
import { commitStaged } from '../core/staged.js'
import { dirname } from 'node:path'
import { App, type AppResult } from '../ui/App.js'
import { BadInput, command, passphraseOf, resolved } from './command.js'
import { allowSkip, allowUnsigned, images, passphraseFile, registry, site, skipBackup } from './flags.js'

/** 0 when the configuration was written (or installed), 3 when the admin quit at failed checks, 1 otherwise. */
export function interactiveExit(r: AppResult): ExitCode {
  if (r.installed) return r.installed.ok ? EXIT.ok : EXIT.error
  if (r.written) return EXIT.ok
  return r.checks && overallStatus(r.checks) === 'fail' ? EXIT.checkFailed : EXIT.error
}

export const interactive = command({
  name: 'interactive',
  summary: 'in a terminal: the interactive installer (questions, checks, plan, write)',
  flags: { ...site, images, registry, allowUnsigned, allowSkip, skipBackup, passphraseFile },
  /** Resolves when the admin is done. */
  run: async ({ flags }) => {
    if (flags.json)
      throw new BadInput(
        `the interactive installer has no JSON output; for JSON use: ${installerCommand(['configure', '--answers', 'FILE', '--yes', '--json'])}`,
      )
    if (!process.stdin.isTTY)
      throw new BadInput(
        `the interactive installer needs a terminal; without one use: ${installerCommand(['configure', '--answers', 'FILE', '--yes'])}`,
      )
    const ctx = resolved({ ...flags, answers: interactiveAnswersPath(flags.answers) })
    const backupPassphrase = flags.passphraseFile ? passphraseOf(flags.passphraseFile) : undefined
    const deployOptions = {
      kit: flags.images,
      registry: flags.registry,
      trust: { allowUnsigned: Boolean(flags.allowUnsigned) },
      allowSkip: Boolean(flags.allowSkip),
      skipBackup: Boolean(flags.skipBackup),
      backupPassphrase,
      staged: true,
    }
    let exitCode: ExitCode = EXIT.error
    const ui = render(
      <App
        initial={ctx}
        resolve={(answers) => contextFor(answers, { baseDir: ctx.baseDir })}
        check={(prompt, value) => answerProblem(prompt, value)}
        preflight={(c) => runPreflight(c.answers, preflightValues(c), { runner: run })}
        configure={configure}
        install={(c, written, onStep) => runInstall(c, written.plan.values, deployOptions, onStep)}
        onDone={(r) => {
          // Written to be deployed later: what was staged is the configuration in use from now on.
          if (r.written && r.result?.staged && !r.installed) commitStaged(dirname(r.result.answersPath))
          exitCode = interactiveExit(r)
        }}
      />,
    )
    await ui.waitUntilExit()
    return { command: 'interactive', exitCode }
  },
})
