// The license, enforced. LICENSE_KEY is verified once, at start, offline (licenses/license.ts); from
// then on the server judges the verified claims against its clock, so a long-running server moves to
// grace and then to read-only by itself, with two timestamp comparisons per request and no
// cryptography. Rules and why: docs/operations.md, "License".
import type { Logger } from 'pino'
import type { Config } from '../../config/schema.js'
import {
  STATE_MESSAGES,
  licenseState,
  licenseSummary,
  verifyLicense,
  type InvalidReason,
  type LicenseClaims,
} from '../../licenses/license.js'
import type { TrustedKey } from '../../licenses/keys.js'

export interface LicenseOptions {
  /**
   * The keys to trust; the shipped TRUSTED_KEYS otherwise. Only code can pass them (tests do): no
   * setting can, or anyone could trust a key of their own making.
   */
  keys?: readonly TrustedKey[]
  /** The clock, in ms; tests move it forward. */
  now?: () => number
}

const DAY = 86_400_000
/** How often a server in grace or read-only says so again in its log. */
export const REMINDER_INTERVAL_MS = DAY

export type LicenseDecision =
  /** Production without a usable license: the server does not start. */
  | { kind: 'refused'; reason: InvalidReason; summary: string }
  | { kind: 'licensed'; claims: LicenseClaims }
  /** Development or test without a usable license; problem is set when a key was set but unusable. */
  | { kind: 'unlicensed'; problem?: string }

type Settings = Pick<Config, 'NODE_ENV' | 'LICENSE_KEY' | 'AIR_GAPPED'>
export const isProduction = (config: Settings) => config.NODE_ENV === 'production'

/**
 * What LICENSE_KEY means for this server, without side effects. Production refuses a missing or
 * invalid key; development and test run unlicensed instead, so that `npm start` works with no setup
 * and a mistyped key never blocks a developer. An expired license is licensed: it is judged per
 * request (read-only in production), never refused, so that an upgrade or a security fix can always
 * be started.
 */
export async function decideLicense(config: Settings, opts: LicenseOptions = {}): Promise<LicenseDecision> {
  const key = config.LICENSE_KEY.trim()
  const production = isProduction(config)
  if (!key && !production) return { kind: 'unlicensed' }
  const r = await verifyLicense(key, {
    keys: opts.keys,
    airGapped: config.AIR_GAPPED,
    now: new Date((opts.now ?? Date.now)()),
  })
  if (r.status !== 'invalid') return { kind: 'licensed', claims: r.license }
  return production
    ? { kind: 'refused', reason: r.reason, summary: licenseSummary(r) }
    : { kind: 'unlicensed', problem: licenseSummary(r) }
}

export type LicenseStatus = 'valid' | 'grace' | 'expired' | 'unlicensed'

export interface LicenseView {
  status: LicenseStatus
  customer?: string
  plan?: string
  expiresAt?: string
  maxTenants?: number
  daysLeft?: number
  /** Mutating API requests are refused (production, expired). */
  readOnly: boolean
}

export interface License {
  /** null: unlicensed development. */
  readonly claims: LicenseClaims | null
  /** Production: an expired license makes the API read-only. Development only says so. */
  readonly enforced: boolean
  /** Most tenants there may be; null: no limit (unlicensed development). */
  readonly maxTenants: number | null
  /** Where the license stands now: timestamp comparisons only, cheap enough for every request. */
  status(): { status: LicenseStatus; daysLeft?: number }
  readOnly(): boolean
  view(): LicenseView
  /** The one line that says why the API is read-only, or what grace is left. */
  message(): string
  close(): void
}

/** The license as judged at each moment from its verified claims (licenseState: the bounds verifyLicense uses). */
export function createLicense(claims: LicenseClaims | null, opts: { enforced: boolean; now?: () => number }): License {
  const now = opts.now ?? Date.now
  const status = (): { status: LicenseStatus; daysLeft?: number } =>
    claims ? licenseState(claims, now()) : { status: 'unlicensed' }
  const readOnly = () => opts.enforced && status().status === 'expired'
  return {
    claims,
    enforced: opts.enforced,
    maxTenants: claims?.maxTenants ?? null,
    status,
    readOnly,
    view() {
      const s = status()
      if (!claims) return { status: s.status, readOnly: false }
      return {
        status: s.status,
        customer: claims.customer,
        plan: claims.plan,
        expiresAt: claims.expiresAt.toISOString(),
        maxTenants: claims.maxTenants,
        ...(s.daysLeft === undefined ? {} : { daysLeft: s.daysLeft }),
        readOnly: readOnly(),
      }
    },
    message() {
      const s = status()
      if (!claims) return 'Unlicensed (development): set LICENSE_KEY; production refuses to start without one'
      if (s.status === 'valid') return STATE_MESSAGES.valid(claims)
      if (s.status === 'grace') return STATE_MESSAGES.grace(claims, s.daysLeft!)
      const ended = STATE_MESSAGES.ended(claims)
      return opts.enforced
        ? `${ended}: Atrium is read-only until the license is renewed; contact your Atrium vendor to renew, then set the new LICENSE_KEY and restart`
        : `${ended}: production would be read-only; contact your Atrium vendor to renew`
    },
    close() {},
  }
}

/** Production without a usable license; main.ts and the CLI turn it into one line on stderr and exit 78. */
export class LicenseRefused extends Error {
  override readonly name = 'LicenseRefused'
  constructor(readonly summary: string) {
    super(summary)
  }
}

/** The license a decision that did not refuse gives, judged on the configured environment's rules. */
export const licenseOf = (
  decision: Exclude<LicenseDecision, { kind: 'refused' }>,
  config: Settings,
  now?: () => number,
): License =>
  createLicense(decision.kind === 'licensed' ? decision.claims : null, {
    enforced: isProduction(config),
    ...(now ? { now } : {}),
  })

/**
 * The license of a starting server: decided, logged, and reminded daily while in grace or expired.
 * Throws LicenseRefused before anything else is opened.
 */
export async function openLicense(config: Settings, log: Logger, opts: LicenseOptions = {}): Promise<License> {
  const decision = await decideLicense(config, opts)
  if (decision.kind === 'refused') throw new LicenseRefused(decision.summary)
  return startLicense(decision, config, log, opts.now)
}

/**
 * A decided license put to work on `now` (the platform passes its trusted time): its state logged
 * at once, and again every day while in grace or expired.
 */
export function startLicense(
  decision: Exclude<LicenseDecision, { kind: 'refused' }>,
  config: Settings,
  log: Logger,
  now?: () => number,
): License {
  const license = licenseOf(decision, config, now)
  if (decision.kind === 'unlicensed') {
    if (decision.problem)
      log.error(
        { license: license.view() },
        `${decision.problem}; running unlicensed (development): production refuses to start with this key`,
      )
    else
      log.warn(
        { license: license.view() },
        'running unlicensed (development): no LICENSE_KEY is set; production refuses to start without one',
      )
    return license
  }
  const say = (atStart: boolean) => {
    const s = license.status().status
    const level = s === 'grace' ? 'warn' : s === 'expired' ? 'error' : atStart ? 'info' : null
    if (level) log[level]({ license: license.view() }, license.message())
  }
  say(true)
  // A server that runs for months must keep saying so; the timer never holds the process open.
  const timer = setInterval(() => say(false), REMINDER_INTERVAL_MS)
  timer.unref()
  return { ...license, close: () => clearInterval(timer) }
}
