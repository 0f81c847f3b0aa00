// The interactive screens' own paths that a full run does not take: quitting at the checks, a
// plan with problems and going back, and nothing written unless the admin says y.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import React from 'react'
import t from 'tap'
import { render } from 'ink-testing-library'
import { App, type AppProps } from '../../../installer/ui/App.js'
import type { DeployStep } from '../../../installer/deploy/deploy.js'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import type { CheckResult } from '../../../installer/core/checks/check.js'
import { tempDir } from '../../helpers/platform.js'

const tick = () => new Promise((r) => setTimeout(r, 60))
const failing: CheckResult[] = [{ id: 'cpu', title: 'CPU cores', status: 'fail', found: '2 cores', required: '4 minimum, 8 recommended', fix: 'Give this machine at least 4 cores' }]
const passing: CheckResult[] = [{ ...failing[0]!, status: 'pass', found: '8 cores', fix: '' }]

/** Starts the app on the checks step's doorstep: every question answered through the keyboard. */
async function throughQuestions(t: Parameters<typeof tempDir>[0], checks: CheckResult[], answers: Partial<Answers['config']> = {}, install?: AppProps['install']) {
  const dir = tempDir(t)
  const done: unknown[] = []
  const initial: Answers = { ...DEFAULT_ANSWERS, dataPath: dir, outputDir: join(dir, 'out'), config: {} }
  const ui = render(<App initial={initial} preflight={async () => checks} install={install} onDone={(r) => done.push(r)} />)
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
  const values = ['', '', 'https://atrium.example.com', 'postgres://a@db/atrium', 'redis://cache:6379', 'http://s3:9000', '', 'key', 'secret', 'license', '', 'admin@example.com',
    ...Object.values(answers)]
  for (const v of values.slice(0, 12)) await enter(v as string)
  return { ui, done, out: join(dir, 'out') }
}

t.test('failed checks offer to run again, continue or quit; quitting writes nothing', async (t) => {
  const { ui, done, out } = await throughQuestions(t, failing)
  t.match(ui.lastFrame(), /\[FAIL\] CPU cores: 2 cores/)
  t.match(ui.lastFrame(), /r: run the checks again {2}c: continue anyway {2}q: quit/)
  ui.stdin.write('\r')
  await tick()
  t.match(ui.lastFrame(), /c: continue anyway/, 'Enter does not pass failed checks')
  ui.stdin.write('q')
  await tick()
  t.match(done, [{ written: false, checks: failing }])
  t.notOk(existsSync(out))
})

t.test('the plan lists what changes; n leaves without writing', async (t) => {
  const { ui, done, out } = await throughQuestions(t, passing)
  ui.stdin.write('\r')
  await tick()
  const plan = ui.lastFrame() ?? ''
  t.match(plan, /added\s+PUBLIC_URL: https:\/\/atrium\.example\.com/)
  t.match(plan, /added\s+R2_SECRET_ACCESS_KEY: \(secret added\)/)
  t.notMatch(plan, /\bsecret\b(?! added|_ACCESS)/, 'no secret value shown')
  ui.stdin.write('n')
  await tick()
  t.match(done, [{ written: false }])
  t.notOk(existsSync(out))
})

t.test('y writes the configuration and the summary gives the replay command', async (t) => {
  const { ui, done, out } = await throughQuestions(t, passing)
  ui.stdin.write('\r')
  await tick()
  ui.stdin.write('y')
  await tick()
  t.match((ui.lastFrame() ?? '').replace(/\s+/g, ' '), /Replay: npm run --silent installer -- configure --answers .*answers\.yaml --yes/)
  t.ok(existsSync(join(out, '.env')))
  ui.stdin.write('\r')
  await tick()
  t.match(done, [{ written: true }])
})

t.test('after writing, d deploys with progress and ends on the URL and the first admin\'s credentials', async (t) => {
  const calls: string[] = []
  const install: AppProps['install'] = async (answers, _values, onStep) => {
    calls.push(answers.adminEmail)
    const command = { file: 'docker', args: ['compose', 'up'], title: 'Start Atrium and wait until every service is healthy' }
    const result = { command: 'docker compose up', exitCode: 0, stdout: '', stderr: '', notFound: false, timedOut: false }
    onStep({ command, result: null } as DeployStep)
    await tick()
    onStep({ command, result })
    return {
      ok: true, stage: 'done', url: 'https://atrium.example.com', steps: [{ command, result }], existing: null,
      created: { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com', password: 'pw-shown-once', apiKey: 'svc_ci_abc' },
    }
  }
  const { ui, done } = await throughQuestions(t, passing, {}, install)
  ui.stdin.write('\r')
  await tick()
  ui.stdin.write('y')
  await tick()
  t.match(ui.lastFrame(), /d: deploy now \(docker compose up\)/)
  ui.stdin.write('d')
  await tick()
  await tick()
  await tick()
  const frame = ui.lastFrame() ?? ''
  t.match(frame, /Installed/)
  t.match(frame, /done\s+Start Atrium and wait until every service is healthy/)
  t.match(frame, /Atrium is ready at https:\/\/atrium\.example\.com/)
  t.match(frame, /password\s+pw-shown-once/)
  t.match(frame, /API key\s+svc_ci_abc/)
  t.same(calls, ['admin@example.com'], 'the answers reach the install once')
  ui.stdin.write('\r')
  await tick()
  t.match(done, [{ written: true, installed: { ok: true } }])
})
