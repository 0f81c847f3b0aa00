// The interactive installer: thin screens over core/. Welcome; target and mode; the questions;
// preflight; the plan (what changes); write; then deploy with progress, the wait for /readyz and
// the summary with the URL and the first admin. Keyboard only, fits 80x24, and every status is in
// words so no colour is needed. Every action (resolving the answers, the checks, the plan and the
// write, the deploy) comes in as a prop: the screens read nothing themselves.
import React, { useEffect, useState } from 'react'
import { Box, Text, useApp, useInput, useStdout } from 'ink'
import SelectInput from 'ink-select-input'
import TextInput from 'ink-text-input'
import { acceptances, acceptor, judge, neverAccepted, refusals, withAccepted } from '../core/accepted-checks.js'
import type { Answers, Mode, Target } from '../core/answers.js'
import type { CheckResult } from '../core/checks/check.js'
import { replayCommand, type ConfigureResult } from '../core/configure.js'
import type { Resolved } from '../core/context.js'
import { servicesInUse } from '../core/compose-bundle.js'
import { applyAnswer, checkAnswer, promptsFor, type Prompt } from '../core/prompts.js'
import type { DeployStep } from '../deploy/deploy.js'
import { stepLine, summaryLines, type InstallOutcome } from '../deploy/install.js'
import { CheckList } from './CheckList.js'
import { fitRows, fitTail, rowsOf } from './fit.js'

/** How the installer ended: written or not, with what it saw and did. */
export interface AppResult {
  written: boolean
  result?: ConfigureResult
  checks?: CheckResult[]
  installed?: InstallOutcome
}

export interface AppProps {
  /** Where the admin starts: the answers given (or the defaults), resolved (core/context.ts). */
  initial: Resolved
  /** Resolves the answers as they change (the configuration already written for them, their references). */
  resolve: (answers: Answers) => Resolved
  /** Runs the preflight (core/preflight.ts in the real installer). */
  preflight: (ctx: Resolved) => Promise<CheckResult[]>
  /** Plans the configuration and, unless a dry run, writes it (core/configure.ts). */
  configure: (ctx: Resolved, opts: { dryRun: boolean; stage?: boolean }) => ConfigureResult
  /** Deploys what was written (deploy/install.ts); without it the installer ends at the summary. */
  install?: (ctx: Resolved, written: ConfigureResult, onStep: (s: DeployStep) => void) => Promise<InstallOutcome>
  /** Called with the outcome when the installer ends. */
  onDone: (result: AppResult) => void
}

type Step =
  | { name: 'welcome' }
  | { name: 'target' }
  | { name: 'mode' }
  | { name: 'ask'; index: number }
  | { name: 'checks'; checks: CheckResult[] | null; again?: boolean }
  | { name: 'plan'; plan: ConfigureResult; checks: CheckResult[] }
  | { name: 'done'; result: ConfigureResult }
  | { name: 'deploying'; result: ConfigureResult; lines: string[] }
  | { name: 'installed'; result: ConfigureResult; outcome: InstallOutcome; lines: string[] }

/** The two questions answered by picking: where Atrium runs, then whether it reaches the internet. */
const CHOICES: {
  [K in 'target' | 'mode']: { title: string; items: { label: string; value: Answers[K] }[]; next: Step }
} = {
  target: {
    title: 'Where will Atrium run?',
    items: [
      { label: 'Docker Compose on this machine', value: 'compose' },
      { label: 'Kubernetes with Helm', value: 'helm' },
    ],
    next: { name: 'mode' },
  },
  mode: {
    title: 'Does this site reach the internet?',
    items: [
      { label: 'Connected', value: 'connected' },
      {
        label: 'Air-gapped (no outside network; web search and integrations off)',
        value: 'air-gapped',
      },
    ],
    next: { name: 'ask', index: 0 },
  },
}

function Title({ children }: { children: React.ReactNode }) {
  return (
    <Text bold underline>
      {children}
    </Text>
  )
}

/** One question. The field starts empty; Enter on an empty field takes what is offered. */
function Question({ prompt, onAnswer }: { prompt: Prompt; onAnswer: (value: string) => void }) {
  const [value, setValue] = useState('')
  const [error, setError] = useState<string | null>(null)
  const offer =
    prompt.initial === '' ? '' : prompt.secret ? ' (Enter keeps the current one)' : ` (Enter for ${prompt.initial})`
  const submit = (v: string) => {
    const answer = v.trim() === '' ? prompt.initial : v
    const problem = checkAnswer(prompt, answer)
    if (problem) setError(problem)
    else onAnswer(answer)
  }
  return (
    <Box flexDirection="column">
      <Text wrap="wrap">
        {prompt.label}
        {offer}:
      </Text>
      <Box>
        <Text>&gt; </Text>
        <TextInput
          value={value}
          onChange={(v) => {
            // Pasted text arrives in one piece, its line end included: the line end submits it,
            // as Enter would, and is never part of the answer.
            const end = v.search(/[\r\n]/)
            setValue(end < 0 ? v : v.slice(0, end))
            setError(null)
            if (end >= 0) submit(v.slice(0, end))
          }}
          mask={prompt.secret ? '*' : undefined}
          onSubmit={submit}
        />
      </Box>
      {error && <Text wrap="wrap">Not accepted: {error}</Text>}
    </Box>
  )
}

