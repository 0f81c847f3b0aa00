// The upgrade guard for Compose sites, the chart's rules (charts/atrium/templates/upgrade-guard.yaml)
// in the installer: never back to an older version (migrations only go forward), and never past a
// minor (or major) version, since each one's migrations are tested from the one before. One upgrade
// may skip when the admin has read the release notes (--allow-skip).
import { compareVersions, parseVersion } from '../../common/version-numbers.js'

/** What is wrong with going from the running version to this one; null when it may go. */
export function upgradeProblem(from: string, to: string): string | null {
  const f = parseVersion(from)
  const t = parseVersion(to)
  if (!f || !t) return null
  if (compareVersions(t, f) < 0)
    return `upgrade guard: going back from ${from} to ${to} is not supported (database migrations only go forward); restore a backup taken before the upgrade instead`
  const nextMajor = t[0] === f[0] + 1 && t[1] === 0
  if (t[0] !== f[0] && !nextMajor)
    return `upgrade guard: ${from} to ${to} skips a major version; upgrade to ${f[0] + 1}.0 first (or pass --allow-skip after reading the release notes)`
  if (t[0] === f[0] && t[1] > f[1] + 1)
    return `upgrade guard: ${from} to ${to} skips a minor version; upgrade to ${f[0]}.${f[1] + 1} first (or pass --allow-skip after reading the release notes)`
  return null
}
