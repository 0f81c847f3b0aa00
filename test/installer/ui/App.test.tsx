// The interactive screens' own paths that a full run does not take: quitting at the checks, going
// back from them, a plan with problems and going back, long lists scrolled, the answer edited as in
// a shell, and nothing written unless the admin says y.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import React from 'react'
import t from 'tap'
import { render } from 'ink-testing-library'
import { App, type AppProps } from '../../../installer/ui/App.js'
import type { DeployStep } from '../../../installer/deploy/deploy.js'
import { acceptor } from '../../../installer/core/accepted-checks.js'
import { DEFAULT_ANSWERS, loadAnswers, type Answers } from '../../../installer/core/answers.js'
import type { CheckResult } from '../../../installer/core/checks/check.js'
import { configure } from '../../../installer/core/configure.js'
import { contextFor, type Resolved } from '../../../installer/core/context.js'
import { answersCommand } from '../../../installer/core/invocation.js'
import { answerProblem } from '../../../installer/core/prompts.js'
import type { SettingName } from '../../../config/schema.js'
import { testLicense, testVendor } from '../../helpers/license.js'
import { tempDir } from '../../helpers/platform.js'

const tick = () => new Promise((r) => setTimeout(r, 60))
/** Waits for the frame to show `re` (at most 5 s): on a busy machine a render or a step can take longer than a tick. */
async function until(ui: { lastFrame(): string | undefined }, re: RegExp) {
  for (let waited = 0; !re.test(ui.lastFrame() ?? '') && waited < 5000; waited += 20)
    await new Promise((r) => setTimeout(r, 20))
}
/**
 * Presses the key that ends the app until it has ended (at most 5 s): a screen attaches its key
 * handler after it renders, so on a busy machine a key sent as soon as the screen shows is lost.
 */
async function endWith(ui: { stdin: { write(data: string): void } }, key: string, done: readonly unknown[]) {
  for (let waited = 0; done.length === 0 && waited < 5000; waited += 100) {
    ui.stdin.write(key)
    await new Promise((r) => setTimeout(r, 100))
  }
}
const failing: CheckResult[] = [
  {
    id: 'cpu',
    title: 'CPU cores',
    status: 'fail',
    found: '2 cores',
    required: '4 minimum, 8 recommended',
    fix: 'Give this machine at least 4 cores',
  },
]
const passing: CheckResult[] = [{ ...failing[0]!, status: 'pass', found: '8 cores', fix: '' }]

/** The license is verified as it is given, against the keys of a vendor the test makes. */
const vendor = testVendor()
const LICENSE = await testLicense(vendor)
const check: AppProps['check'] = (prompt, value) => answerProblem(prompt, value, { keys: vendor.keys })

/**
 * Starts the app on the checks step's doorstep: every question answered through the keyboard.
 * `props` replace the real actions; `asked` is each question's screen as it was asked.
 */
const EXTERNAL = [
  '',
  '',
  'https://atrium.example.com',
  'postgres://a@db/atrium',
  'redis://cache:6379',
  'http://s3:9000',
  '',
  'key',
  'secret',
  '', // the bind address offered
  LICENSE,
  '',
  'admin@example.com',
]

async function throughQuestions(
  t: Parameters<typeof tempDir>[0],
  checks: CheckResult[],
  props: Partial<AppProps> = {},
  values = EXTERNAL,
) {
  const dir = tempDir(t)
  const done: unknown[] = []
  const asked: string[] = []
  const initial: Answers = { ...DEFAULT_ANSWERS, dataPath: dir, outputDir: join(dir, 'out'), config: {} }
  const ui = render(
    <App
      initial={contextFor(initial)}
      resolve={(a) => contextFor(a)}
      check={check}
      preflight={async () => checks}
      configure={configure}
      onDone={(r) => done.push(r)}
      {...props}
    />,
  )
  t.teardown(ui.unmount)
  const enter = async (text = '') => {
    ui.stdin.write(text)
    await tick()
    ui.stdin.write('\r')
    await tick()
  }
  await tick()
  await enter() // welcome
  await enter() // compose
  await enter() // connected
  for (const v of values) {
    asked.push(ui.lastFrame() ?? '')
    await enter(v)
  }
  return { ui, done, asked, out: join(dir, 'out') }
}