export function App({ initial, resolve, preflight, configure, install, onDone }: AppProps) {
  const { exit } = useApp()
  const { stdout } = useStdout()
  // The terminal's size; 80x24 when it does not say.
  const columns = stdout.columns || 80
  const rows = stdout.rows || 24
  const [ctx, setCtx] = useState<Resolved>(initial)
  const [step, setStep] = useState<Step>({ name: 'welcome' })
  const { answers } = ctx
  const prompts = promptsFor(answers, ctx.existing)
  // Resolved here, in the handler that changes the answers, never while drawing.
  const answer = (next: Answers) => setCtx(resolve(next))

  const finish = (result: AppResult) => {
    onDone(result)
    exit()
  }

  useInput((input, key) => {
    if (step.name === 'welcome' && key.return) setStep({ name: 'target' })
    if (step.name === 'checks' && step.checks) {
      if (input === 'r') setStep({ name: 'checks', checks: null, again: true })
      if (input === 'q') finish({ written: false, checks: step.checks })
      // Failed checks the answers do not accept yet: c accepts them, each by id, when every one may be; the answers
      // written then record who and when, as --accept-check does.
      const { open } = judge(step.checks, answers.acceptedChecks, false)
      if ((input === 'c' && !open.some((c) => neverAccepted(c.id))) || (key.return && !open.length)) {
        const ids = open.map((c) => c.id)
        const next = ids.length
          ? resolve({ ...answers, acceptedChecks: withAccepted(answers.acceptedChecks, acceptances(ids, acceptor())) })
          : ctx
        setCtx(next)
        setStep({ name: 'plan', plan: configure(next, { dryRun: true }), checks: step.checks })
      }
    }
    if (step.name === 'plan') {
      if (input === 'y' && step.plan.plan.problems.length === 0)
        setStep({ name: 'done', result: configure(ctx, { dryRun: false, stage: Boolean(install) }) })
      if (input === 'n' || input === 'q') finish({ written: false, checks: step.checks })
      if (input === 'b') setStep({ name: 'ask', index: 0 })
    }
    if (step.name === 'done' && key.return) finish({ written: step.result.written, result: step.result })
    if (step.name === 'done' && input === 'd' && install) setStep({ name: 'deploying', result: step.result, lines: [] })
    if (step.name === 'installed' && key.return) finish({ written: true, result: step.result, installed: step.outcome })
  })

  useEffect(() => {
    if (step.name !== 'deploying' || step.lines.length || !install) return
    const lines: string[] = []
    // Each step reports twice (start, end): the end replaces the start's line.
    const onStep = (s: DeployStep) => {
      if (s.result || s.skipped) lines[lines.length - 1] = stepLine(s)
      else lines.push(stepLine(s))
      setStep({ name: 'deploying', result: step.result, lines: [...lines] })
    }
    install(ctx, step.result, onStep).then((outcome) =>
      setStep({ name: 'installed', result: step.result, outcome, lines }),
    )
  }, [step.name])

  useEffect(() => {
    if (step.name !== 'checks' || step.checks) return
    let live = true
    preflight(ctx).then((checks) => live && setStep({ name: 'checks', checks }))
    return () => {
      live = false
    }
  }, [step])

  switch (step.name) {
    case 'welcome':
      return (
        <Box flexDirection="column">
          <Title>Atrium installer</Title>
          <Text>This checks the machine and the services Atrium will use, validates your</Text>
          <Text>license and writes the configuration. Nothing changes until you confirm.</Text>
          <Text> </Text>
          <Text>Press Enter to start. Ctrl+C quits at any time.</Text>
        </Box>
      )
    case 'target':
    case 'mode': {
      const choice = CHOICES[step.name]
      return (
        <Box flexDirection="column">
          <Title>{choice.title}</Title>
          <SelectInput<Target | Mode>
            items={choice.items}
            onSelect={(item) => {
              answer({ ...answers, [step.name]: item.value })
              setStep(choice.next)
            }}
          />
        </Box>
      )
    }
    case 'ask': {
      const prompt = prompts[step.index]!
      return (
        <Box flexDirection="column">
          <Title>
            Configuration ({step.index + 1} of {prompts.length})
          </Title>
          <Question
            key={prompt.key}
            prompt={prompt}
            onAnswer={(value) => {
              answer(applyAnswer(answers, prompt, value))
              setStep(
                step.index + 1 < prompts.length
                  ? { name: 'ask', index: step.index + 1 }
                  : { name: 'checks', checks: null },
              )
            }}
          />
        </Box>
      )
    }
    case 'checks': {
      if (!step.checks) return <Text>{step.again ? 'Running the checks again...' : 'Running the checks...'}</Text>
      const { accepted, open } = judge(step.checks, answers.acceptedChecks, false)
      // What the answers accept already, and why those that cannot be accepted cannot (each reason said once).
      const never = refusals(open.map((c) => c.id))
      const notes = [
        ...(accepted.length
          ? [`Accepted before: ${accepted.map((a) => `${a.id} (by ${a.by} at ${a.at})`).join(', ')}`]
          : []),
        ...never,
      ]
      return (
        <Box flexDirection="column" width={columns}>
          {/* Within the terminal's rows (24 when unknown), less the notes and the line of keys below. */}
          <CheckList checks={step.checks} rows={rows - 1 - notes.reduce((n, l) => n + rowsOf(l, columns), 0)} />
          {notes.map((n) => (
            <Text key={n} wrap="wrap">
              {n}
            </Text>
          ))}
          <Text>
            {!open.length
              ? 'Enter: continue  r: run the checks again  q: quit'
              : never.length
                ? 'r: run the checks again  q: quit'
                : 'r: run the checks again  c: accept these and continue  q: quit'}
          </Text>
        </Box>
      )
    }
    case 'plan': {
      const { plan, files } = step.plan
      if (plan.problems.length > 0) {
        const problems = fitRows(
          plan.problems.map((p) => `  - ${p}`),
          rows - 3,
          columns,
          (n) => `  ...and ${n} more: configure --answers ${ctx.files.answers} --dry-run lists them all`,
        )
        return (
          <Box flexDirection="column" width={columns}>
            <Title>The plan</Title>
            <Text>The configuration has problems:</Text>
            {problems.map((p) => (
              <Text key={p} wrap="wrap">
                {p}
              </Text>
            ))}
            <Text>{'b: answer the questions again  q: quit'}</Text>
          </Box>
        )
      }
      const services =
        answers.target === 'compose'
          ? `Services: ${servicesInUse(plan.values)} (an empty answer means the bundled one)`
          : null
      const writes = `Writes ${files.join(', ')}.`
      // Every line but the changes takes its rows first: the title, the services, the generated secrets, what it
      // writes, the keys.
      const fixed =
        2 +
        (services ? rowsOf(services, columns) : 0) +
        (plan.changes.length ? 0 : 1) +
        plan.generated.length +
        rowsOf(writes, columns)
      const changes = fitRows(
        plan.changes.map((c) => `  ${c.change.padEnd(8)} ${c.name}: ${c.shown}`.slice(0, columns)),
        rows - fixed,
        columns,
        (n) => `  ...and ${n} more: configure --answers ${ctx.files.answers} --dry-run lists every change`,
      )
      return (
        <Box flexDirection="column" width={columns}>
          <Title>The plan</Title>
          {services && <Text wrap="wrap">{services}</Text>}
          {plan.changes.length === 0 && <Text>The configuration is already up to date.</Text>}
          {changes.map((c) => (
            <Text key={c} wrap="wrap">
              {c}
            </Text>
          ))}
          {plan.generated.map((n) => (
            <Text key={n} wrap="truncate-end">{`  ${n} is generated now and kept on every re-run: back it up.`}</Text>
          ))}
          <Text wrap="wrap">{writes}</Text>
          <Text>{'y: write it  b: answer again  n: quit without writing'}</Text>
        </Box>
      )
    }
    case 'done':
      return (
        <Box flexDirection="column">
          <Title>Done</Title>
          <Text wrap="wrap">Wrote {step.result.files.join(', ')} (mode 0600).</Text>
          <Text wrap="wrap">Replay: {replayCommand(step.result.answersPath)}</Text>
          <Text wrap="wrap">
            Deploy later with: npm run --silent installer -- install --answers {step.result.answersPath} --yes
          </Text>
          <Text>
            {install
              ? 'd: deploy now (' +
                (answers.target === 'compose' ? 'docker compose up' : 'helm upgrade --install') +
                ')  Enter: exit'
              : 'Press Enter to exit.'}
          </Text>
        </Box>
      )
    case 'deploying':
    case 'installed': {
      const summary =
        step.name === 'installed'
          ? summaryLines(answers, step.outcome).flatMap((l) => l.split('\n'))
          : ['Working: this can take several minutes.']
      // The title and the key line, then the last steps (10 at most; 3 when the summary needs the room), then the
      // summary's end.
      const steps = step.lines.slice(-(rowsOf(summary.join('\n'), columns) > rows - 12 ? 3 : 10))
      const end = fitTail(
        summary,
        rows - 2 - steps.length,
        columns,
        (n) => `...${n} lines before this (the support bundle has them all)`,
      )
      return (
        <Box flexDirection="column" width={columns}>
          <Title>{step.name === 'deploying' ? 'Deploying' : step.outcome.ok ? 'Installed' : 'Install failed'}</Title>
          {steps.map((l, i) => (
            <Text key={i} wrap="truncate-end">
              {l}
            </Text>
          ))}
          {end.map((l, i) => (
            <Text key={`s${i}`} wrap="wrap">
              {l}
            </Text>
          ))}
          {step.name === 'installed' && <Text>Press Enter to exit.</Text>}
        </Box>
      )
    }
  }
}
