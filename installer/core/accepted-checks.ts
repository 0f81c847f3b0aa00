// Carrying on past a failed check is an admin's decision about one check, said on the command line
// (--accept-check ID, repeatable) or on the interactive checks screen, and recorded in answers.yaml
// with who made it and when, so that a replay (a small machine's every upgrade) applies it again
// without the flag. Some checks can never be accepted: those of the site's own services'
// connectivity and credentials. A site deployed past one of them cannot start (the migrations or
// the server fail after the switch), which is exactly how one wrong database password took a
// running site down; the fix is always in the configuration or the service, never in going on.
import { userInfo } from 'node:os'
import { isRegionCode } from '../../common/regions.js'
import type { CheckResult } from './checks/check.js'

/** One acceptance as answers.yaml records it. */
export interface AcceptedCheck {
  /** The check's id, as the preflight reports it. */
  id: string
  /** The OS user who accepted it (the one behind sudo when run with sudo). */
  by: string
  /** When, as an ISO 8601 time. */
  at: string
}

/**
 * Every check id the preflight gives (installer/core/checks/*, installer/core/preflight.ts,
 * common/service-checks.ts, installer/core/license.ts), but the per-region ones.
 */
export const CHECK_IDS = [
  'cpu',
  'memory',
  'disk',
  'ssd',
  'os',
  'ports',
  'clock',
  'postgres.connect',
  'postgres.version',
  'postgres.privileges',
  'postgres.pooling',
  'redis.connect',
  'redis.topology',
  'redis.version',
  'redis.eviction',
  's3.roundtrip',
  's3.addressing',
  'region.stores',
  'services.loopback',
  'services.where',
  'tools.docker',
  'tools.compose',
  'tools.helm',
  // Acceptable (its warning says the engine could not be asked): a volume bound elsewhere is refused by the install
  // step itself (deploy/volumes.ts), whatever was accepted.
  'volumes',
  'kube.connect',
  'kube.version',
  'kube.nodes',
  'kube.cpu',
  'kube.memory',
  'kube.storageclass',
  'kube.namespace',
  'kube.rbac',
  'license',
  'preflight.deadline',
] as const

/** A region store of REGION_STORES is checked as the default store is, under ids of its own. */
const REGION_ID = /^region\.([a-z0-9-]+)\.(roundtrip|addressing)$/

/** Whether the preflight gives a check of this id. */
export const isCheckId = (id: string): boolean => {
  const region = REGION_ID.exec(id)
  return region ? isRegionCode(region[1]!) : (CHECK_IDS as readonly string[]).includes(id)
}

/** Why a check can never be accepted, and what to do instead. */
export interface NeverAccepted {
  why: string
  fix: string
}

const UNREACHED: NeverAccepted = {
  why: 'Atrium cannot start without its own PostgreSQL, Redis and S3 answering to these settings: a deploy past this check replaces the running site with one that cannot serve',
  fix: 'correct the setting (or start the service) and run again',
}

/** The checks that never can be accepted, each with its reason. */
const NEVER: Record<string, NeverAccepted> = {
  'postgres.connect': UNREACHED,
  'redis.connect': UNREACHED,
  's3.roundtrip': UNREACHED,
  'postgres.privileges': {
    why: 'the migrations run with these rights: without them they fail after the switch, and the site with them',
    fix: "grant the rights the check names to DATABASE_URL's user (or use one that has them) and run again",
  },
  'postgres.pooling': {
    why: "behind such a pooler Atrium's tenant connections fail, or run outside row-level security, and the job runner loses its notifications",
    fix: 'point DATABASE_URL at PostgreSQL itself (or a pooler that keeps a session per connection with its startup parameters) and run again',
  },
  'region.stores': {
    why: 'the server refuses a REGION_STORES it cannot read, so the site would not start',
    fix: 'correct REGION_STORES and run again',
  },
  'services.loopback': {
    why: "inside Atrium's container, localhost and 127.0.0.1 are the container itself: the services would not be reached",
    fix: "name the services by an address Atrium's container reaches and run again",
  },
  'preflight.deadline': {
    why: "a group of checks that never answered may be exactly the site's own services' connectivity and credential checks",
    fix: 'find what on the network path holds the connection (the check names the group) and run again',
  },
}

/** Why the check of this id can never be accepted; null when it can. */
export function neverAccepted(id: string): NeverAccepted | null {
  const region = REGION_ID.exec(id)
  if (region?.[2] === 'roundtrip') return UNREACHED
  return NEVER[id] ?? null
}

