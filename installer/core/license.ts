// The license as a preflight check: validated offline, before anything changes, with the
// vendor's message for each way it can be wrong.
import { MESSAGES, verifyLicense, type InvalidReason, type VerifyOptions } from '../../licenses/license.js'
import { check, type CheckResult, type CheckStatus } from './checks/check.js'
import { HOST_LIMITS } from './checks/host.js'

const STATUS: Record<string, CheckStatus> = { valid: 'pass', grace: 'warn', expired: 'fail', invalid: 'fail' }

/** "90 days", "3 hours" or "42 s": how far off a clock is, in the unit a person reads it in. */
const howFar = (ms: number) =>
  ms >= 172_800_000
    ? `${Math.round(ms / 86_400_000)} days`
    : ms >= 7_200_000
      ? `${Math.round(ms / 3_600_000)} hours`
      : `${Math.round(ms / 1000)} s`

/** The reference the clock check compared this machine's clock with. */
export interface ReferenceClock {
  /** This machine's clock minus the reference's (positive: ahead); null when no reference answered. */
  offsetMs: number | null
  /** The reference, for people: "the S3 endpoint". */
  source: string
}

/**
 * With `clock`, the license is judged by the time the clock check found (this machine's clock less
 * its offset), so a clock set back cannot make an expired license pass beside a failed clock check;
 * when no reference answered, it says the time it judged by could not be checked.
 */
export async function licenseCheck(
  key: string | undefined,
  opts: VerifyOptions = {},
  clock?: ReferenceClock,
): Promise<CheckResult> {
  const local = opts.now ?? new Date()
  const offset = clock?.offsetMs ?? 0
  const r = await verifyLicense(key, { ...opts, now: new Date(local.getTime() - offset) })
  const status = STATUS[r.status]!
  const timed = r.status !== 'invalid' || r.reason === 'not_yet_valid'
  const judgedBy =
    !clock || !timed
      ? ''
      : clock.offsetMs === null
        ? ` (by this machine's clock, which no reference clock answered to confirm)`
        : Math.abs(offset) > HOST_LIMITS.clock.warnMs
          ? ` (judged by ${clock.source}'s clock, which this machine's is ${howFar(Math.abs(offset))} ${offset > 0 ? 'ahead of' : 'behind'})`
          : ''
  const found = r.status === 'invalid' ? `${r.reason.replace(/_/g, ' ')}` : r.message
  return check(
    'license',
    'License',
    status,
    `${found}${judgedBy}`,
    `a valid license key signed by the vendor${opts.airGapped ? ' that allows air-gapped use' : ''}`,
    r.message,
  )
}

/** Invalid in a way pasting it again (or asking for the right file) fixes: it is not the license as issued. */
const NOT_AS_ISSUED: ReadonlySet<InvalidReason> = new Set([
  'malformed',
  'bad_signature',
  'wrong_type',
  'wrong_issuer',
  'wrong_audience',
  'bad_claims',
])

/** An Ed25519 signature is 64 bytes: 86 characters of base64url, as the token's last part. */
const wholeSignature = (token: string) => /^[\w-]{86}$/.test(token.replace(/\s+/g, '').split('.')[2] ?? '')

/**
 * Why a license key given at the prompt is not the license as issued (cut short, with extra
 * characters, altered, or another token), or null. The license's state (expired, signed with a key
 * this installer does not know, not allowing air-gapped use) is left to the checks, which judge it
 * with everything else and say what to do.
 */
export async function licenseAnswerProblem(key: string, opts: VerifyOptions = {}): Promise<string | null> {
  const r = await verifyLicense(key, opts)
  if (r.status !== 'invalid') return null
  // A signature of another length was cut (or added to): said as such, also when the key is one this installer does
  // not know, whose signature it cannot check.
  if ((r.reason === 'bad_signature' || r.reason === 'unknown_key') && !wholeSignature(key)) return MESSAGES.malformed()
  return NOT_AS_ISSUED.has(r.reason) ? r.message : null
}
