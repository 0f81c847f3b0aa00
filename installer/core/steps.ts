// The one step runner: install, upgrade and restore are each a named list of steps (deploy/install.ts,
// commands/restore.ts), run here in order until one fails. It only calls the steps and reads the
// clock, so the order of a long operation reads as a list and every stage's outcome and time is kept.

/** One named step of a longer operation; it works on the operation's state `S`. */
export interface Step<S, Stage extends string = string> {
  /** The step's own name, as the record lists it. */
  name: string
  /** The stage it belongs to: what a report says the operation stopped at. Several steps may share one. */
  stage: Stage
  /** Run only when this says so (an upgrade's steps on a first install are left out); recorded as skipped. */
  when?: (state: S) => boolean
  /** Does the step's work; what went wrong, in the admin's words, or null when it is done. */
  run: (state: S) => Promise<string | null> | string | null
}

/** What one step did: its outcome and how long it took. */
export interface StepRecord {
  name: string
  stage: string
  outcome: 'done' | 'failed' | 'skipped'
  ms: number
}

export type StepsOutcome<Stage extends string> =
  | { ok: true; stage: 'done'; error: null; record: StepRecord[] }
  | { ok: false; stage: Stage; error: string; record: StepRecord[] }

/** Runs `steps` in order on `state` and stops at the first that fails; a step that throws is not caught. */
export async function runSteps<S, Stage extends string>(
  steps: readonly Step<S, Stage>[],
  state: S,
  clock: () => number = Date.now,
): Promise<StepsOutcome<Stage>> {
  const record: StepRecord[] = []
  for (const step of steps) {
    const start = clock()
    if (step.when && !step.when(state)) {
      record.push({ name: step.name, stage: step.stage, outcome: 'skipped', ms: 0 })
      continue
    }
    const error = await step.run(state)
    record.push({
      name: step.name,
      stage: step.stage,
      outcome: error === null ? 'done' : 'failed',
      ms: clock() - start,
    })
    if (error !== null) return { ok: false, stage: step.stage, error, record }
  }
  return { ok: true, stage: 'done', error: null, record }
}
