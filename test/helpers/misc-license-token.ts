// A license token made by hand (not by issueLicense): the license's header and claims, each of which a case may
// change or drop, for the refusals that issueLicense would never produce.
import { randomUUID, type KeyObject } from 'node:crypto'
import { SignJWT } from 'jose'
import { LICENSE_AUDIENCE, LICENSE_ISSUER, LICENSE_TYP } from '../../licenses/license.js'

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
