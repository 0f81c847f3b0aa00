// The vendor's tool, run as the vendor runs it (a child process): make a key pair, issue a license,
// and the license verifies with that pair's public key; bad arguments are refused with a clear message.
import { createPrivateKey } from 'node:crypto'
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { TrustedKey } from '../../licenses/keys.js'
import { verifyLicense } from '../../licenses/license.js'
import { finished, spawnScript } from '../helpers/cli.js'
import { tempDir } from '../helpers/platform.js'

const tool = (args: string[]) => finished(spawnScript('licenses/issue.ts', args, {}))
const JWT = /^[\w-]+\.[\w-]+\.[\w-]+\n$/

/** A fresh key pair made by the tool, in a temp dir removed at the end of the test. */
async function vendorKeys(t: Test) {
  const dir = join(tempDir(t), 'keys')
  const made = await tool(['--generate-key-pair', dir])
  t.equal(made.code, 0, made.stderr)
  const publicKeyJwk = JSON.parse(readFileSync(join(dir, 'public.jwk.json'), 'utf8')) as TrustedKey['publicKeyJwk']
  return { dir, made, privatePem: join(dir, 'private.pem'), publicKeyJwk }
}

t.test(
  'a vendor makes a key pair: the private key readable by its owner only, the public one without secrets',
  async (t) => {
    const { dir, made, privatePem, publicKeyJwk } = await vendorKeys(t)
    t.match(made.stdout, /wrote .*private\.pem \(keep it offline\) and .*public\.jwk\.json/)
    t.equal(statSync(privatePem).mode & 0o777, 0o600, 'private.pem is 0600')
    t.match(readFileSync(privatePem, 'utf8'), /^-----BEGIN PRIVATE KEY-----/)
    t.same(Object.keys(publicKeyJwk).sort(), ['crv', 'kty', 'x'], 'no private part in the public file')
    t.match(publicKeyJwk, { kty: 'OKP', crv: 'Ed25519' })

    const again = await tool(['--generate-key-pair', dir])
    t.equal(again.code, 2, 'an existing key pair is never overwritten')
    t.match(again.stderr, /already holds a key pair, which is never overwritten/)
  },
)

t.test("a license issued by the tool verifies offline with the pair's public key", async (t) => {
  const { privatePem, publicKeyJwk } = await vendorKeys(t)
  const issued = await tool([
    '--private-key',
    privatePem,
    '--kid',
    'vendor-9',
    '--customer',
    'Globex',
    '--plan',
    'growth',
    '--max-tenants',
    '12',
    '--features',
    'sso, byos',
    '--issued',
    '2026-03-01',
    '--expires',
    '2027-03-01',
  ])
  t.equal(issued.code, 0, issued.stderr)
  t.match(issued.stdout, JWT, 'stdout is the license key and nothing else')
  const keys: TrustedKey[] = [{ kid: 'vendor-9', publicKeyJwk }]
  const now = new Date('2026-09-01')
  t.match(await verifyLicense(issued.stdout, { keys, now }), {
    status: 'valid',
    license: {
      customer: 'Globex',
      plan: 'growth',
      maxTenants: 12,
      features: ['sso', 'byos'],
      airGapAllowed: false,
      issuedAt: new Date('2026-03-01T00:00:00Z'),
      expiresAt: new Date('2027-03-01T00:00:00Z'),
    },
  })
  t.match(
    await verifyLicense(issued.stdout, { keys, now, airGapped: true }),
    { reason: 'air_gap_not_allowed' },
    'air gap only when asked for',
  )
  t.match(
    await verifyLicense(issued.stdout, { keys: [{ kid: 'other', publicKeyJwk }], now }),
    { reason: 'unknown_key' },
    'the kid given is the kid in the header',
  )
})

