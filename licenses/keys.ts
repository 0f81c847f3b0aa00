// The public keys Atrium trusts to have signed a license (Ed25519, as JWK). The vendor keeps the
// private keys offline; a new key is added here (with a new kid) before licenses are issued with
// it, and an old one stays until every license it signed has expired. See licenses/README.md.

export interface TrustedKey {
  kid: string
  publicKeyJwk: { kty: 'OKP'; crv: 'Ed25519'; x: string }
}

export const TRUSTED_KEYS: readonly TrustedKey[] = [
  { kid: 'atrium-2026-1', publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: '0pgMI5X-25TxrmL03ZWU54pRwd_Wz4A2zfFPycGsJ6g' } },
]
