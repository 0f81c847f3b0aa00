// The license key: a JWT signed by the vendor with Ed25519, verified offline by the server and the
// installer against the public keys in keys.ts. Algorithm EdDSA only; header typ
// "atrium-license+jwt" so no other JWT passes as a license; issuer "atrium-licensing"; audience
// "atrium-on-prem". An expired license keeps working for a grace period (30 days by default), so a
// renewal that arrives a little late never stops a site. Format and key rotation: README.md here.
import { decodeJwt, decodeProtectedHeader, errors, importJWK, jwtVerify, type JWTPayload } from 'jose'
import { isUuid } from '../common/ids.js'
import { isPlan, type Plan } from '../common/plans.js'
import { TRUSTED_KEYS, type TrustedKey } from './keys.js'

export const LICENSE_ALG = 'EdDSA'
export const LICENSE_TYP = 'atrium-license+jwt'
export const LICENSE_ISSUER = 'atrium-licensing'
export const LICENSE_AUDIENCE = 'atrium-on-prem'
export const DEFAULT_GRACE_DAYS = 30
/**
 * Clocks of air-gapped sites drift: a license that starts a minute "in the future" is accepted. It
 * applies to the start only; the end already has the grace period, which absorbs any drift.
 */
export const CLOCK_TOLERANCE_SECONDS = 60

export interface LicenseClaims {
  /** The license id (sub), a UUID. */
  id: string
  customer: string
  plan: Plan
  maxTenants: number
  features: string[]
  airGapAllowed: boolean
  issuedAt: Date
  notBefore: Date
  /** Valid before this moment; in grace from it. */
  expiresAt: Date
  /** Expired from this moment: expiresAt plus the grace days. */
  graceEndsAt: Date
}

export type InvalidReason =
  | 'missing'
  | 'malformed'
  | 'bad_signature'
  | 'unknown_key'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'wrong_type'
  | 'not_yet_valid'
  | 'bad_claims'
  | 'air_gap_not_allowed'

export type LicenseResult =
  | { status: 'valid'; license: LicenseClaims; message: string }
  | { status: 'grace'; license: LicenseClaims; daysLeft: number; message: string }
  | { status: 'expired'; license: LicenseClaims; message: string }
  /** license is there when the signature was good and the claims readable. */
  | { status: 'invalid'; reason: InvalidReason; message: string; license?: LicenseClaims }

export interface VerifyOptions {
  /** The moment to judge at (tests); the current time otherwise, also when not a valid date. */
  now?: Date
  /** The keys to trust (tests); the shipped TRUSTED_KEYS otherwise. */
  keys?: readonly TrustedKey[]
  /** The site runs air-gapped: the license must allow it. */
  airGapped?: boolean
  /** Days an expired license keeps working; negative or NaN means none. */
  graceDays?: number
}

const DAY = 86_400_000
const CONTACT = 'contact your Atrium vendor'
const day = (d: Date) => d.toISOString().slice(0, 10)

/** What each way of being invalid means, with what to do (the installer's prompt says them too). */
export const MESSAGES: Record<InvalidReason, (l?: LicenseClaims) => string> = {
  missing: () => `No license key is set (LICENSE_KEY): ${CONTACT} for one`,
  malformed: () =>
    'The license key is not a license (it is cut short, has extra characters or is something else): paste it again exactly as received',
  bad_signature: () =>
    `The license key's signature does not match: it was altered or not issued by the vendor; ${CONTACT}`,
  unknown_key: () => `The license key was signed with a key this version does not know: upgrade Atrium or ${CONTACT}`,
  wrong_issuer: () => `The license key was not issued by Atrium licensing; ${CONTACT}`,
  wrong_audience: () => `The license key is not for Atrium on-premise; ${CONTACT}`,
  wrong_type: () => `The token is not an Atrium license key; ${CONTACT}`,
  not_yet_valid: (l) =>
    `The license key is not valid until ${l ? day(l.notBefore) : 'its start date'}: check this machine's clock, or wait until then`,
  bad_claims: () => `The license key has content this version cannot read; ${CONTACT}`,
  air_gap_not_allowed: () => `This license does not allow air-gapped installations; ${CONTACT} for one that does`,
}

