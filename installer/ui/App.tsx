// The interactive installer: thin screens over core/. Welcome; target and mode; the questions;
// preflight; the plan (what changes); write; then deploy with progress, the wait for /readyz and
// the summary with the URL and the first admin. Keyboard only, fits 80x24, and every status is in
// words so no colour is needed.
import React, { useEffect, useState } from 'react'
import { Box, Text, useApp, useInput } from 'ink'
import SelectInput from 'ink-select-input'
import TextInput from 'ink-text-input'
import { DEFAULT_ANSWERS, type Answers, type Mode, type Target } from '../core/answers.js'
import { overallStatus, type CheckResult } from '../core/checks/check.js'
import { configure, readExisting, type ConfigureResult } from '../core/configure.js'
import { applyAnswer, checkAnswer, promptsFor, type Prompt } from '../core/prompts.js'
import type { DeployStep } from '../deploy/deploy.js'
import { stepLine, summaryLines, type InstallOutcome } from '../deploy/install.js'
import { CheckList } from './CheckList.js'

export interface AppProps {
  /** Runs the preflight for the answers so far (core/preflight.ts in the real installer). */
  preflight: (answers: Answers, values: Record<string, string>) => Promise<CheckResult[]>
  /** Called with the outcome when the installer ends. */
  onDone: (result: { written: boolean; result?: ConfigureResult; checks?: CheckResult[]; installed?: InstallOutcome }) => void
  /** Deploys what was written (deploy/install.ts in the real installer); without it the installer ends at the summary. */
  install?: (answers: Answers, values: Record<string, string>, onStep: (s: DeployStep) => void) => Promise<InstallOutcome>
  initial?: Answers
}

type Step =
  | { name: 'welcome' }
  | { name: 'target' }
  | { name: 'mode' }
  | { name: 'ask'; index: number }
  | { name: 'checks'; checks: CheckResult[] | null }
  | { name: 'plan'; plan: ConfigureResult; checks: CheckResult[] }
  | { name: 'done'; result: ConfigureResult }
  | { name: 'deploying'; result: ConfigureResult; lines: string[] }
  | { name: 'installed'; result: ConfigureResult; outcome: InstallOutcome; lines: string[] }

const valuesOf = (a: Answers) => Object.fromEntries(Object.entries(a.config).filter(([, v]) => typeof v === 'string')) as Record<string, string>

function Title({ children }: { children: React.ReactNode }) {
  return <Text bold underline>{children}</Text>
}

/** One question. The field starts empty; Enter on an empty field takes what is offered. */
function Question({ prompt, onAnswer }: { prompt: Prompt; onAnswer: (value: string) => void }) {
  const [value, setValue] = useState('')
  const [error, setError] = useState<string | null>(null)
  const offer = prompt.initial === '' ? '' : prompt.secret ? ' (Enter keeps the current one)' : ` (Enter for ${prompt.initial})`
  return (
    <Box flexDirection="column">
      <Text wrap="wrap">{prompt.label}{offer}:</Text>
      <Box>
        <Text>&gt; </Text>
        <TextInput
          value={value}
          onChange={(v) => { setValue(v); setError(null) }}
          mask={prompt.secret ? '*' : undefined}
          onSubmit={(v) => {
            const answer = v.trim() === '' ? prompt.initial : v
            const problem = checkAnswer(prompt, answer)
            if (problem) setError(problem)
            else onAnswer(answer)
          }}
        />
      </Box>
      {error && <Text wrap="wrap">Not accepted: {error}</Text>}
    </Box>
  )
}

