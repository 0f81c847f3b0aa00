// The preflight results as a list: one line per check with its status in words (PASS/WARN/FAIL)
// so no colour is needed to understand it, and what to do under every check that did not pass.
import React from 'react'
import { Box, Text, useStdout } from 'ink'
import { overallStatus, type CheckResult, type CheckStatus } from '../core/checks/check.js'

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

/**
 * Within `rows` lines (the interactive screen): the passes on one line, then each problem, failures
 * first, as its line and its fix, one row each, then how many more a full preflight would show.
 */
function CompactList({ checks, rows, columns }: { checks: readonly CheckResult[]; rows: number; columns: number }) {
  const passed = checks.filter((c) => c.status === 'pass')
  const problems = [...checks.filter((c) => c.status === 'fail'), ...checks.filter((c) => c.status === 'warn')]
  // Rows: the passes, two per problem shown, the "more" line when needed, a blank and the summary.
  const room = Math.max(0, rows - 3 - (passed.length ? 1 : 0))
  const shown = problems.length * 2 <= room ? problems : problems.slice(0, Math.max(0, Math.floor((room - 1) / 2)))
  const status = overallStatus(checks)
  const counts = (s: CheckStatus) => checks.filter((c) => c.status === s).length
  return (
    <Box flexDirection="column" width={columns}>
      {passed.length > 0 && (
        <Text wrap="truncate-end">
          <Mark status="pass" /> {passed.map((c) => c.title).join(', ')}
        </Text>
      )}
      {shown.map((c) => (
        <Box key={c.id} flexDirection="column">
          <Text wrap="truncate-end">
            <Mark status={c.status} /> {c.title}: {c.found}
          </Text>
          <Text wrap="truncate-end">{`       fix: ${c.fix}`}</Text>
        </Box>
      ))}
      {shown.length < problems.length && (
        <Text wrap="truncate-end">{`...and ${problems.length - shown.length} more: the preflight command lists every check in full`}</Text>
      )}
      <Text> </Text>
      <Text bold wrap="truncate-end">
        {counts('pass')} passed, {counts('warn')} warnings, {counts('fail')} failed. {SUMMARY[status]}
      </Text>
    </Box>
  )
}

/**
 * `width`: the columns to wrap to; the terminal Ink draws on when not given (80 when unknown).
 * `rows`: the most lines it may take (the interactive screen); every check in full when not given.
 */
export function CheckList({ checks, width, rows }: { checks: readonly CheckResult[]; width?: number; rows?: number }) {
  const { stdout } = useStdout()
  const columns = width ?? (stdout.columns || 80)
  if (rows !== undefined) return <CompactList checks={checks} rows={rows} columns={columns} />
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
