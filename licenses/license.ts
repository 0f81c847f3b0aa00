// The license key: a JWT signed by the vendor with Ed25519, verified offline by the server and the
// installer against the public keys in keys.ts. Algorithm EdDSA only; header typ
// "atrium-license+jwt" so no other JWT passes as a license; issuer "atrium-licensing"; audience
// "atrium-on-prem". An expired license keeps working for a grace period (30 days by default).
import { decodeJwt, decodeProtectedHeader, errors, importJWK, jwtVerify, type JWK, type JWTPayload } from 'jose'
import { TRUSTED_KEYS, type TrustedKey } from './keys.js'

export const LICENSE_ALG = 'EdDSA'
export const LICENSE_TYP = 'atrium-license+jwt'
export const LICENSE_ISSUER = 'atrium-licensing'
export const LICENSE_AUDIENCE = 'atrium-on-prem'
export const DEFAULT_GRACE_DAYS = 30
/** Clocks of air-gapped sites drift; a minute either way is not a reason to refuse a license. */
export const CLOCK_TOLERANCE_SECONDS = 60
export const PLANS = ['free', 'pro', 'growth', 'enterprise'] as const
export type Plan = (typeof PLANS)[number]

export interface LicenseClaims {
  id: string
  customer: string
  plan: Plan
  maxTenants: number
  features: string[]
  airGapAllowed: boolean
  issuedAt: Date
  expiresAt: Date
  graceEndsAt: Date
}

export type InvalidReason =
  | 'missing' | 'malformed' | 'bad_signature' | 'unknown_key' | 'wrong_issuer' | 'wrong_audience'
  | 'wrong_type' | 'not_yet_valid' | 'bad_claims' | 'air_gap_not_allowed'

export type LicenseResult =
  | { status: 'valid'; license: LicenseClaims; message: string }
  | { status: 'grace'; license: LicenseClaims; daysLeft: number; message: string }
  | { status: 'expired'; license: LicenseClaims; message: string }
  | { status: 'invalid'; reason: InvalidReason; message: string; license?: LicenseClaims }

export interface VerifyOptions {
  now?: Date
  keys?: readonly TrustedKey[]
  /** The site runs air-gapped: the license must allow it. */
  airGapped?: boolean
  graceDays?: number
}

const DAY = 86_400_000
const CONTACT = 'contact your Atrium vendor'

const MESSAGES: Record<InvalidReason, string> = {
  missing: `No license key is set (LICENSE_KEY): ${CONTACT} for one`,
  malformed: 'The license key is not a license (it is cut short, has extra characters or is something else): paste it again exactly as received',
  bad_signature: `The license key's signature does not match: it was altered or not issued by the vendor; ${CONTACT}`,
  unknown_key: `The license key was signed with a key this version does not know: upgrade Atrium or ${CONTACT}`,
  wrong_issuer: `The license key was not issued by Atrium licensing; ${CONTACT}`,
  wrong_audience: `The license key is not for Atrium on-premise; ${CONTACT}`,
  wrong_type: `The token is not an Atrium license key; ${CONTACT}`,
  not_yet_valid: 'The license key is not valid yet: check this machine\'s clock, or wait until its start date',
  bad_claims: `The license key has content this version cannot read; ${CONTACT}`,
  air_gap_not_allowed: `This license does not allow air-gapped installations; ${CONTACT} for one that does`,
}

const invalid = (reason: InvalidReason, license?: LicenseClaims): LicenseResult => ({ status: 'invalid', reason, message: MESSAGES[reason], ...(license ? { license } : {}) })

/** Strict reading of the claims: a license of a newer format is refused, never half-understood. */
function claimsOf(p: JWTPayload, graceDays: number): LicenseClaims | null {
  const c = p as Record<string, unknown>
  const ok = typeof p.sub === 'string' && p.sub.length > 0
    && typeof c.customer === 'string' && c.customer.trim().length > 0
    && typeof c.plan === 'string' && (PLANS as readonly string[]).includes(c.plan)
    && Number.isInteger(c.maxTenants) && (c.maxTenants as number) >= 1
    && Array.isArray(c.features) && c.features.every((f) => typeof f === 'string')
    && typeof c.airGapAllowed === 'boolean'
    && typeof p.iat === 'number' && typeof p.exp === 'number' && p.exp > p.iat
  if (!ok) return null
  const expiresAt = new Date(p.exp! * 1000)
  return {
    id: p.sub!, customer: c.customer as string, plan: c.plan as Plan, maxTenants: c.maxTenants as number,
    features: c.features as string[], airGapAllowed: c.airGapAllowed as boolean,
    issuedAt: new Date(p.iat! * 1000), expiresAt, graceEndsAt: new Date(expiresAt.getTime() + graceDays * DAY),
  }
}

