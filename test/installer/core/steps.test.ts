// The step runner: every step recorded with its stage, outcome and time; the first failure stops the rest.
import t from 'tap'
import { runSteps, type Step } from '../../../installer/core/steps.js'

/** A clock that moves 5 ms each time it is read. */
const ticking = () => {
  let now = 1000
  return () => (now += 5)
}

t.test('the steps run in order on one state and each is recorded with its outcome and time', async (t) => {
  const steps: Step<string[], 'check' | 'deploy'>[] = [
    { name: 'look', stage: 'check', run: (s) => (s.push('look'), null) },
    { name: 'only-on-upgrade', stage: 'check', when: () => false, run: (s) => (s.push('never'), null) },
    { name: 'start', stage: 'deploy', run: async (s) => (s.push('start'), null) },
  ]
  const state: string[] = []
  const r = await runSteps(steps, state, ticking())
  t.same(state, ['look', 'start'], 'in order; a step whose `when` says no does not run')
  t.same(r, {
    ok: true,
    stage: 'done',
    error: null,
    record: [
      { name: 'look', stage: 'check', outcome: 'done', ms: 5 },
      { name: 'only-on-upgrade', stage: 'check', outcome: 'skipped', ms: 0 },
      { name: 'start', stage: 'deploy', outcome: 'done', ms: 5 },
    ],
  })
})

t.test('the first failure stops the list: its stage and error are the outcome, later steps never run', async (t) => {
  const ran: string[] = []
  const steps: Step<null, 'bundle' | 'deploy' | 'ready'>[] = [
    { name: 'bundle', stage: 'bundle', run: () => (ran.push('bundle'), null) },
    { name: 'deploy', stage: 'deploy', run: async () => (ran.push('deploy'), 'Deploy failed at: docker compose up') },
    { name: 'ready', stage: 'ready', run: () => (ran.push('ready'), null) },
  ]
  const r = await runSteps(steps, null, ticking())
  t.same(ran, ['bundle', 'deploy'])
  t.match(r, { ok: false, stage: 'deploy', error: 'Deploy failed at: docker compose up' })
  t.same(
    r.record.map((s) => [s.name, s.outcome]),
    [
      ['bundle', 'done'],
      ['deploy', 'failed'],
    ],
  )
  t.ok(
    r.record.every((s) => s.ms === 5),
    'each step timed by the clock given',
  )
})

t.test('a step that throws is not turned into a failure: the error reaches the caller', async (t) => {
  await t.rejects(runSteps([{ name: 'boom', stage: 'x', run: () => Promise.reject(new Error('boom')) }], null), {
    message: 'boom',
  })
})

t.test('the real clock by default: a slow step takes its time', async (t) => {
  const r = await runSteps(
    [{ name: 'wait', stage: 'x', run: () => new Promise<null>((res) => setTimeout(() => res(null), 20)) }],
    null,
  )
  t.ok(r.record[0]!.ms >= 15, `timed: ${r.record[0]!.ms} ms`)
})
