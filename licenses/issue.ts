#!/usr/bin/env node
// The vendor's license tool. Run where the private key lives (never on a customer's site); it
// prints the license key on stdout and nothing else there, so it can be piped. See README.md here.
import { createPrivateKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { SignJWT } from 'jose'
import { isPlan, PLANS, type Plan } from '../common/plans.js'
import { LICENSE_ALG, LICENSE_AUDIENCE, LICENSE_ISSUER, LICENSE_TYP, type LicenseClaims } from './license.js'

export const USAGE = `usage:
  tsx licenses/issue.ts --private-key FILE --kid KID --customer NAME --plan ${PLANS.join('|')}
      --max-tenants N --expires YYYY-MM-DD [--features a,b] [--air-gap-allowed] [--issued YYYY-MM-DD]
  tsx licenses/issue.ts --generate-key-pair DIR
FILE is the Ed25519 private key as PKCS#8 PEM or as JWK JSON. A license is valid from --issued
(today by default) until the start of --expires (UTC), then in grace.`

/** What a license says (its id is made here, its grace is the verifier's), and who signs it. */
export type IssueInput = Omit<LicenseClaims, 'id' | 'notBefore' | 'graceEndsAt'> & {
  privateKey: KeyObject
  kid: string
}

export function issueLicense(i: IssueInput): Promise<string> {
  const iat = Math.floor(i.issuedAt.getTime() / 1000)
  return new SignJWT({
    customer: i.customer,
    plan: i.plan,
    maxTenants: i.maxTenants,
    features: i.features,
    airGapAllowed: i.airGapAllowed,
  })
    .setProtectedHeader({ alg: LICENSE_ALG, typ: LICENSE_TYP, kid: i.kid })
    .setIssuer(LICENSE_ISSUER)
    .setAudience(LICENSE_AUDIENCE)
    .setSubject(randomUUID())
    .setIssuedAt(iat)
    .setNotBefore(iat)
    .setExpirationTime(Math.floor(i.expiresAt.getTime() / 1000))
    .sign(i.privateKey)
}

/** A new Ed25519 key pair: private.pem (0600, keep it offline) and public.jwk.json (for keys.ts). Never overwrites. */
export function generateKeyPair(dir: string): { privatePath: string; publicPath: string } {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const privatePath = join(dir, 'private.pem')
  const publicPath = join(dir, 'public.jwk.json')
  // 'wx': an existing private key may be the only copy of one that signed licenses.
  writeFileSync(privatePath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' })
  writeFileSync(publicPath, JSON.stringify(publicKey.export({ format: 'jwk' })) + '\n', { flag: 'wx' })
  return { privatePath, publicPath }
}

/** A mistake in the command line: exit 2 with the message (no stack). */
export class UsageError extends Error {}

export function readPrivateKey(path: string): KeyObject {
  let key: KeyObject
  try {
    const text = readFileSync(path, 'utf8')
    key = text.trim().startsWith('{')
      ? createPrivateKey({ key: JSON.parse(text), format: 'jwk' })
      : createPrivateKey(text)
  } catch (err) {
    throw new UsageError(
      `--private-key ${path}: not a readable private key, PKCS#8 PEM or JWK (${(err as Error).message})`,
    )
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new UsageError(`--private-key ${path}: not an Ed25519 key (it is ${key.asymmetricKeyType})`)
  return key
}

/** A calendar day as its first moment in UTC, so that a license means the same day everywhere. */
function date(flag: string, value: string): Date {
  const d = new Date(`${value}T00:00:00Z`)
  // The round trip refuses days that Date would roll over (2027-02-30 becoming March 2nd).
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(d.getTime()) || day(d) !== value) {
    throw new UsageError(`${flag} must be a date as YYYY-MM-DD (got "${value}")`)
  }
  return d
}
const day = (d: Date) => d.toISOString().slice(0, 10)

/** Runs the tool; returns what goes to stdout. Throws UsageError for a bad command line. */
export async function cli(argv: string[]): Promise<string> {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      'generate-key-pair': { type: 'string' },
      'private-key': { type: 'string' },
      kid: { type: 'string' },
      customer: { type: 'string' },
      plan: { type: 'string' },
      'max-tenants': { type: 'string' },
      features: { type: 'string' },
      'air-gap-allowed': { type: 'boolean' },
      expires: { type: 'string' },
      issued: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  if (v.help) return USAGE
  const keyDir = v['generate-key-pair']
  if (keyDir !== undefined) {
    if (!keyDir.trim()) throw new UsageError('--generate-key-pair needs a directory')
    let r
    try {
      r = generateKeyPair(keyDir)
    } catch (err) {
      if ((err as { code?: string }).code === 'EEXIST')
        throw new UsageError(`${keyDir} already holds a key pair, which is never overwritten: choose another directory`)
      throw err
    }
    return `wrote ${r.privatePath} (keep it offline) and ${r.publicPath} (add it to licenses/keys.ts with a new kid)`
  }
  const required = ['private-key', 'kid', 'customer', 'plan', 'max-tenants', 'expires'] as const
  const missing = required.filter((f) => !v[f]?.trim())
  if (missing.length) throw new UsageError(`missing ${missing.map((f) => `--${f}`).join(', ')}`)
  if (!isPlan(v.plan!)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')} (got "${v.plan}")`)
  const maxTenants = Number(v['max-tenants'])
  if (!/^\d+$/.test(v['max-tenants']!) || !Number.isSafeInteger(maxTenants) || maxTenants < 1) {
    throw new UsageError(`--max-tenants must be a whole number of at least 1 (got "${v['max-tenants']}")`)
  }
  const issuedAt = v.issued ? date('--issued', v.issued) : new Date()
  const expiresAt = date('--expires', v.expires!)
  if (expiresAt <= issuedAt) throw new UsageError(`--expires must be after the issue date (${day(issuedAt)})`)
  return issueLicense({
    privateKey: readPrivateKey(v['private-key']!),
    kid: v.kid!.trim(),
    customer: v.customer!.trim(),
    plan: v.plan as Plan,
    maxTenants,
    features: (v.features ?? '')
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean),
    airGapAllowed: Boolean(v['air-gap-allowed']),
    issuedAt,
    expiresAt,
  })
}

/**
 * A vendor tool's command line run as a process (this one, installer/kit.ts): its output on stdout,
 * a mistake in the command line as exit 2 with the message, anything else as exit 1.
 */
export function runVendorTool(run: (argv: string[]) => Promise<string>, showStack = true): void {
  run(process.argv.slice(2)).then(
    (out) => process.stdout.write(out + '\n'),
    (err: Error) => {
      const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
      process.stderr.write(
        usage ? `${err.message}\n(run with --help for usage)\n` : `${(showStack && err.stack) || err.message}\n`,
      )
      process.exitCode = usage ? 2 : 1
    },
  )
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) runVendorTool(cli)