export function App({ preflight, onDone, install, initial = DEFAULT_ANSWERS }: AppProps) {
  const { exit } = useApp()
  const [answers, setAnswers] = useState<Answers>(initial)
  const [step, setStep] = useState<Step>({ name: 'welcome' })
  const existing = readExisting(answers)
  const prompts = promptsFor(answers, existing)

  const finish = (result: Parameters<AppProps['onDone']>[0]) => {
    onDone(result)
    exit()
  }

  useInput((input, key) => {
    if (step.name === 'welcome' && key.return) setStep({ name: 'target' })
    if (step.name === 'checks' && step.checks) {
      if (input === 'r') setStep({ name: 'checks', checks: null })
      if (input === 'q') finish({ written: false, checks: step.checks })
      if (input === 'c' || (key.return && overallStatus(step.checks) !== 'fail')) {
        setStep({ name: 'plan', plan: configure(answers, valuesOf(answers), { dryRun: true }), checks: step.checks })
      }
    }
    if (step.name === 'plan') {
      if (input === 'y' && step.plan.plan.problems.length === 0) setStep({ name: 'done', result: configure(answers, valuesOf(answers), { dryRun: false }) })
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
    install(answers, valuesOf(answers), onStep).then((outcome) => setStep({ name: 'installed', result: step.result, outcome, lines }))
  }, [step.name])

  useEffect(() => {
    if (step.name !== 'checks' || step.checks) return
    let live = true
    preflight(answers, valuesOf(answers)).then((checks) => live && setStep({ name: 'checks', checks }))
    return () => { live = false }
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
      return (
        <Box flexDirection="column">
          <Title>Where will Atrium run?</Title>
          <SelectInput<Target>
            items={[{ label: 'Docker Compose on this machine', value: 'compose' }, { label: 'Kubernetes with Helm', value: 'helm' }]}
            onSelect={(item) => { setAnswers({ ...answers, target: item.value }); setStep({ name: 'mode' }) }}
          />
        </Box>
      )
    case 'mode':
      return (
        <Box flexDirection="column">
          <Title>Does this site reach the internet?</Title>
          <SelectInput<Mode>
            items={[{ label: 'Connected', value: 'connected' }, { label: 'Air-gapped (no outside network; web search and integrations off)', value: 'air-gapped' }]}
            onSelect={(item) => { setAnswers({ ...answers, mode: item.value }); setStep({ name: 'ask', index: 0 }) }}
          />
        </Box>
      )
    case 'ask': {
      const prompt = prompts[step.index]!
      return (
        <Box flexDirection="column">
          <Title>Configuration ({step.index + 1} of {prompts.length})</Title>
          <Question
            key={prompt.key}
            prompt={prompt}
            onAnswer={(value) => {
              setAnswers(applyAnswer(answers, prompt, value))
              setStep(step.index + 1 < prompts.length ? { name: 'ask', index: step.index + 1 } : { name: 'checks', checks: null })
            }}
          />
        </Box>
      )
    }
    case 'checks':
      if (!step.checks) return <Text>Running the checks...</Text>
      return (
        <Box flexDirection="column">
          <CheckList checks={step.checks} />
          <Text>
            {overallStatus(step.checks) === 'fail' ? 'r: run the checks again  c: continue anyway  q: quit' : 'Enter: continue  r: run the checks again  q: quit'}
          </Text>
        </Box>
      )
    case 'plan': {
      const { plan, files } = step.plan
      return (
        <Box flexDirection="column">
          <Title>The plan</Title>
          {plan.problems.length > 0 ? (
            <>
              <Text>The configuration has problems:</Text>
              {plan.problems.map((p) => <Text key={p} wrap="wrap">  - {p}</Text>)}
              <Text>b: answer the questions again  q: quit</Text>
            </>
          ) : (
            <>
              {plan.changes.length === 0 && <Text>The configuration is already up to date.</Text>}
              {plan.changes.map((c) => <Text key={c.name} wrap="truncate-end">  {c.change.padEnd(8)} {c.name}: {c.shown}</Text>)}
              {plan.generated.map((n) => <Text key={n}>  {n} is generated now and kept on every re-run: back it up.</Text>)}
              <Text>Writes {files.join(', ')}.</Text>
              <Text>y: write it  b: answer again  n: quit without writing</Text>
            </>
          )}
        </Box>
      )
    }
    case 'done':
      return (
        <Box flexDirection="column">
          <Title>Done</Title>
          <Text wrap="wrap">Wrote {step.result.files.join(', ')} (mode 0600).</Text>
          <Text wrap="wrap">Replay: npm run --silent installer -- configure --answers {step.result.answersPath} --yes</Text>
          <Text wrap="wrap">Deploy later with: npm run --silent installer -- install --answers {step.result.answersPath} --yes</Text>
          <Text>{install ? 'd: deploy now (' + (answers.target === 'compose' ? 'docker compose up' : 'helm upgrade --install') + ')  Enter: exit' : 'Press Enter to exit.'}</Text>
        </Box>
      )
    case 'deploying':
    case 'installed': {
      // The last lines only: a long deploy still fits in 24 rows.
      const shown = step.lines.slice(-10)
      return (
        <Box flexDirection="column">
          <Title>{step.name === 'deploying' ? 'Deploying' : step.outcome.ok ? 'Installed' : 'Install failed'}</Title>
          {shown.map((l, i) => <Text key={i} wrap="truncate-end">{l}</Text>)}
          {step.name === 'deploying' && <Text>Working: this can take several minutes.</Text>}
          {step.name === 'installed' && summaryLines(answers, step.outcome).map((l, i) => <Text key={`s${i}`} wrap="wrap">{l}</Text>)}
          {step.name === 'installed' && <Text>Press Enter to exit.</Text>}
        </Box>
      )
    }
  }
}
