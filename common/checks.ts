// What every check returns, the installer's preflight (docs/installer.md, "Preflight") and the
// server's validation of a customer-owned store alike: what it found, what is required and how to
// fix it. A minimum not met is fail; a recommendation not met is warn.

export type CheckStatus = 'pass' | 'warn' | 'fail'

export interface CheckResult {
  /** Stable and machine-readable: `cpu`, `memory`, `postgres.version`, ... */
  id: string
  /** What was checked, for people. */
  title: string
  status: CheckStatus
  /** What the check saw, in words a person can compare with `required`. */
  found: string
  /** The minimum (and the recommendation, when there is one). */
  required: string
  /** How to fix it; empty when the check passed. */
  fix: string
}

/** How to fix a check: one text, or one for each status that is not a pass. */
export type Fix = string | Partial<Record<'warn' | 'fail', string>>

/**
 * The one way a check result is made, so that every check keeps the rule "a fix exactly when it
 * did not pass": the fix given for a pass is dropped, and a per-status fix picks the one for the
 * status (the other one when only that is given).
 */
export function check(
  id: string,
  title: string,
  status: CheckStatus,
  found: string,
  required: string,
  fix: Fix = '',
): CheckResult {
  const text = status === 'pass' ? '' : typeof fix === 'string' ? fix : (fix[status] ?? fix.fail ?? fix.warn ?? '')
  return { id, title, status, found, required, fix: text }
}

/** The worst status among the results (pass when there are none). */
export function overallStatus(results: readonly CheckResult[]): CheckStatus {
  if (results.some((r) => r.status === 'fail')) return 'fail'
  if (results.some((r) => r.status === 'warn')) return 'warn'
  return 'pass'
}

/**
 * Grades a measured amount against a minimum and a recommendation (both in the same unit):
 * under the minimum fails, under the recommendation warns.
 */
export function grade(value: number, minimum: number, recommended: number): CheckStatus {
  if (value < minimum) return 'fail'
  if (value < recommended) return 'warn'
  return 'pass'
}