/** The app at its first question, Compose and connected chosen; `answers` is each change as it was resolved. */
async function atFirstQuestion(t: Parameters<typeof tempDir>[0]) {
  const dir = tempDir(t)
  const answers: Answers[] = []
  const initial: Answers = { ...DEFAULT_ANSWERS, dataPath: dir, outputDir: join(dir, 'out'), config: {} }
  const ui = render(
    <App
      initial={contextFor(initial)}
      resolve={(a) => (answers.push(a), contextFor(a))}
      check={check}
      preflight={async () => passing}
      configure={configure}
      onDone={() => {}}
    />,
  )
  t.teardown(ui.unmount)
  for (const key of ['', '\r', '\r', '\r']) {
    ui.stdin.write(key)
    await tick()
  }
  await until(ui, /Configuration \(1 of/)
  return { dir, answers, ui }
}

t.test('failed checks offer to run again, accept them, go back or quit; quitting writes nothing', async (t) => {
  const { ui, done, out } = await throughQuestions(t, failing)
  t.match(ui.lastFrame(), /\[FAIL\] CPU cores: 2 cores/)
  t.match(ui.lastFrame(), /r: run again {2}c: accept these and continue {2}b: back to the questions {2}q: quit/)
  ui.stdin.write('\r')
  await tick()
  t.match(ui.lastFrame(), /c: accept these and continue/, 'Enter does not pass failed checks')
  await endWith(ui, 'q', done)
  t.match(done, [{ written: false, checks: failing }])
  t.notOk(existsSync(out))
})

t.test(
  'c accepts the failed checks shown: the answers written record each with who and when, and a run from them is let through with Enter',
  async (t) => {
    const { ui, done, out } = await throughQuestions(t, failing)
    await until(ui, /c: accept these and continue/)
    await tick() // the screen's key handler is attached after it renders
    const before = Date.now()
    ui.stdin.write('c')
    await until(ui, /y: write it/)
    await tick()
    ui.stdin.write('y')
    await until(ui, /Replay:/)
    await endWith(ui, '\r', done)
    t.match(done, [{ written: true }])
    const recorded = loadAnswers(join(out, 'answers.yaml'))
    t.same(recorded.problems, [])
    t.match(recorded.answers.acceptedChecks, [{ id: 'cpu', by: acceptor(), at: /^\d{4}-\d\d-\d\dT/ }])
    t.equal(recorded.answers.acceptedChecks.length, 1)
    t.ok(Date.parse(recorded.answers.acceptedChecks[0]!.at) >= before - 1000)

    // The next run starts from the answers written: the same failure is accepted already, and said so.
    const again = render(
      <App
        initial={contextFor(recorded.answers)}
        resolve={(a) => contextFor(a)}
        check={check}
        preflight={async () => failing}
        configure={configure}
        onDone={() => {}}
      />,
    )
    t.teardown(again.unmount)
    for (let i = 0; i < 30 && !/Accepted before/.test(again.lastFrame() ?? ''); i++) {
      again.stdin.write('\r')
      await tick()
    }
    const frame = again.lastFrame() ?? ''
    t.match(frame.replace(/\s+/g, ' '), /Accepted before: cpu \(by \S+ at \d{4}-\d\d-\d\dT\S+Z\)/)
    t.match(frame, /Enter: continue {2}r: run the checks again {2}b: back to the questions {2}q: quit/)
  },
)

t.test(
  "a failed check of the site's own services cannot be accepted: the screen says which and why, and c does nothing",
  async (t) => {
    const pg: CheckResult = {
      id: 'postgres.connect',
      title: 'PostgreSQL reachable',
      status: 'fail',
      found: 'authentication failed for user atrium at db:5432',
      required: 'a PostgreSQL server that accepts DATABASE_URL',
      fix: 'Correct the user and password in DATABASE_URL',
    }
    const { ui, done, out } = await throughQuestions(t, [...failing, pg])
    await until(ui, /cannot be accepted: Atrium/)
    const frame = ui.lastFrame() ?? ''
    t.match(
      frame.replace(/\s+/g, ' '),
      /postgres\.connect cannot be accepted: Atrium cannot start without its own PostgreSQL, Redis and S3 answering to these settings: .* correct the setting \(or start the service\) and run again\./,
    )
    t.match(frame, /r: run the checks again {2}b: back to the questions {2}q: quit$/)
    t.notMatch(frame, /c: accept/)
    t.ok(frame.split('\n').length <= 24, 'fits 24 rows')
    ui.stdin.write('c')
    await tick()
    t.match(ui.lastFrame(), /cannot be accepted: Atrium/, 'still on the checks')
    await endWith(ui, 'q', done)
    t.match(done, [{ written: false }])
    t.notOk(existsSync(out))
  },
)

t.test('r runs the checks again and says so while they run', async (t) => {
  let runs = 0
  let release = () => {}
  const preflight = async () => {
    runs++
    if (runs > 1) await new Promise<void>((r) => (release = r))
    return runs > 1 ? passing : failing
  }
  const { ui, done } = await throughQuestions(t, failing, { preflight })
  await until(ui, /\[FAIL\] CPU cores/)
  ui.stdin.write('r')
  await until(ui, /Running the checks again\.\.\./)
  t.match(ui.lastFrame(), /^Running the checks again\.\.\.$/m)
  for (let waited = 0; runs < 2 && waited < 5000; waited += 20) await new Promise((r) => setTimeout(r, 20))
  release()
  await until(ui, /\[PASS\] CPU cores/)
  t.match(
    ui.lastFrame(),
    /\[PASS\] CPU cores\n[\s\S]*1 passed, 0 warnings, 0 failed/,
    'the new results replace the old',
  )
  t.equal(runs, 2)
  await endWith(ui, 'q', done)
})

t.test(
  'the checks fit a 24-row terminal however many fail: the passes, then each problem with its whole fix, wrapped, and the arrows scroll to the rest',
  async (t) => {
    const many: CheckResult[] = Array.from({ length: 20 }, (_, i) => ({
      id: `c${i}`,
      title: `Check number ${i} with a long title`,
      status: i % 3 === 0 ? 'warn' : 'fail',
      found: 'what was found, which is long enough to wrap on a narrow terminal '.repeat(2),
      required: 'what is required',
      fix: 'what to do about it, which is also long enough to wrap on any terminal '.repeat(2),
    }))
    const { ui, done } = await throughQuestions(t, [...passing, ...many])
    await until(ui, /r: run the checks again/)
    const frame = ui.lastFrame() ?? ''
    const lines = frame.split('\n')
    t.ok(lines.length <= 24, `${lines.length} rows`)
    // ink-testing-library's terminal is 100 columns wide.
    for (const line of lines) t.ok(line.length <= 100, `fits the width: ${line}`)
    t.match(lines[0], /^\[PASS\] CPU cores$/)
    t.match(lines[1], /^\[FAIL\] Check number 1 with a long title: what was found/, 'failures first')
    const fix = 'fix: ' + many[1]!.fix.trim()
    t.ok(frame.replace(/\s+/g, ' ').includes(fix.replace(/\s+/g, ' ')), 'the fix whole, wrapped, not cut')
    t.match(frame, /\.\.\.and \d+ more: the down arrow shows them/)
    t.notMatch(frame, /\.\.\.\d+ above/)
    t.match(lines.at(-1), /^r: run again {2}c: accept these and continue {2}b: back to the questions {2}q: quit$/)
    ui.stdin.write('\u001B[B') // the down arrow
    await until(ui, /\.\.\.1 above: the up arrow shows them/)
    t.match(ui.lastFrame(), /^ +\.\.\.1 above: the up arrow shows them\n\[FAIL\] Check number 2 /m, 'one problem on')
    for (let i = 0; i < 40; i++) ui.stdin.write('\u001B[B')
    await until(ui, /Check number 18/)
    await tick()
    const end = ui.lastFrame() ?? ''
    t.notMatch(end, /more: the down arrow/, 'at the end, nothing below')
    t.match(end, /\[WARN\] Check number 18 /, 'the last problem shown')
    t.ok(end.split('\n').length <= 24)
    ui.stdin.write('\u001B[A') // the up arrow
    await until(ui, /more: the down arrow/)
    t.pass('and back up')
    await endWith(ui, 'q', done)
  },
)

t.test(
  'an answer pasted with its line end is taken as if typed and Enter pressed; the line end is not kept',
  async (t) => {
    const { dir, answers, ui } = await atFirstQuestion(t)
    ui.stdin.write(`${dir}/pasted\r`) // one chunk, as a terminal delivers a paste
    await until(ui, /Configuration \(2 of/)
    t.match(ui.lastFrame(), /Configuration \(2 of/, 'the next question')
    t.equal(answers.at(-1)!.dataPath, `${dir}/pasted`)
  },
)

t.test('the plan lists what changes; n leaves without writing', async (t) => {
  const { ui, done, out } = await throughQuestions(t, passing)
  ui.stdin.write('\r')
  await tick()
  const plan = ui.lastFrame() ?? ''
  t.match(plan, /added\s+PUBLIC_URL: https:\/\/atrium\.example\.com/)
  t.match(plan, /added\s+R2_SECRET_ACCESS_KEY: \(secret added\)/)
  t.notMatch(plan, /\bsecret\b(?! added|_ACCESS)/, 'no secret value shown')
  t.match(
    plan.replace(/\s+/g, ' '),
    /Services: PostgreSQL yours \(db\), Redis yours \(cache\), S3 yours \(s3\)/,
    "the site's own services, by host",
  )
  await endWith(ui, 'n', done)
  t.match(done, [{ written: false }])
  t.notOk(existsSync(out))
})

t.test('Compose questions left empty use the bundled services, and the plan says so', async (t) => {
  const bundled = ['', '', 'https://atrium.example.com', '', '', '', '', '', '', '', LICENSE, '', 'admin@example.com']
  const { ui, done } = await throughQuestions(t, passing, {}, bundled)
  ui.stdin.write('\r')
  await until(ui, /Services:/)
  t.match(
    (ui.lastFrame() ?? '').replace(/\s+/g, ' '),
    /Services: PostgreSQL bundled, Redis bundled, S3 bundled \(an empty answer means the bundled one\)/,
  )
  await endWith(ui, 'n', done)
})

t.test('y writes the configuration and the summary gives the replay command', async (t) => {
  const { ui, done, out } = await throughQuestions(t, passing)
  ui.stdin.write('\r')
  await tick()
  ui.stdin.write('y')
  await tick()
  const frame = (ui.lastFrame() ?? '').replace(/\s+/g, '')
  t.ok(frame.includes(`Replay:${answersCommand('configure', join(out, 'answers.yaml'))}`.replace(/\s+/g, '')), frame)
  t.ok(
    frame.includes(`Deploylaterwith:${answersCommand('install', join(out, 'answers.yaml'))}`.replace(/\s+/g, '')),
    'the commands this installer runs as, by absolute paths (core/invocation.ts)',
  )
  t.ok(existsSync(join(out, '.env')))
  await endWith(ui, '\r', done)
  t.match(done, [{ written: true }])
})

t.test("after writing, d deploys with progress and ends on the URL and the first admin's credentials", async (t) => {
  const calls: string[] = []
  const install: AppProps['install'] = async (ctx, _written, onStep) => {
    calls.push(ctx.answers.adminEmail)
    const command = {
      file: 'docker',
      args: ['compose', 'up'],
      title: 'Start Atrium and wait until every service is healthy',
    }
    const result = {
      command: 'docker compose up',
      exitCode: 0,
      stdout: '',
      stderr: '',
      notFound: false,
      timedOut: false,
    }
    onStep({ command, result: null } as DeployStep)
    await tick()
    onStep({ command, result })
    return {
      ok: true,
      stage: 'done',
      url: 'https://atrium.example.com',
      steps: [{ command, result }],
      existing: null,
      created: {
        tenantId: 't-1',
        userId: 'u-1',
        email: 'admin@example.com',
        password: 'pw-shown-once',
        apiKey: 'svc_ci_abc',
      },
    }
  }
  const { ui, done } = await throughQuestions(t, passing, { install })
  ui.stdin.write('\r')
  await tick()
  ui.stdin.write('y')
  await until(ui, /d: deploy now/)
  await tick() // the screen's key handler is attached after it renders
  t.match(ui.lastFrame(), /d: deploy now \(docker compose up\)/)
  ui.stdin.write('d')
  await until(ui, /API key\s+svc_ci_abc/)
  const frame = ui.lastFrame() ?? ''
  t.match(frame, /Installed/)
  t.match(frame, /done\s+Start Atrium and wait until every service is healthy/)
  t.match(frame, /Atrium is ready at https:\/\/atrium\.example\.com/)
  t.match(frame, /password\s+pw-shown-once/)
  t.match(frame, /API key\s+svc_ci_abc/)
  t.same(calls, ['admin@example.com'], 'the answers reach the install once')
  await endWith(ui, '\r', done)
  t.match(done, [{ written: true, installed: { ok: true } }])
})

t.test(
  'every action comes in as a prop: the answers are resolved as they change, and the screens only show what they are given',
  async (t) => {
    const resolved: Resolved[] = []
    const kept = 'https://kept.example.com'
    // What is written comes from the context; nothing on disk says so.
    const resolve = (a: Answers) => {
      const ctx = { ...contextFor(a), existing: { PUBLIC_URL: kept } }
      resolved.push(ctx)
      return ctx
    }
    const seen: Resolved[] = []
    const runs: boolean[] = []
    const { ui, asked, done, out } = await throughQuestions(t, passing, {
      resolve,
      preflight: async (ctx) => {
        seen.push(ctx)
        return passing
      },
      configure: (ctx, o) => {
        runs.push(o.dryRun)
        return configure(ctx, { dryRun: true })
      },
    })
    t.equal(resolved.length, 15, 'resolved once per change: target, mode and thirteen answers')
    t.match(
      asked[2],
      new RegExp(`Public URL users reach Atrium at \\(https://\\.\\.\\.\\) \\(Enter for ${kept}\\)`),
      'the question offers what the context says is written',
    )
    t.equal(seen[0], resolved.at(-1), 'the checks run on the context of the last answer')
    t.match(resolved.at(-1)!.answers, {
      target: 'compose',
      mode: 'connected',
      adminEmail: 'admin@example.com',
      config: { PUBLIC_URL: 'https://atrium.example.com' },
    })
    ui.stdin.write('\r')
    await tick()
    ui.stdin.write('y')
    await tick()
    t.same(runs, [true, false], 'the plan is a dry run; y writes')
    await endWith(ui, '\r', done)
    t.match(done, [{ written: false }], 'what the configure prop said is what the installer reports')
    t.notOk(existsSync(out), 'the screens wrote nothing themselves')
  },
)

t.test(
  'the plan fits a 24-row terminal however much changes: what fits, how many more and where to see them, then the keys',
  async (t) => {
    // A plan with more changes than rows (a site moving many settings at once).
    const more: AppProps['configure'] = (ctx, o) => {
      const r = configure(ctx, o)
      const extra = Array.from({ length: 40 }, (_, i) => ({
        name: `SETTING_${i}` as SettingName,
        change: 'changed' as const,
        shown: `a value that is long enough to be cut at the edge of the screen ${'.'.repeat(60)}`,
      }))
      return { ...r, plan: { ...r.plan, changes: [...r.plan.changes, ...extra] } }
    }
    const { ui, done } = await throughQuestions(t, passing, { configure: more })
    ui.stdin.write('\r')
    await until(ui, /y: write it/)
    const lines = (ui.lastFrame() ?? '').split('\n')
    t.ok(lines.length <= 24, `${lines.length} rows`)
    t.match(lines[0], /The plan/)
    t.match(ui.lastFrame(), / {2}\.\.\.and \d+ more: the down arrow shows them/)
    for (let i = 0; i < 60; i++) ui.stdin.write('\u001B[B')
    await until(ui, /SETTING_39/)
    t.match(ui.lastFrame(), / {2}\.\.\.\d+ above: the up arrow shows them/, 'scrolled to the last change')
    t.notMatch(ui.lastFrame(), /more: the down arrow/)
    t.ok((ui.lastFrame() ?? '').split('\n').length <= 24)
    t.match(lines.at(-2), /^Writes /)
    t.match(lines.at(-1), /^y: write it {2}b: answer again {2}n: quit without writing$/, 'the keys stay on screen')
    await endWith(ui, 'n', done)
  },
)

t.test(
  'a failed install fits a 24-row terminal: the last steps and the end of the output, which holds the cause',
  async (t) => {
    const output = Array.from({ length: 60 }, (_, i) => `container log line ${i}: ${'x'.repeat(120)}`).join('\n')
    const install: AppProps['install'] = async (_ctx, _written, onStep) => {
      const steps = Array.from({ length: 14 }, (_, i) => ({
        command: { file: 'docker', args: ['volume', 'inspect', `v${i}`], title: `Step ${i}` },
        result: { command: 'docker', exitCode: 0, stdout: '', stderr: '', notFound: false, timedOut: false },
      }))
      for (const s of steps) onStep(s as DeployStep)
      return {
        ok: false,
        stage: 'deploy',
        url: '',
        steps,
        existing: null,
        created: null,
        error: `Deploy failed at: docker compose up\n${output}\nError: the cause, last`,
      }
    }
    const { ui, done } = await throughQuestions(t, passing, { install })
    ui.stdin.write('\r')
    await tick()
    ui.stdin.write('y')
    await until(ui, /d: deploy now/)
    await tick()
    ui.stdin.write('d')
    await until(ui, /Press Enter to exit/)
    const lines = (ui.lastFrame() ?? '').split('\n')
    t.ok(lines.length <= 24, `${lines.length} rows`)
    t.match(lines[0], /Install failed/)
    t.match(lines.at(-2), /Error: the cause, last/, 'the end of the output, where the cause is')
    t.match(ui.lastFrame(), /\.\.\.\d+ lines before this \(the support bundle has them all\)/)
    t.match(lines.at(-1), /Press Enter to exit/)
    await endWith(ui, '\r', done)
  },
)

t.test(
  'an answer is edited as in a shell: Ctrl-U clears what was typed, Ctrl-W a word, Ctrl-A and Ctrl-E move; none is typed in',
  async (t) => {
    const { dir, answers, ui } = await atFirstQuestion(t)
    const type = async (...keys: string[]) => {
      for (const k of keys) {
        ui.stdin.write(k)
        await tick()
      }
    }
    // Typed faster than the screen is drawn, a key at a time: each key edits what the one before made.
    for (const c of `${dir}/fast`) ui.stdin.write(c)
    await until(ui, /fast/)
    t.match(ui.lastFrame(), new RegExp(`^> ${dir}/fast`, 'm'), 'every key landed')
    await type('/wrong/place', '\u0015') // Ctrl-U
    t.match(ui.lastFrame(), /^>\s*$/m, 'the field is empty again')
    t.notMatch(ui.lastFrame(), /u$/m, 'no literal "u"')
    await type(`${dir}/x two`, '\u0017') // Ctrl-W: "two" goes
    await type('\u0001', '\u0005', 'data') // Ctrl-A, Ctrl-E, then at the end
    await type('\u0001', '\u0006', '\u007f') // Ctrl-A, Ctrl-F, Backspace: the first character goes
    await type('/', '\r')
    await until(ui, /Configuration \(2 of/)
    t.equal(answers.at(-1)!.dataPath, `${dir}/x data`)
  },
)

t.test('b at the checks goes back to the questions, each offering what was answered', async (t) => {
  const { ui, done } = await throughQuestions(t, failing)
  await until(ui, /b: back to the questions/)
  ui.stdin.write('b')
  for (const n of [1, 2, 3]) {
    await until(ui, new RegExp(`Configuration \\(${n} of 13\\)`))
    t.match(ui.lastFrame(), new RegExp(`Configuration \\(${n} of 13\\)`))
    await tick()
    if (n < 3) ui.stdin.write('\r')
  }
  t.match(ui.lastFrame(), /Public URL users reach Atrium at .*\(Enter for https:\/\/atrium\.example\.com\)/s)
  t.same(done, [], 'nothing ended, nothing written')
})

t.test('a license key cut short is refused at its question, with what to do; the whole key is taken', async (t) => {
  const values = EXTERNAL.slice(0, EXTERNAL.indexOf(LICENSE))
  const { ui, done } = await throughQuestions(t, passing, {}, values)
  await until(ui, /License key/)
  ui.stdin.write(LICENSE.slice(0, -20))
  await tick()
  ui.stdin.write('\r')
  await until(ui, /Not accepted/)
  t.match(
    (ui.lastFrame() ?? '').replace(/\s+/g, ' '),
    /Not accepted: The license key is not a license \(it is cut short, has extra characters or is something else\): paste it again exactly as received/,
  )
  t.notMatch(ui.lastFrame(), new RegExp(LICENSE.slice(10, 40).replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')), 'never shown')
  ui.stdin.write('\u0015')
  await tick()
  ui.stdin.write(LICENSE)
  await tick()
  ui.stdin.write('\r')
  await until(ui, /Name of the first tenant/)
  t.match(ui.lastFrame(), /Name of the first tenant/, 'the next question')
  t.same(done, [])
})