/** Checks a license key offline. Never throws: every way it can be wrong is a result with a message. */
export async function verifyLicense(key: string | undefined, opts: VerifyOptions = {}): Promise<LicenseResult> {
  const token = key?.trim() ?? ''
  if (!token) return invalid('missing')
  const now = opts.now ?? new Date()
  const graceDays = opts.graceDays ?? DEFAULT_GRACE_DAYS
  const keys = opts.keys ?? TRUSTED_KEYS
  let header, unverifiedExp
  try {
    header = decodeProtectedHeader(token)
    unverifiedExp = decodeJwt(token).exp
  } catch {
    return invalid('malformed')
  }
  if (header.typ !== LICENSE_TYP) return invalid('wrong_type')
  if (header.alg !== LICENSE_ALG) return invalid('bad_signature')
  const trusted = keys.find((k) => k.kid === header.kid)
  if (!trusted) return invalid('unknown_key')
  let payload: JWTPayload
  try {
    const publicKey = await importJWK(trusted.publicKeyJwk as JWK, LICENSE_ALG)
    // Expiry is judged below, with its grace period; so jose checks everything else as of a
    // moment no later than the expiry (the expiry itself is only trusted once the signature is).
    const asOf = typeof unverifiedExp === 'number' ? Math.min(now.getTime(), unverifiedExp * 1000) : now.getTime()
    ;({ payload } = await jwtVerify(token, publicKey, {
      algorithms: [LICENSE_ALG], typ: LICENSE_TYP, issuer: LICENSE_ISSUER, audience: LICENSE_AUDIENCE,
      currentDate: new Date(asOf), clockTolerance: CLOCK_TOLERANCE_SECONDS, requiredClaims: ['sub', 'iat', 'nbf', 'exp'],
    }))
  } catch (err) {
    if (err instanceof errors.JWSSignatureVerificationFailed) return invalid('bad_signature')
    if (err instanceof errors.JWTClaimValidationFailed) {
      if (err.claim === 'iss') return invalid('wrong_issuer')
      if (err.claim === 'aud') return invalid('wrong_audience')
      if (err.claim === 'nbf' && err.reason === 'check_failed') return invalid('not_yet_valid')
      if (err.claim === 'typ') return invalid('wrong_type')
      return invalid('bad_claims')
    }
    if (err instanceof errors.JWTInvalid) return invalid('bad_claims')
    return invalid('malformed')
  }
  const license = claimsOf(payload, graceDays)
  if (!license) return invalid('bad_claims')
  if (opts.airGapped && !license.airGapAllowed) return invalid('air_gap_not_allowed', license)
  const t = now.getTime()
  if (t <= license.expiresAt.getTime() + CLOCK_TOLERANCE_SECONDS * 1000) {
    return { status: 'valid', license, message: `Licensed to ${license.customer} (${license.plan}, up to ${license.maxTenants} tenants) until ${day(license.expiresAt)}` }
  }
  if (t <= license.graceEndsAt.getTime()) {
    const daysLeft = Math.ceil((license.graceEndsAt.getTime() - t) / DAY)
    return { status: 'grace', license, daysLeft, message: `The license of ${license.customer} expired on ${day(license.expiresAt)}; Atrium keeps working for ${daysLeft} more day(s): ${CONTACT} to renew` }
  }
  return { status: 'expired', license, message: `The license of ${license.customer} expired on ${day(license.expiresAt)} and its grace period ended on ${day(license.graceEndsAt)}: ${CONTACT} to renew` }
}

const day = (d: Date) => d.toISOString().slice(0, 10)

/** One line for logs and screens; never any key material. */
export function licenseSummary(r: LicenseResult): string {
  return `license ${r.status}${r.status === 'invalid' ? ` (${r.reason})` : ''}: ${r.message}`
}
