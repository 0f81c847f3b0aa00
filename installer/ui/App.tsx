// The interactive installer: thin screens over core/. Welcome; target and mode; the questions;
// preflight; the plan (what changes); write; then deploy with progress, the wait for /readyz and
// the summary with the URL and the first admin. Keyboard only, fits 80x24, and every status is in
// words so no colour is needed. Every action (resolving the answers, the checks, the plan and the
// write, the deploy) comes in as a prop: the screens read nothing themselves.
import React, { useEffect, useRef, useState } from 'react'
import { Box, Text, useApp, useInput, useStdout } from 'ink'
import SelectInput from 'ink-select-input'
import { acceptances, acceptor, judge, neverAccepted, refusals, withAccepted } from '../core/accepted-checks.js'
import type { Answers, Mode, Target } from '../core/answers.js'
import type { CheckResult } from '../core/checks/check.js'
import { replayCommand, type ConfigureResult } from '../core/configure.js'
import type { Resolved } from '../core/context.js'
import { servicesInUse } from '../core/compose-bundle.js'
import { answersCommand } from '../core/invocation.js'
import { applyAnswer, promptsFor, type Prompt } from '../core/prompts.js'
import { toWrite, writtenLine } from '../core/report.js'
import type { DeployStep } from '../deploy/deploy.js'
import { stepLine, summaryLines, type InstallOutcome } from '../deploy/install.js'
import { CheckList } from './CheckList.js'
import { fitTail, fitWindow, rowsOf, SCROLL, windowLines } from './fit.js'
import { LineInput } from './LineInput.js'

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
  /** What is wrong with an answer, or null (core/prompts.ts answerProblem: the license is verified as it is given). */
  check: (prompt: Prompt, value: string) => Promise<string | null>
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
function Question({
  prompt,
  check,
  onAnswer,
}: {
  prompt: Prompt
  check: AppProps['check']
  onAnswer: (value: string) => void
}) {
  const [value, setValue] = useState('')
  const [error, setError] = useState<string | null>(null)
  // One check at a time: a second Enter while the first is judged must not answer twice.
  const checking = useRef(false)
  const offer =
    prompt.initial === '' ? '' : prompt.secret ? ' (Enter keeps the current one)' : ` (Enter for ${prompt.initial})`
  const submit = (v: string) => {
    if (checking.current) return
    checking.current = true
    const answer = v.trim() === '' ? prompt.initial : v
    void check(prompt, answer).then((problem) => {
      checking.current = false
      if (problem) setError(problem)
      else onAnswer(answer)
    })
  }
  return (
    <Box flexDirection="column">
      <Text wrap="wrap">
        {prompt.label}
        {offer}:
      </Text>
      <Box>
        <Text>&gt; </Text>
        <LineInput
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

export function App({ initial, resolve, check, preflight, configure, install, onDone }: AppProps) {
  const { exit } = useApp()
  const { stdout } = useStdout()
  // The terminal's size; 80x24 when it does not say.
  const columns = stdout.columns || 80
  const rows = stdout.rows || 24
  const [ctx, setCtx] = useState<Resolved>(initial)
  const [step, setStep] = useState<Step>({ name: 'welcome' })
  // The first item of the list a screen shows (the checks' problems, the plan's changes): the arrow keys move it.
  // Kept with the step it was scrolled on, so that every new screen (and each new list of checks) starts at the top.
  const [scrolled, setScrolled] = useState<{ on: Step | null; by: number }>({ on: null, by: 0 })
  const scroll = scrolled.on === step ? scrolled.by : 0
  // The step on screen, for the arrow keys: Ink hands a key to the handler of a render or two ago
  // (it attaches each render's after it is drawn), whose step may be the screen before this one.
  const onScreen = useRef(step)
  onScreen.current = step
  // How far the list drawn last can scroll, so that the down arrow stops where nothing more comes into view.
  const scrollLast = useRef(0)
  // From the offset the key before left: keys can come faster than the screen is drawn.
  const scrollBy = (n: number) =>
    setScrolled((s) => {
      const on = onScreen.current
      return { on, by: Math.max(0, Math.min((s.on === on ? s.by : 0) + n, scrollLast.current)) }
    })
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
    if (key.downArrow) scrollBy(1)
    if (key.upArrow) scrollBy(-1)
    if (step.name === 'checks' && step.checks) {
      if (input === 'r') setStep({ name: 'checks', checks: null, again: true })
      if (input === 'q') finish({ written: false, checks: step.checks })
      // To fix an answer the checks showed wrong: the questions again, each offering what was answered.
      if (input === 'b') setStep({ name: 'ask', index: 0 })
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
            check={check}
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
          <CheckList
            checks={step.checks}
            rows={rows - 1 - notes.reduce((n, l) => n + rowsOf(l, columns), 0)}
            offset={scroll}
            onWindow={(last) => (scrollLast.current = last)}
          />
          {notes.map((n) => (
            <Text key={n} wrap="wrap">
              {n}
            </Text>
          ))}
          <Text>
            {!open.length
              ? 'Enter: continue  r: run the checks again  b: back to the questions  q: quit'
              : never.length
                ? 'r: run the checks again  b: back to the questions  q: quit'
                : 'r: run again  c: accept these and continue  b: back to the questions  q: quit'}
          </Text>
        </Box>
      )
    }
    case 'plan': {
      const { plan } = step.plan
      // The problems, or the changes: as many as fit from the first the arrow keys scrolled to.
      const list = (lines: string[], room: number) => {
        const w = fitWindow(lines, { rows: room, columns, offset: scroll, size: (l) => rowsOf(l, columns), ...SCROLL })
        scrollLast.current = w.last
        return windowLines(w)
      }
      if (plan.problems.length > 0) {
        const problems = list(
          plan.problems.map((p) => `  - ${p}`),
          rows - 3,
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
      const writing = toWrite(step.plan)
      const writes = writing.length
        ? `Writes ${writing.join(', ')}.`
        : 'Nothing to write: the configuration is already up to date.'
      // Every line but the changes takes its rows first: the title, the services, the generated secrets, what it
      // writes, the keys.
      const fixed =
        2 +
        (services ? rowsOf(services, columns) : 0) +
        (plan.changes.length || !writing.length ? 0 : 1) +
        plan.generated.length +
        rowsOf(writes, columns)
      const changes = list(
        plan.changes.map((c) => `  ${c.change.padEnd(8)} ${c.name}: ${c.shown}`.slice(0, columns)),
        rows - fixed,
      )
      return (
        <Box flexDirection="column" width={columns}>
          <Title>The plan</Title>
          {services && <Text wrap="wrap">{services}</Text>}
          {plan.changes.length === 0 && writing.length > 0 && <Text>No setting changes.</Text>}
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
          <Text wrap="wrap">{writtenLine(step.result)}</Text>
          <Text wrap="wrap">Replay: {replayCommand(step.result.answersPath)}</Text>
          <Text wrap="wrap">Deploy later with: {answersCommand('install', step.result.answersPath)}</Text>
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