/**
 * What a verified license's state means, in words: shared by verifyLicense (the installer's
 * screens) and the running server (platform/license.ts), which adds what read-only means there.
 */
export const STATE_MESSAGES = {
  valid: (l: LicenseClaims) =>
    `Licensed to ${l.customer} (${l.plan}, up to ${l.maxTenants} tenants) until ${day(l.expiresAt)}`,
  grace: (l: LicenseClaims, daysLeft: number) =>
    `The license of ${l.customer} expired on ${day(l.expiresAt)}; Atrium keeps working for ${daysLeft} more day(s): ${CONTACT} to renew`,
  /** The expired state's facts, without what follows from them. */
  ended: (l: LicenseClaims) =>
    `The license of ${l.customer} expired on ${day(l.expiresAt)} and its grace period ended on ${day(l.graceEndsAt)}`,
}

const invalid = (reason: InvalidReason, license?: LicenseClaims | null): LicenseResult => ({
  status: 'invalid',
  reason,
  message: MESSAGES[reason](license ?? undefined),
  ...(license ? { license } : {}),
})

/** A NumericDate claim as a Date; null unless a whole number of seconds that a Date can hold. */
const dateOf = (seconds: unknown, plusMs = 0): Date | null => {
  const d = new Date((seconds as number) * 1000 + plusMs)
  return Number.isSafeInteger(seconds) && !Number.isNaN(d.getTime()) ? d : null
}

/** Strict reading of the claims: wrong types or values are refused, never half-understood. */
function claimsOf(p: JWTPayload, graceDays: number): LicenseClaims | null {
  const c = p as Record<string, unknown>
  const issuedAt = dateOf(p.iat),
    notBefore = dateOf(p.nbf),
    expiresAt = dateOf(p.exp),
    graceEndsAt = dateOf(p.exp, graceDays * DAY)
  const ok =
    typeof p.sub === 'string' &&
    isUuid(p.sub) &&
    typeof c.customer === 'string' &&
    c.customer.trim().length > 0 &&
    typeof c.plan === 'string' &&
    isPlan(c.plan) &&
    Number.isSafeInteger(c.maxTenants) &&
    (c.maxTenants as number) >= 1 &&
    Array.isArray(c.features) &&
    c.features.every((f) => typeof f === 'string' && f.length > 0) &&
    typeof c.airGapAllowed === 'boolean' &&
    issuedAt &&
    notBefore &&
    expiresAt &&
    graceEndsAt &&
    expiresAt > issuedAt &&
    expiresAt > notBefore
  if (!ok) return null
  return {
    id: p.sub!,
    customer: c.customer as string,
    plan: c.plan as Plan,
    maxTenants: c.maxTenants as number,
    features: c.features as string[],
    airGapAllowed: c.airGapAllowed as boolean,
    issuedAt: issuedAt!,
    notBefore: notBefore!,
    expiresAt: expiresAt!,
    graceEndsAt: graceEndsAt!,
  }
}

/**
 * The trusted key a signature names by its kid, ready to verify with (EdDSA, the only algorithm licenses and kits use);
 * null for another.
 */
export async function trustedKey(
  kid: string | undefined,
  keys: readonly TrustedKey[] = TRUSTED_KEYS,
): Promise<{ key: TrustedKey; publicKey: CryptoKey | Uint8Array } | null> {
  const key = keys.find((k) => k.kid === kid)
  const publicKey = key && (await importJWK(key.publicKeyJwk, LICENSE_ALG).catch(() => null))
  return key && publicKey ? { key, publicKey } : null
}

