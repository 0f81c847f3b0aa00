// The one renderer of the installer's reports (core/report.ts): with --json, the report itself as
// one line of JSON on stdout; otherwise its text, with the checks drawn by the same CheckList the
// interactive installer shows. Progress (install's configuration, each deploy step) is shown as it
// happens, in text only: a JSON reader gets one object at the end.
import React from 'react'
import { render } from 'ink'
import { configureText, reportText, type ConfigureReport, type Report, type ReportText } from '../core/report.js'
import type { DeployStep } from '../deploy/deploy.js'
import { stepLine } from '../deploy/install.js'
import { CheckList } from './CheckList.js'

/** What a long command reports while it works; the JSON output ignores it and prints the end. */
export interface Progress {
  /** install: the configuration is done (written, or stopped), before the deploy starts. */
  configured?: (r: ConfigureReport) => void
  /** A deploy step as it starts and as it ends. */
  step?: (s: DeployStep) => void
  /** A line of progress (a backup's objects copied so far). */
  note?: (line: string) => void
}

export interface Output {
  progress: Progress
  result: (r: Report) => void
}

export interface OutputOptions {
  json: boolean
  stdout?: NodeJS.WriteStream
  stderr?: NodeJS.WritableStream
}

export function output(o: OutputOptions): Output {
  const stdout = o.stdout ?? process.stdout
  const stderr = o.stderr ?? process.stderr
  if (o.json)
    return {
      progress: {},
      result: (r) => {
        stdout.write(JSON.stringify(r) + '\n')
      },
    }
  const show = (t: ReportText) => {
    // Rendered once and unmounted, which writes the final frame (nothing waits for input).
    if (t.checks) render(<CheckList checks={t.checks} />, { stdout }).unmount()
    if (t.stdout.length) stdout.write(t.stdout.join('\n') + '\n')
    if (t.stderr.length) stderr.write(t.stderr.join('\n') + '\n')
  }
  return {
    progress: {
      configured: (r) => show(configureText(r)),
      step: (s) => {
        stdout.write(stepLine(s) + '\n')
      },
      // Progress on stderr: stdout ends with the result, which scripts read.
      note: (line) => {
        stderr.write(line + '\n')
      },
    },
    result: (r) => show(reportText(r)),
  }
}
