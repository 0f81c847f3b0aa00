// The preflight results as a list: one line per check with its status in words (PASS/WARN/FAIL)
// so no colour is needed to understand it, and what to do under every check that did not pass,
// wrapped to the terminal's width (never cut: the fix is what the admin acts on).
import React from 'react'
import { Box, Text, useStdout } from 'ink'
import { overallStatus, type CheckResult, type CheckStatus } from '../core/checks/check.js'
import { fitWindow, rowsOf, SCROLL } from './fit.js'

const MARK: Record<CheckStatus, { label: string; color: string }> = {
  pass: { label: 'PASS', color: 'green' },
  warn: { label: 'WARN', color: 'yellow' },
  fail: { label: 'FAIL', color: 'red' },
}

const SUMMARY: Record<CheckStatus, string> = {
  pass: 'Every check passed.',
  warn: 'No blocker, but some recommendations are not met (see WARN above).',
  fail: 'Some minimums are not met: fix the FAIL items above, then run the checks again.',
}

/** [PASS], [WARN] or [FAIL], in its colour. */
const Mark = ({ status }: { status: CheckStatus }) => (
  <Text color={MARK[status].color} bold>
    [{MARK[status].label}]
  </Text>
)

export function CheckLine({ check }: { check: CheckResult }) {
  return (
    <Box flexDirection="column">
      <Text wrap="wrap">
        <Mark status={check.status} /> {check.title}: {check.found}
      </Text>
      {check.status !== 'pass' && (
        <Box flexDirection="column" marginLeft={7}>
          <Text wrap="wrap">needs: {check.required}</Text>
          <Text wrap="wrap">fix: {check.fix}</Text>
        </Box>
      )}
    </Box>
  )
}

/** The rows a problem takes on the compact list: its line, then its fix under it (both wrapped, never cut). */
const problemRows = (c: CheckResult, columns: number) =>
  rowsOf(`[${MARK[c.status].label}] ${c.title}: ${c.found}`, columns) + rowsOf(`fix: ${c.fix}`, columns - FIX_INDENT)

const FIX_INDENT = 7

/**
 * Within `rows` lines (the interactive screen): the passes, then each problem, failures first, as
 * its line and its fix, wrapped, from `offset` on as many as fit, with how many are above and below
 * (the arrow keys scroll: ui/App.tsx).
 */
function CompactList({
  checks,
  rows,
  columns,
  offset,
  onWindow,
}: {
  checks: readonly CheckResult[]
  rows: number
  columns: number
  offset: number
  onWindow?: (last: number) => void
}) {
  const passed = checks.filter((c) => c.status === 'pass')
  const problems = [...checks.filter((c) => c.status === 'fail'), ...checks.filter((c) => c.status === 'warn')]
  const passes = passed.length ? `[PASS] ${passed.map((c) => c.title).join(', ')}` : ''
  const status = overallStatus(checks)
  const counts = (s: CheckStatus) => checks.filter((c) => c.status === s).length
  const summary = `${counts('pass')} passed, ${counts('warn')} warnings, ${counts('fail')} failed. ${SUMMARY[status]}`
  // Rows: the passes, the problems that fit, a blank and the summary.
  const room = Math.max(0, rows - 1 - rowsOf(summary, columns) - (passes ? rowsOf(passes, columns) : 0))
  const window = fitWindow(problems, { rows: room, columns, offset, size: (c) => problemRows(c, columns), ...SCROLL })
  onWindow?.(window.last)
  return (
    <Box flexDirection="column" width={columns}>
      {passes && (
        <Text wrap="wrap">
          <Mark status="pass" /> {passed.map((c) => c.title).join(', ')}
        </Text>
      )}
      {window.above && <Text wrap="wrap">{window.above}</Text>}
      {window.shown.map((c) => (
        <Box key={c.id} flexDirection="column">
          <Text wrap="wrap">
            <Mark status={c.status} /> {c.title}: {c.found}
          </Text>
          <Box marginLeft={FIX_INDENT}>
            <Text wrap="wrap">fix: {c.fix}</Text>
          </Box>
        </Box>
      ))}
      {window.below && <Text wrap="wrap">{window.below}</Text>}
      <Text> </Text>
      <Text bold wrap="wrap">
        {summary}
      </Text>
    </Box>
  )
}

/**
 * `width`: the columns to wrap to; the terminal Ink draws on when not given (80 when unknown).
 * `rows`: the most lines it may take (the interactive screen); every check in full when not given.
 * `offset`: with `rows`, the first problem shown (the screen scrolls the list); `onWindow` hears the
 * greatest offset worth scrolling to.
 */
export function CheckList({
  checks,
  width,
  rows,
  offset = 0,
  onWindow,
}: {
  checks: readonly CheckResult[]
  width?: number
  rows?: number
  offset?: number
  onWindow?: (last: number) => void
}) {
  const { stdout } = useStdout()
  const columns = width ?? (stdout.columns || 80)
  if (rows !== undefined)
    return <CompactList checks={checks} rows={rows} columns={columns} offset={offset} onWindow={onWindow} />
  const status = overallStatus(checks)
  const counts = (s: CheckStatus) => checks.filter((c) => c.status === s).length
  return (
    <Box flexDirection="column" width={columns}>
      {checks.map((c) => (
        <CheckLine key={c.id} check={c} />
      ))}
      <Text> </Text>
      <Text bold wrap="wrap">
        {counts('pass')} passed, {counts('warn')} warnings, {counts('fail')} failed. {SUMMARY[status]}
      </Text>
    </Box>
  )
}