/** Why these checks cannot be accepted: one line per reason, naming the ids it is said of. */
export function refusals(ids: readonly string[]): string[] {
  const byWhy = new Map<NeverAccepted, string[]>()
  for (const id of new Set(ids)) {
    const never = neverAccepted(id)
    if (never) byWhy.set(never, [...(byWhy.get(never) ?? []), id])
  }
  return [...byWhy].map(([never, named]) => `${named.join(', ')} cannot be accepted: ${never.why}; ${never.fix}.`)
}

/** The ids that can never be accepted, as the admin is told them. */
export const NEVER_ACCEPTED = [
  ...CHECK_IDS.filter((id) => neverAccepted(id)),
  'region.<code>.roundtrip',
] as readonly string[]

/** The ids that may be accepted, as the admin is told them. */
export const ACCEPTABLE = [
  ...CHECK_IDS.filter((id) => !neverAccepted(id)),
  'region.<code>.addressing',
] as readonly string[]

/** What is wrong with accepting this id; null when it may be. */
export function acceptProblem(id: string): string | null {
  if (!isCheckId(id)) return `not a check of the preflight (those that may be accepted: ${ACCEPTABLE.join(', ')})`
  const never = neverAccepted(id)
  return never ? `cannot be accepted: ${never.why}; ${never.fix}` : null
}

/** answers.yaml's acceptedChecks, read back: each entry {id, by, at}, every problem with where it is. */
export function parseAccepted(v: unknown): { value: AcceptedCheck[]; problems: string[] } {
  if (!Array.isArray(v)) return { value: [], problems: ['acceptedChecks: must be a list of {id, by, at}'] }
  const value: AcceptedCheck[] = []
  const problems: string[] = []
  v.forEach((e: unknown, i) => {
    const at = `acceptedChecks[${i}]`
    const entry = (typeof e === 'object' && e !== null ? e : {}) as Partial<Record<keyof AcceptedCheck, unknown>>
    const { id, by, at: when } = entry
    if (
      Object.keys(entry).sort().join() !== 'at,by,id' ||
      typeof id !== 'string' ||
      typeof by !== 'string' ||
      typeof when !== 'string'
    )
      return problems.push(`${at}: must be {id, by, at}: the check, who accepted it and when`)
    const problem = acceptProblem(id)
    if (problem) problems.push(`${at}.id ${id}: ${problem}`)
    else if (!by.trim()) problems.push(`${at}.by: must name who accepted ${id}`)
    else if (!/^\d{4}-\d{2}-\d{2}T/.test(when) || Number.isNaN(Date.parse(when)))
      problems.push(`${at}.at: must be the time ${id} was accepted, ISO 8601 (2026-01-31T09:30:00.000Z)`)
    else value.push({ id, by, at: when })
  })
  return { value, problems }
}

/** Who accepts: the admin behind sudo when there is one, else the OS user running the installer. */
export function acceptor(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SUDO_USER) return env.SUDO_USER
  try {
    return userInfo().username
  } catch {
    // A uid with no passwd entry (some containers): the variable, else the number.
    return env.USER || String(process.getuid?.() ?? 'unknown')
  }
}

/** The checks that stop a command: failed ones, and with --strict warnings too. */
export const stopping = (checks: readonly CheckResult[], strict: boolean): CheckResult[] =>
  checks.filter((c) => c.status === 'fail' || (strict && c.status === 'warn'))

/**
 * The stopping checks judged against the acceptances: `accepted` are the acceptances that let one
 * through (the report's), `open` the stopping checks no acceptance covers, which still stop it. A
 * never-acceptable check is never let through, whatever a hand-edited file says.
 */
export function judge(
  checks: readonly CheckResult[],
  acceptances: readonly AcceptedCheck[],
  strict: boolean,
): { accepted: AcceptedCheck[]; open: CheckResult[] } {
  const accepted: AcceptedCheck[] = []
  const open: CheckResult[] = []
  for (const c of stopping(checks, strict)) {
    const a = neverAccepted(c.id) ? undefined : acceptances.find((x) => x.id === c.id)
    if (!a) open.push(c)
    else if (!accepted.includes(a)) accepted.push(a)
  }
  return { accepted, open }
}

/**
 * The acceptances to record: those recorded before, then each new one (by whom, when). An id
 * recorded already keeps its first record: who first accepted it and when.
 */
export function withAccepted(recorded: readonly AcceptedCheck[], fresh: readonly AcceptedCheck[]): AcceptedCheck[] {
  const all = [...recorded]
  for (const a of fresh) if (!all.some((x) => x.id === a.id)) all.push(a)
  return all
}

/** New acceptances of these ids, made now by `by`. */
export const acceptances = (ids: readonly string[], by: string, at: Date = new Date()): AcceptedCheck[] =>
  [...new Set(ids)].map((id) => ({ id, by, at: at.toISOString() }))