/** Why jose refused a token whose header named a trusted key. */
function reasonOf(err: unknown): InvalidReason {
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'bad_signature'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return 'wrong_issuer'
    if (err.claim === 'aud') return 'wrong_audience'
    if (err.claim === 'nbf' && err.reason === 'check_failed') return 'not_yet_valid'
    return 'bad_claims'
  }
  return 'malformed'
}

/** Checks a license key offline. Never throws: every way it can be wrong is a result with a message. */
export async function verifyLicense(key: string | undefined, opts: VerifyOptions = {}): Promise<LicenseResult> {
  // A JWT has no whitespace: what there is came from pasting (a trailing newline, a wrapped line).
  const token = key?.replace(/\s+/g, '') ?? ''
  if (!token) return invalid('missing')
  const now = opts.now && !Number.isNaN(opts.now.getTime()) ? opts.now : new Date()
  const grace = opts.graceDays ?? DEFAULT_GRACE_DAYS
  const graceDays = grace > 0 ? grace : 0
  let header, unverifiedExp
  try {
    header = decodeProtectedHeader(token)
    unverifiedExp = decodeJwt(token).exp
  } catch {
    return invalid('malformed')
  }
  // Judged on the header before the signature so that another JWT pasted by mistake (an access
  // token, an ID token) is named as such rather than as signed by an unknown key.
  if (header.typ !== LICENSE_TYP) return invalid('wrong_type')
  if (header.alg !== LICENSE_ALG) return invalid('bad_signature')
  const publicKey = (await trustedKey(header.kid, opts.keys))?.publicKey
  if (!publicKey) return invalid('unknown_key')
  let payload: JWTPayload
  try {
    // jose refuses an expired token outright, but an expired license still has its grace: so jose
    // judges everything else as of a moment before the expiry, and the expiry is judged below,
    // once the signature has made exp trustworthy.
    const asOf = typeof unverifiedExp === 'number' ? Math.min(now.getTime(), (unverifiedExp - 1) * 1000) : now.getTime()
    ;({ payload } = await jwtVerify(token, publicKey, {
      algorithms: [LICENSE_ALG],
      typ: LICENSE_TYP,
      issuer: LICENSE_ISSUER,
      audience: LICENSE_AUDIENCE,
      requiredClaims: ['sub', 'iat', 'nbf', 'exp'],
      currentDate: new Date(asOf),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    }))
  } catch (err) {
    // Claims are validated only after the signature, so their payload is the vendor's.
    return invalid(
      reasonOf(err),
      err instanceof errors.JWTClaimValidationFailed ? claimsOf(err.payload, graceDays) : null,
    )
  }
  const license = claimsOf(payload, graceDays)
  if (!license) return invalid('bad_claims')
  if (opts.airGapped && !license.airGapAllowed) return invalid('air_gap_not_allowed', license)
  const state = licenseState(license, now.getTime())
  if (state.status === 'valid') return { status: 'valid', license, message: STATE_MESSAGES.valid(license) }
  if (state.status === 'grace')
    return {
      status: 'grace',
      license,
      daysLeft: state.daysLeft,
      message: STATE_MESSAGES.grace(license, state.daysLeft),
    }
  return { status: 'expired', license, message: `${STATE_MESSAGES.ended(license)}: ${CONTACT} to renew` }
}

/** Where verified claims stand at time `t` (ms): valid until expiry, then grace, then expired. */
export function licenseState(
  l: Pick<LicenseClaims, 'expiresAt' | 'graceEndsAt'>,
  t: number,
): { status: 'valid' | 'expired' } | { status: 'grace'; daysLeft: number } {
  if (t < l.expiresAt.getTime()) return { status: 'valid' }
  if (t < l.graceEndsAt.getTime()) return { status: 'grace', daysLeft: Math.ceil((l.graceEndsAt.getTime() - t) / DAY) }
  return { status: 'expired' }
}

/** One line for logs and screens: the status, the reason when invalid, and the message; never any key material. */
export function licenseSummary(r: LicenseResult): string {
  return `license ${r.status}${r.status === 'invalid' ? ` (${r.reason})` : ''}: ${r.message}`
}
