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

export function CheckLine({ check }: { check: CheckResult }) {
  const mark = MARK[check.status]
  return (
    <Box flexDirection="column">
      <Text wrap="wrap">
        <Text color={mark.color} bold>
          [{mark.label}]
        </Text>{' '}
        {check.title}: {check.found}
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

/** `width`: the columns to wrap to; the terminal Ink draws on when not given (80 when unknown). */
export function CheckList({ checks, width }: { checks: readonly CheckResult[]; width?: number }) {
  const { stdout } = useStdout()
  const columns = width ?? (stdout.columns || 80)
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
