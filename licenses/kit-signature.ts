// The air-gap kit's signature: its SHA256SUMS file signed by the vendor with the same Ed25519 keys as
// licenses (keys.ts), so a site that trusts a license trusts a kit the same way, offline.
// SHA256SUMS.sig holds a JWS in compact form with the payload detached (RFC 7515 appendix F):
// header "..." signature, the header naming alg EdDSA, typ "atrium-kit+jws" (no license or other
// JWS passes as one) and the key's kid. The payload is the SHA256SUMS file's bytes, unchanged, so
// `sha256sum -c SHA256SUMS` still checks the files with no tool of ours.
import { calculateJwkThumbprint, CompactSign, compactVerify, decodeProtectedHeader, type KeyObject } from 'jose'
import { TRUSTED_KEYS, type TrustedKey } from './keys.js'
import { LICENSE_ALG, trustedKey } from './license.js'

/** The licenses' algorithm: one key signs both. */
export const KIT_ALG = LICENSE_ALG
export const KIT_TYP = 'atrium-kit+jws'

/** The detached signature of `sums` (SHA256SUMS's text) made with the vendor's private key. */
export async function signSums(sums: string, privateKey: KeyObject, kid: string): Promise<string> {
  const jws = await new CompactSign(new TextEncoder().encode(sums))
    .setProtectedHeader({ alg: KIT_ALG, typ: KIT_TYP, kid })
    .sign(privateKey)
  const [header, , signature] = jws.split('.')
  return `${header}..${signature}`
}

/**
 * Whether `signature` is a trusted key's over exactly `sums`: the key's kid and JWK thumbprint, or what is wrong. Never
 * throws.
 */
export async function verifySums(
  sums: string,
  signature: string,
  keys: readonly TrustedKey[] = TRUSTED_KEYS,
): Promise<{ kid: string; fingerprint: string } | { problem: string }> {
  const parts = signature.trim().split('.')
  if (parts.length !== 3 || parts[1] !== '')
    return { problem: 'SHA256SUMS.sig is not a detached signature (header..signature)' }
  let header
  try {
    header = decodeProtectedHeader(signature.trim())
  } catch {
    return { problem: 'SHA256SUMS.sig is not a detached signature (header..signature)' }
  }
  if (header.typ !== KIT_TYP || header.alg !== KIT_ALG)
    return {
      problem: `SHA256SUMS.sig is not a kit signature (typ ${header.typ ?? 'none'}, alg ${header.alg ?? 'none'}; expected ${KIT_TYP}, ${KIT_ALG})`,
    }
  const trusted = await trustedKey(header.kid, keys)
  if (!trusted)
    return { problem: `SHA256SUMS is signed by a key this installer does not trust (kid ${header.kid ?? 'none'})` }
  const payload = Buffer.from(sums).toString('base64url')
  try {
    await compactVerify(`${parts[0]}.${payload}.${parts[2]}`, trusted.publicKey, { algorithms: [KIT_ALG] })
    return { kid: trusted.key.kid, fingerprint: await calculateJwkThumbprint(trusted.key.publicKeyJwk, 'sha256') }
  } catch {
    return { problem: 'SHA256SUMS does not match its signature: the kit was changed after the vendor signed it' }
  }
}
