// The public keys Atrium trusts to have signed a license (Ed25519, as JWK). Only public halves live
// here: the vendor keeps each private key offline, on the machine that runs licenses/issue.ts, so a
// copy of this repository (or of an installed site) can verify licenses but never make one.
// Rotation: a new key is added (new kid) before licenses are issued with it, and an old one stays
// until every license it signed is past its grace period. See licenses/README.md.

export interface TrustedKey {
  kid: string
  publicKeyJwk: { kty: 'OKP'; crv: 'Ed25519'; x: string }
}

export const TRUSTED_KEYS: readonly TrustedKey[] = [
  {
    kid: 'atrium-2026-1',
    publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: 'jGL7tbDKgu39FECOCfrf8FCKAz5jtaAQf4HLy75ySoA' },
  },
]