t.test('the private key may also be a JWK file, and --air-gap-allowed is carried', async (t) => {
  const { dir, privatePem, publicKeyJwk } = await vendorKeys(t)
  const jwkPath = join(dir, 'private.jwk.json')
  writeFileSync(jwkPath, JSON.stringify(createPrivateKey(readFileSync(privatePem)).export({ format: 'jwk' })), {
    mode: 0o600,
  })
  const issued = await tool([
    '--private-key',
    jwkPath,
    '--kid',
    'k',
    '--customer',
    'Initech',
    '--plan',
    'enterprise',
    '--max-tenants',
    '3',
    '--air-gap-allowed',
    '--expires',
    '2999-01-01',
  ])
  t.equal(issued.code, 0, issued.stderr)
  const r = await verifyLicense(issued.stdout, {
    keys: [{ kid: 'k', publicKeyJwk }],
    airGapped: true,
    now: new Date('2998-01-01'),
  })
  t.match(r, {
    status: 'valid',
    license: { customer: 'Initech', plan: 'enterprise', maxTenants: 3, features: [], airGapAllowed: true },
  })
})

t.test('bad arguments exit 2, say what is wrong and print no license', async (t) => {
  const { dir, privatePem } = await vendorKeys(t)
  const notAKey = join(dir, 'public.jwk.json')
  const common = ['--private-key', privatePem, '--kid', 'k', '--max-tenants', '1']
  const cases: [string[], RegExp][] = [
    [[...common, '--plan', 'pro', '--expires', '2027-01-01'], /missing --customer/],
    [[...common, '--customer', '  ', '--plan', 'pro', '--expires', '2027-01-01'], /missing --customer/],
    [['--customer', 'A', '--plan', 'pro'], /missing --private-key, --kid, --max-tenants, --expires/],
    [
      [...common, '--customer', 'A', '--plan', 'platinum', '--expires', '2027-01-01'],
      /--plan must be one of free, pro, growth, enterprise \(got "platinum"\)/,
    ],
    [
      [...common, '--customer', 'A', '--plan', 'pro', '--expires', '31/12/2027'],
      /--expires must be a date as YYYY-MM-DD \(got "31\/12\/2027"\)/,
    ],
    [
      [...common, '--customer', 'A', '--plan', 'pro', '--expires', '2027-02-30'],
      /--expires must be a date as YYYY-MM-DD/,
    ],
    [
      [...common, '--customer', 'A', '--plan', 'pro', '--issued', 'today', '--expires', '2027-01-01'],
      /--issued must be a date as YYYY-MM-DD/,
    ],
    [
      [...common, '--customer', 'A', '--plan', 'pro', '--issued', '2026-01-01', '--expires', '2025-01-01'],
      /--expires must be after the issue date \(2026-01-01\)/,
    ],
    [
      [...common.slice(0, 4), '--max-tenants', '0', '--customer', 'A', '--plan', 'pro', '--expires', '2027-01-01'],
      /--max-tenants must be a whole number of at least 1/,
    ],
    [
      [...common.slice(0, 4), '--max-tenants', '1.5', '--customer', 'A', '--plan', 'pro', '--expires', '2027-01-01'],
      /--max-tenants must be a whole number of at least 1/,
    ],
    [
      ['--private-key', notAKey, ...common.slice(2), '--customer', 'A', '--plan', 'pro', '--expires', '2999-01-01'],
      /--private-key .*public\.jwk\.json: not a readable private key/,
    ],
    [
      [
        '--private-key',
        join(dir, 'nothing.pem'),
        ...common.slice(2),
        '--customer',
        'A',
        '--plan',
        'pro',
        '--expires',
        '2999-01-01',
      ],
      /--private-key .*nothing\.pem: not a readable private key/,
    ],
    [['--generate-key-pair', ''], /--generate-key-pair needs a directory/],
    [['--colour'], /Unknown option '--colour'/],
  ]
  // Run side by side: each is a separate Node process starting tsx.
  const results = await Promise.all(cases.map(([args]) => tool(args)))
  for (const [i, [args, message]] of cases.entries()) {
    const r = results[i]!
    t.equal(r.code, 2, args.join(' '))
    t.match(r.stderr, message)
    t.match(r.stderr, /run with --help for usage/)
    t.equal(r.stdout, '', 'no license printed')
  }
})

t.test('--help prints the usage', async (t) => {
  const r = await tool(['--help'])
  t.equal(r.code, 0)
  t.match(r.stdout, /--private-key FILE --kid KID --customer NAME --plan free\|pro\|growth\|enterprise/)
  t.match(r.stdout, /--generate-key-pair DIR/)
})
