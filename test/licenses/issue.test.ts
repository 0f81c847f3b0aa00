// The vendor's tool, run as the vendor runs it: make a key pair, issue a license, and the license
// verifies with that pair's public key; bad arguments are refused with a clear message.
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { TrustedKey } from '../../licenses/keys.js'
import { verifyLicense } from '../../licenses/license.js'
import { finished, spawnScript } from '../helpers/cli.js'
import { tempDir } from '../helpers/platform.js'

const tool = (args: string[]) => finished(spawnScript('licenses/issue.ts', args, {}))

t.test('a vendor makes a key pair and issues a license that verifies offline', async (t) => {
  const dir = join(tempDir(t), 'keys')
  const made = await tool(['--generate-key-pair', dir])
  t.equal(made.code, 0, made.stderr)
  t.equal(statSync(join(dir, 'private.pem')).mode & 0o777, 0o600, 'the private key is private')
  const jwk = JSON.parse(readFileSync(join(dir, 'public.jwk.json'), 'utf8'))
  t.match(jwk, { kty: 'OKP', crv: 'Ed25519' })
  t.notOk(jwk.d, 'the public file holds no private part')

  const issued = await tool([
    '--private-key', join(dir, 'private.pem'), '--kid', 'vendor-9', '--customer', 'Globex', '--plan', 'growth',
    '--max-tenants', '12', '--features', 'sso, byos', '--issued', '2026-03-01', '--expires', '2027-03-01',
  ])
  t.equal(issued.code, 0, issued.stderr)
  const keys: TrustedKey[] = [{ kid: 'vendor-9', publicKeyJwk: jwk }]
  const r = await verifyLicense(issued.stdout.trim(), { keys, now: new Date('2026-09-01') })
  t.match(r, { status: 'valid', license: { customer: 'Globex', plan: 'growth', maxTenants: 12, features: ['sso', 'byos'], airGapAllowed: false } })
  t.match(await verifyLicense(issued.stdout.trim(), { keys, now: new Date('2026-09-01'), airGapped: true }), { reason: 'air_gap_not_allowed' })

  const again = await tool(['--generate-key-pair', dir])
  t.not(again.code, 0, 'an existing key pair is never overwritten')
})

t.test('bad arguments exit 2 and say what is wrong', async (t) => {
  const dir = join(tempDir(t), 'keys')
  await tool(['--generate-key-pair', dir])
  const common = ['--private-key', join(dir, 'private.pem'), '--kid', 'k', '--max-tenants', '1']
  const cases: [string[], RegExp][] = [
    [[...common, '--plan', 'pro', '--expires', '2027-01-01'], /missing --customer/],
    [[...common, '--customer', 'A', '--plan', 'platinum', '--expires', '2027-01-01'], /--plan must be one of free, pro, growth, enterprise/],
    [[...common, '--customer', 'A', '--plan', 'pro', '--expires', '31/12/2027'], /--expires must be a date as YYYY-MM-DD/],
    [[...common, '--customer', 'A', '--plan', 'pro', '--expires', '2020-01-01'], /--expires must be after the issue date/],
    [['--colour'], /Unknown option '--colour'/],
  ]
  for (const [args, message] of cases) {
    const r = await tool(args)
    t.equal(r.code, 2, args.join(' '))
    t.match(r.stderr, message)
    t.equal(r.stdout, '', 'no license printed')
  }
})
