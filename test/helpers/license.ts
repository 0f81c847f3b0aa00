// License keys for tests: a key pair the test makes (the shipped key's private half exists nowhere),
// licenses signed with it, and the server or admin CLI run as a process that trusts it.
import { generateKeyPairSync, randomBytes, randomUUID, type KeyObject } from 'node:crypto'
import { existsSync } from 'node:fs'
import { SignJWT } from 'jose'
import type { Test } from 'tap'
import { issueLicense, type IssueInput } from '../../licenses/issue.js'
import type { TrustedKey } from '../../licenses/keys.js'
import { LICENSE_AUDIENCE, LICENSE_ISSUER, LICENSE_TYP } from '../../licenses/license.js'
import { finished, spawnScript, type Ran } from './cli.js'
import { tempDir } from './platform.js'

export const DAY = 86_400_000

export interface Vendor {
  kid: string
  privateKey: KeyObject
  keys: TrustedKey[]
}

export function testVendor(kid = 'test-1'): Vendor {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return {
    kid,
    privateKey,
    keys: [{ kid, publicKeyJwk: publicKey.export({ format: 'jwk' }) as TrustedKey['publicKeyJwk'] }],
  }
}

/** A license from the vendor; by default valid now for a year, enterprise, 25 tenants, air-gap allowed. */
export function testLicense(vendor: Vendor, over: Partial<IssueInput> = {}): Promise<string> {
  const now = Date.now()
  return issueLicense({
    privateKey: vendor.privateKey,
    kid: vendor.kid,
    customer: 'Acme',
    plan: 'enterprise',
    maxTenants: 25,
    features: [],
    airGapAllowed: true,
    issuedAt: new Date(now - DAY),
    expiresAt: new Date(now + 365 * DAY),
    ...over,
  })
}

/**
 * libfaketime preloaded into a process itself: the faketime command would fork and wait, so a signal sent to it would
 * not reach the server. The MT build, since Node runs threads.
 */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'
/** tap's skip option for a test that sets a process's clock back. */
export const needsFaketime = (): false | string =>
  !existsSync(LIBFAKETIME) && 'needs faketime (apt-get install faketime)'
/** A process's environment with its wall clock `days` behind; only the wall clock moves, as with `date -s`. */
export const clockSetBack = (days: number): Record<string, string> => ({
  LD_PRELOAD: LIBFAKETIME,
  FAKETIME: `-${days}d`,
  FAKETIME_DONT_FAKE_MONOTONIC: '1',
})

/** The server (`serve`) or an admin CLI command, as a process that trusts the vendor's key. */
export function spawnTrusting(vendor: Vendor, args: string[], env: Record<string, string>) {
  return spawnScript('test/helpers/trusting.ts', [JSON.stringify(vendor.keys), ...args], env)
}
export const adminTrusting = (vendor: Vendor, args: string[], env: Record<string, string>): Promise<Ran> =>
  finished(spawnTrusting(vendor, args, env))

/**
 * Settings that pass NODE_ENV=production's checks without any service behind them: enough for
 * whatever is decided before the server connects to anything (the license).
 */
export function productionEnv(t: Test, over: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    LOG_LEVEL: 'silent',
    DATA_DIR: tempDir(t),
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: 'postgres://atrium@127.0.0.1:1/none',
    REDIS_URL: 'redis://127.0.0.1:1',
    R2_ENDPOINT: 'http://127.0.0.1:1',
    R2_ACCESS_KEY_ID: 'none',
    R2_SECRET_ACCESS_KEY: 'none',
    ENCRYPTION_MASTER_KEY: randomBytes(32).toString('base64'),
    ...over,
  }
}

// A license token made by hand (not by issueLicense): the license's header and claims, each of which a case may
// change or drop, for the refusals that issueLicense would never produce.
export interface TokenParts {
  /** Signs the token: the vendor's private key, or an HMAC secret for the algorithm-confusion case. */
  key: KeyObject | Uint8Array
  issuedAt: Date
  expiresAt: Date
  /** Replace or (set to undefined) drop claims; a pro license for one tenant by default. */
  claims?: Record<string, unknown>
  /** Replace or drop header fields; `kid` is the caller's to give. */
  header?: Record<string, unknown>
}

const seconds = (d: Date) => d.getTime() / 1000

export function licenseToken(o: TokenParts): Promise<string> {
  return new SignJWT({
    iss: LICENSE_ISSUER,
    aud: LICENSE_AUDIENCE,
    sub: randomUUID(),
    customer: 'Acme',
    plan: 'pro',
    maxTenants: 1,
    features: [],
    airGapAllowed: false,
    iat: seconds(o.issuedAt),
    nbf: seconds(o.issuedAt),
    exp: seconds(o.expiresAt),
    ...o.claims,
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: LICENSE_TYP, ...o.header } as { alg: string })
    .sign(o.key)
}
