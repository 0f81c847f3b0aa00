// The one renderer: with --json, each command's report as one JSON object and nothing else; as
// text, the check list, stdout for results and stderr for what went wrong, progress as it comes.
import { EventEmitter } from 'node:events'
import t from 'tap'
import { check } from '../../../installer/core/checks/check.js'
import { checkedOnly, EXIT, type Report } from '../../../installer/core/report.js'
import type { DeployStep } from '../../../installer/deploy/deploy.js'
import { output } from '../../../installer/ui/output.js'

/** A terminal of 80 columns that keeps what is written to it. */
class Capture extends EventEmitter {
  columns = 80
  rows = 24
  isTTY = false
  text = ''
  write(chunk: string) {
    this.text += chunk
    return true
  }
}

function streams() {
  const stdout = new Capture()
  const stderr = new Capture()
  return {
    stdout,
    stderr,
    o: { stdout: stdout as unknown as NodeJS.WriteStream, stderr: stderr as unknown as NodeJS.WriteStream },
  }
}

const fail = check('license', 'License', 'fail', 'missing', 'a license', 'ask your vendor')
const configured = checkedOnly([fail], EXIT.checkFailed)
/** A command refused as bad input, with its one problem. */
const refusal = (command: string, problem: string): Report => ({
  command,
  exitCode: EXIT.badInput,
  failure: 'bad-input',
  problems: [problem],
})
const step: DeployStep = { command: { file: 'docker', args: ['load'], title: 'Load the images' }, result: null }

t.test('--json prints the report itself, one line, and no progress', async (t) => {
  const s = streams()
  const out = output({ json: true, ...s.o })
  out.progress.configured?.(configured)
  out.progress.step?.(step)
  const report: Report = { command: 'preflight', exitCode: EXIT.checkFailed, status: 'fail', checks: [fail] }
  out.result(report)
  t.equal(s.stdout.text, JSON.stringify(report) + '\n')
  t.same(JSON.parse(s.stdout.text), report, 'the JSON is the result object')
  t.equal(s.stderr.text, '')
  const refused = streams()
  output({ json: true, ...refused.o }).result(refusal('images', 'images save needs --output FILE'))
  t.same(
    JSON.parse(refused.stdout.text),
    { command: 'images', exitCode: 2, failure: 'bad-input', problems: ['images save needs --output FILE'] },
    'even bad input is JSON',
  )
  t.equal(refused.stderr.text, '')
})

t.test('text shows the checks in words, results on stdout and problems on stderr', async (t) => {
  const s = streams()
  output({ json: false, ...s.o }).result(configured)
  t.match(s.stdout.text, /\[FAIL\] License: missing/)
  t.match(s.stdout.text, /fix: ask your vendor/)
  t.equal(s.stderr.text, '')
  const bad = streams()
  output({ json: false, ...bad.o }).result(refusal('preflight', '--target must be compose or helm'))
  t.equal(bad.stdout.text, '')
  t.equal(bad.stderr.text, '--target must be compose or helm\n(run with --help for usage)\n')
})

t.test("text shows progress as it comes: install's configuration, then each step as it starts and ends", async (t) => {
  const s = streams()
  const out = output({ json: false, ...s.o })
  out.progress.configured?.({
    ...configured,
    stopped: 'problems',
    exitCode: EXIT.badInput,
    problems: ['PORT must be a whole number'],
  })
  t.equal(s.stderr.text, 'The configuration has problems; nothing was written:\n  - PORT must be a whole number\n')
  out.progress.step?.(step)
  out.progress.step?.({
    ...step,
    result: { command: 'docker load', exitCode: 0, stdout: '', stderr: '', notFound: false, timedOut: false },
  })
  t.equal(s.stdout.text, '  ...   Load the images\n  done  Load the images\n')
})

t.test(
  'a probe that finds nothing is no failure: "none", then the step it calls for; a failed command is FAIL',
  async (t) => {
    const s = streams()
    const out = output({ json: false, ...s.o })
    const result = (exitCode: number) => ({
      command: 'docker',
      exitCode,
      stdout: '',
      stderr: exitCode ? 'no such volume' : '',
      notFound: false,
      timedOut: false,
    })
    const probe = { file: 'docker', args: ['volume', 'inspect', 'v'], title: 'Look for the volume v', probe: true }
    const create = { file: 'docker', args: ['volume', 'create', 'v'], title: 'Create the volume v' }
    out.progress.step?.({ command: probe, result: result(1) })
    out.progress.step?.({ command: create, result: result(0) })
    out.progress.step?.({ command: probe, result: result(0) })
    out.progress.step?.({ command: create, result: null, skipped: true })
    out.progress.step?.({ command: create, result: result(1) })
    t.equal(
      s.stdout.text,
      [
        '  none  Look for the volume v',
        '  done  Create the volume v',
        '  found Look for the volume v',
        '  skip  Create the volume v',
        '  FAIL  Create the volume v',
        '',
      ].join('\n'),
    )
    t.notMatch(s.stdout.text, /FAIL {2}Look/, 'never FAIL for a probe')
  },
)
