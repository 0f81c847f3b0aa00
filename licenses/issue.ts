#!/usr/bin/env node
// The vendor's license tool. Run where the private key lives (never on a customer's site):
//
//   tsx licenses/issue.ts --generate-key-pair DIR
//   tsx licenses/issue.ts --private-key private.pem --kid atrium-2026-1 --customer "Acme" --plan enterprise \
//       --max-tenants 50 --features sso,byos --air-gap-allowed --expires 2027-12-31
//
// prints the license key on stdout. See licenses/README.md.
import { randomUUID, createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { SignJWT } from 'jose'
import { LICENSE_ALG, LICENSE_AUDIENCE, LICENSE_ISSUER, LICENSE_TYP, PLANS, type LicenseClaims, type Plan } from './license.js'

/** What a license says (its id is made here, its grace is the verifier's), and who signs it. */
export type IssueInput = Omit<LicenseClaims, 'id' | 'graceEndsAt'> & { privateKey: KeyObject; kid: string }

export function issueLicense(i: IssueInput): Promise<string> {
  return new SignJWT({ customer: i.customer, plan: i.plan, maxTenants: i.maxTenants, features: i.features, airGapAllowed: i.airGapAllowed })
    .setProtectedHeader({ alg: LICENSE_ALG, typ: LICENSE_TYP, kid: i.kid })
    .setIssuer(LICENSE_ISSUER)
    .setAudience(LICENSE_AUDIENCE)
    .setSubject(randomUUID())
    .setIssuedAt(Math.floor(i.issuedAt.getTime() / 1000))
    .setNotBefore(Math.floor(i.issuedAt.getTime() / 1000))
    .setExpirationTime(Math.floor(i.expiresAt.getTime() / 1000))
    .sign(i.privateKey)
}

/** A new Ed25519 key pair: private.pem (0600, keep it offline) and public.jwk.json (for keys.ts). */
export function generateKeyPair(dir: string): { privatePath: string; publicPath: string } {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const privatePath = join(dir, 'private.pem')
  const publicPath = join(dir, 'public.jwk.json')
  writeFileSync(privatePath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' })
  writeFileSync(publicPath, JSON.stringify(publicKey.export({ format: 'jwk' })) + '\n')
  return { privatePath, publicPath }
}

class UsageError extends Error {}

function readPrivateKey(path: string): KeyObject {
  const text = readFileSync(path, 'utf8')
  const key = text.trim().startsWith('{') ? createPrivateKey({ key: JSON.parse(text), format: 'jwk' }) : createPrivateKey(text)
  if (key.asymmetricKeyType !== 'ed25519') throw new UsageError(`${path} is not an Ed25519 private key`)
  return key
}

function date(flag: string, value: string): Date {
  const d = new Date(`${value}T00:00:00Z`)
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(d.getTime())) throw new UsageError(`${flag} must be a date as YYYY-MM-DD (got "${value}")`)
  return d
}

export async function cli(argv: string[]): Promise<string> {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      'generate-key-pair': { type: 'string' }, 'private-key': { type: 'string' }, kid: { type: 'string' },
      customer: { type: 'string' }, plan: { type: 'string' }, 'max-tenants': { type: 'string' }, features: { type: 'string' },
      'air-gap-allowed': { type: 'boolean' }, expires: { type: 'string' }, issued: { type: 'string' },
    },
  })
  if (v['generate-key-pair']) {
    const r = generateKeyPair(v['generate-key-pair'])
    return `wrote ${r.privatePath} (keep it offline) and ${r.publicPath} (add it to licenses/keys.ts with a new kid)`
  }
  const missing = ['private-key', 'kid', 'customer', 'plan', 'max-tenants', 'expires'].filter((f) => !v[f as keyof typeof v])
  if (missing.length) throw new UsageError(`missing ${missing.map((f) => `--${f}`).join(', ')}`)
  if (!(PLANS as readonly string[]).includes(v.plan!)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`)
  const maxTenants = Number(v['max-tenants'])
  if (!Number.isInteger(maxTenants) || maxTenants < 1) throw new UsageError('--max-tenants must be a whole number of at least 1')
  const issuedAt = v.issued ? date('--issued', v.issued) : new Date()
  const expiresAt = date('--expires', v.expires!)
  if (expiresAt <= issuedAt) throw new UsageError('--expires must be after the issue date')
  return issueLicense({
    privateKey: readPrivateKey(v['private-key']!), kid: v.kid!, customer: v.customer!.trim(), plan: v.plan as Plan, maxTenants,
    features: (v.features ?? '').split(',').map((f) => f.trim()).filter(Boolean), airGapAllowed: Boolean(v['air-gap-allowed']), issuedAt, expiresAt,
  })
}

if (process.argv[1]?.endsWith('licenses/issue.ts')) {
  cli(process.argv.slice(2)).then(
    (out) => process.stdout.write(out + '\n'),
    (err: Error) => {
      process.stderr.write(`${err.message}\n`)
      process.exitCode = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1
    },
  )
}
