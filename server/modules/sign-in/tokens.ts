// JWT access tokens. Algorithm EdDSA (Ed25519) only; header typ "at+jwt" (RFC 9068) so no other
// JWT of ours (or an ID token from an identity provider) passes as an access token; issuer is the
// deployment's PUBLIC_URL; audience "atrium-api"; lifetime ACCESS_TOKEN_TTL_SECONDS (15 min by
// default). Claims: sub (user id), tid (tenant id), sid (identity session), role, jti, iat, exp.
//
// The signing key is derived from ENCRYPTION_MASTER_KEY (HKDF, purpose "jwt-signing:v1"), so every
// replica signs and verifies alike with nothing more to distribute. Its key id (kid) is the
// thumbprint of the public key: a token names the key that signed it, and a new master key (or
// purpose version) is a new kid that old tokens simply fail against.
import { createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto'
import { calculateJwkThumbprint, exportJWK, jwtVerify, SignJWT, type JWK } from 'jose'
import { ROLES, type Role } from '../../domain/permissions.js'
import type { Secrets } from '../../platform/secrets.js'

export const ACCESS_TOKEN_ALG = 'EdDSA'
export const ACCESS_TOKEN_TYP = 'at+jwt'
export const ACCESS_TOKEN_AUDIENCE = 'atrium-api'
const SIGNING_PURPOSE = 'jwt-signing:v1'
// PKCS#8 wrapping of a raw 32-byte Ed25519 seed (RFC 8410).
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

export interface AccessClaims {
  userId: string
  tenantId: string
  sessionId: string
  role: Role
  expiresAt: number
}

export interface TokenIssuer {
  readonly kid: string
  sign(c: {
    userId: string
    tenantId: string
    sessionId: string
    role: Role
  }): Promise<{ accessToken: string; expiresIn: number }>
  /** The claims of a valid access token; null for anything else (bad signature, expired, wrong audience...). */
  verify(token: string): Promise<AccessClaims | null>
  /** The public keys, as a JSON Web Key Set, for services that verify our tokens themselves. */
  jwks(): { keys: JWK[] }
}

export interface TokenIssuerOptions {
  secrets: Secrets
  issuer: string
  ttlSeconds: number
  /** Injected in tests to age tokens. */
  now?: () => number
}

const looksLikeJwt = (token: string) => token.startsWith('eyJ') && token.split('.').length === 3
export { looksLikeJwt }

/** The Ed25519 key pair every replica derives from the master key. */
export function accessTokenKeyPair(secrets: Secrets): { privateKey: KeyObject; publicKey: KeyObject } {
  const privateKey = createPrivateKey({
    key: Buffer.concat([ED25519_PKCS8_PREFIX, secrets.deriveKey(SIGNING_PURPOSE)]),
    format: 'der',
    type: 'pkcs8',
  })
  return { privateKey, publicKey: createPublicKey(privateKey) }
}

export async function createTokenIssuer(o: TokenIssuerOptions): Promise<TokenIssuer> {
  const now = o.now ?? Date.now
  const issuer = o.issuer.replace(/\/+$/, '')
  const { privateKey, publicKey } = accessTokenKeyPair(o.secrets)
  const jwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(jwk)
  const publicJwk: JWK = { ...jwk, kid, alg: ACCESS_TOKEN_ALG, use: 'sig' }

  return {
    kid,
    async sign(c) {
      const iat = Math.floor(now() / 1000)
      const accessToken = await new SignJWT({ tid: c.tenantId, sid: c.sessionId, role: c.role })
        .setProtectedHeader({ alg: ACCESS_TOKEN_ALG, typ: ACCESS_TOKEN_TYP, kid })
        .setIssuer(issuer)
        .setAudience(ACCESS_TOKEN_AUDIENCE)
        .setSubject(c.userId)
        .setJti(randomUUID())
        .setIssuedAt(iat)
        .setExpirationTime(iat + o.ttlSeconds)
        .sign(privateKey)
      return { accessToken, expiresIn: o.ttlSeconds }
    },
    async verify(token) {
      if (!looksLikeJwt(token)) return null
      try {
        const { payload } = await jwtVerify(
          token,
          async (header) => {
            if (header.kid !== kid) throw new Error('unknown key id')
            return publicKey
          },
          {
            algorithms: [ACCESS_TOKEN_ALG],
            typ: ACCESS_TOKEN_TYP,
            issuer,
            audience: ACCESS_TOKEN_AUDIENCE,
            requiredClaims: ['sub', 'tid', 'sid', 'role', 'jti', 'iat', 'exp'],
            currentDate: new Date(now()),
            clockTolerance: 0,
          },
        )
        const { sub, tid, sid, role, exp } = payload as Record<string, unknown>
        if (
          typeof sub !== 'string' ||
          typeof tid !== 'string' ||
          typeof sid !== 'string' ||
          !ROLES.includes(role as Role)
        )
          return null
        return { userId: sub, tenantId: tid, sessionId: sid, role: role as Role, expiresAt: Number(exp) * 1000 }
      } catch {
        return null
      }
    },
    jwks: () => ({ keys: [publicJwk] }),
  }
}
