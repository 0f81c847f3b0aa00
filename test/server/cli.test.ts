import pino from 'pino'
import { Registry } from 'prom-client'
import t from 'tap'
import { accountKey, loginThrottle } from '../../server/modules/sign-in/throttle.js'
import { openCache } from '../../server/platform/cache.js'
import { openCounters, RATE_LIMIT_PREFIX } from '../../server/platform/counters.js'
import { MAX_STDIN_PASSWORD_BYTES } from '../../server/cli.js'
import { verifyPassword } from '../../server/modules/users/passwords.js'
import { openDb } from '../../server/platform/db.js'
import { admin } from '../helpers/cli.js'
import {
  adminTrusting,
  clockSetBack,
  DAY,
  needsFaketime,
  productionEnv,
  testLicense,
  testVendor,
} from '../helpers/license.js'
import { freePort, freshDatabase, services, suffix, testEnv } from '../helpers/platform.js'

const env = await testEnv(t)

/** The owner's stored password hash, read as the server reads it. */
async function passwordHash(userId: string): Promise<string | null> {
  const db = await openDb({
    databaseUrl: env.DATABASE_URL ?? '',
    dataDir: env.DATA_DIR!,
    poolMax: 1,
    log: pino({ level: 'silent' }),
  })
  try {
    const rows = await db.system(
      (sql) => sql<{ h: string | null }[]>`select password_hash as h from users where id = ${userId}`,
    )
    return rows[0]?.h ?? null
  } finally {
    await db.close()
  }
}

t.test('create-tenant prints exactly one JSON line with the tenant, owner and key', async (t) => {
  const password = 'twelve chars! and a space'
  const r = await admin(
    [
      'create-tenant',
      '--name',
      'CLI Co',
      '--plan',
      'pro',
      '--email',
      `cli-${Date.now()}@example.com`,
      '--password-stdin',
    ],
    env,
    `${password}\n`,
  )
  t.equal(r.code, 0, r.stderr)
  const lines = r.stdout.trim().split('\n')
  t.equal(lines.length, 1)
  const out = JSON.parse(lines[0]!)
  t.same(Object.keys(out).sort(), ['apiKey', 'tenantId', 'userId'])
  t.match(out.apiKey, /^svc_ci_[A-Za-z0-9]{40}$/)
  const hash = await passwordHash(out.userId)
  t.ok(hash && (await verifyPassword(password, hash)), 'the owner signs in with the line read from stdin')
  t.notOk(hash && (await verifyPassword(`${password}\n`, hash)), 'its line break is not part of it')

  const key = await admin(
    [
      'create-key',
      '--tenant',
      out.tenantId,
      '--type',
      'sdk',
      '--permissions',
      'projects:read',
      '--name',
      'reader',
      '--expires-in-days',
      '30',
    ],
    env,
  )
  t.equal(key.code, 0, key.stderr)
  t.match(JSON.parse(key.stdout), { id: String, apiKey: /^svc_sdk_/, type: 'sdk', permissions: ['projects:read'] })

  const op = await admin(['create-key', '--type', 'admin'], env)
  t.equal(op.code, 0, op.stderr)
  t.match(JSON.parse(op.stdout), { apiKey: /^svc_admin_/, type: 'admin', permissions: ['*'] })
})

t.test('bad usage exits 2 with a reason and prints nothing on stdout', async (t) => {
  const cases = [
    [['create-tenant']],
    [['create-tenant', '--name', 'X', '--plan', 'platinum']],
    [['create-tenant', '--name', 'X', '--bogus', 'y']],
    [['create-tenant', '--name', 'X', '--password-stdin', '--password-stdin=x']],
    [['create-key', '--type', 'sdk']],
    [['create-key', '--tenant', '01900000-0000-7000-8000-000000000000']],
    [['create-key', '--tenant', 'x', '--type', 'root']],
    [['create-key', '--type', 'admin', '--expires-in-days', 'soon']],
    [['unlock-sign-in']],
    [['unlock-sign-in', '--email', 'owner']],
    [['frobnicate']],
  ] as const
  for (const [args] of cases) {
    const r = await admin([...args], env)
    t.equal(r.code, 2, args.join(' '))
    t.equal(r.stdout, '', `${args.join(' ')}: stdout stays clean`)
    t.match(r.stderr, /^error: /, args.join(' '))
  }
})

t.test(
  'create-tenant takes the password only on standard input: as an argument, missing, too long or too short it is refused with exit 2 and nothing is made',
  async (t) => {
    const long = 'x'.repeat(MAX_STDIN_PASSWORD_BYTES + 1)
    const cases: [string, string[], string | Buffer | undefined, RegExp][] = [
      ['as an argument', ['--password', 'twelve chars!'], undefined, /--password is not taken: .*--password-stdin/],
      ['as an argument, joined', ['--password=twelve chars!'], undefined, /--password is not taken/],
      ['no standard input', ['--password-stdin'], undefined, /standard input held no password/],
      ['an empty line', ['--password-stdin'], '\n', /standard input held no password/],
      [
        'over the bound',
        ['--password-stdin'],
        `${long}\n`,
        new RegExp(`longer than ${MAX_STDIN_PASSWORD_BYTES} bytes`),
      ],
      // A stream that never ends is not read whole: refused at the bound (8 MiB, no line break).
      ['a line that never ends', ['--password-stdin'], Buffer.alloc(8 * 1024 * 1024, 0x61), /longer than 1024 bytes/],
      ['under the minimum', ['--password-stdin'], 'short\n', /password: must be at least 12 characters/],
    ]
    for (const [what, extra, input, message] of cases) {
      const email = `refused-${suffix()}@example.com`
      const r = await admin(['create-tenant', '--name', 'Refused', '--email', email, ...extra], env, input)
      t.equal(r.code, 2, `${what}: exit 2`)
      t.equal(r.stdout, '', `${what}: nothing printed on stdout`)
      t.match(r.stderr, message, what)
      t.notMatch(r.stderr, /twelve chars!/, `${what}: the password is not repeated`)
    }
    const db = await openDb({
      databaseUrl: env.DATABASE_URL ?? '',
      dataDir: env.DATA_DIR!,
      poolMax: 1,
      log: pino({ level: 'silent' }),
    })
    t.teardown(() => db.close())
    const made = await db.system((sql) => sql`select 1 from users where email like 'refused-%'`)
    t.equal(made.length, 0, 'no owner was made')
  },
)

t.test('help lists the commands', async (t) => {
  const r = await admin(['help'], env)
  t.equal(r.code, 0)
  t.match(r.stdout, /create-tenant --name N/)
})

t.test('a configuration problem exits 78 with one line per problem and no stack trace', async (t) => {
  const r = await admin(['migrate'], { ...env, PORT: 'eighty', DATABASE_URL: 'mysql://x' })
  t.equal(r.code, 78)
  const lines = r.stderr.trim().split('\n')
  t.equal(lines.length, 2)
  t.ok(lines.every((l) => l.startsWith('config error: ')))
  t.notMatch(r.stderr, /\n\s+at /)
})

const vendor = testVendor()

t.test("create-tenant beyond the license's maxTenants exits 1 with a JSON error line", async (t) => {
  const fresh = await testEnv(t, { LICENSE_KEY: await testLicense(vendor, { maxTenants: 2 }) })
  for (const name of ['First', 'Second']) {
    const r = await adminTrusting(vendor, ['create-tenant', '--name', name], fresh)
    t.equal(r.code, 0, r.stderr)
  }
  const r = await adminTrusting(vendor, ['create-tenant', '--name', 'Third'], fresh)
  t.equal(r.code, 1)
  const lines = r.stdout.trim().split('\n')
  t.equal(lines.length, 1, 'one JSON line')
  t.match(JSON.parse(lines[0]!), {
    error: {
      code: 'FORBIDDEN',
      message: /The license allows at most 2 tenant\(s\)/,
      details: { reason: 'license_tenant_limit', maxTenants: 2 },
    },
  })
  t.match(r.stderr, /^error: The license allows at most 2 tenant\(s\) and that many exist: contact your Atrium vendor/)
})

t.test('in production create-tenant needs the license the server needs (exit 78)', async (t) => {
  const r = await admin(['create-tenant', '--name', 'X'], productionEnv(t))
  t.equal(r.code, 78)
  t.equal(r.stdout, '')
  t.match(r.stderr, /^license error: license invalid \(missing\): No license key is set/)
})

t.test('license prints the status as one JSON line: whose, which plan, until when, how many tenants', async (t) => {
  const expiresAt = new Date(Date.UTC(2099, 0, 1))
  const valid = await adminTrusting(vendor, ['license'], {
    ...env,
    LICENSE_KEY: await testLicense(vendor, { customer: 'Acme', plan: 'growth', maxTenants: 7, expiresAt }),
  })
  t.equal(valid.code, 0, valid.stderr)
  const licensed = 'Licensed to Acme (growth, up to 7 tenants) until 2099-01-01'
  // The embedded database (no TEST_DATABASE_URL) gives no DATABASE_URL to read a clock from.
  const alone = "no DATABASE_URL: judged by this machine's clock alone, which the server checks against its database's"
  t.same(JSON.parse(valid.stdout), {
    status: env.DATABASE_URL ? 'valid' : 'unconfirmed',
    ...(env.DATABASE_URL ? {} : { statusByThisClock: 'valid' }),
    customer: 'Acme',
    plan: 'growth',
    expiresAt: expiresAt.toISOString(),
    maxTenants: 7,
    readOnly: false,
    message: env.DATABASE_URL ? licensed : `Unconfirmed: ${alone}. By this clock: ${licensed}`,
    airGapped: false,
    clock: { judgedBy: 'process', behindSeconds: 0, ...(env.DATABASE_URL ? {} : { unchecked: alone }) },
  })

  const graceKey = await testLicense(vendor, {
    issuedAt: new Date(Date.now() - 100 * DAY),
    expiresAt: new Date(Date.now() - 5.5 * DAY),
  })
  const grace = await adminTrusting(vendor, ['license'], { ...env, LICENSE_KEY: graceKey })
  t.match(JSON.parse(grace.stdout), {
    ...(env.DATABASE_URL ? { status: 'grace' } : { status: 'unconfirmed', statusByThisClock: 'grace' }),
    daysLeft: 25,
    readOnly: false,
  })

  const unlicensed = await admin(['license'], env)
  t.equal(unlicensed.code, 0)
  t.match(JSON.parse(unlicensed.stdout), {
    status: 'unlicensed',
    readOnly: false,
    message: /^Unlicensed \(development\)/,
    airGapped: false,
  })
  // The site's mode is part of its status.
  const airGapped = await admin(['license'], { ...env, AIR_GAPPED: 'true' })
  t.match(JSON.parse(airGapped.stdout), { status: 'unlicensed', airGapped: true })

  const refused = await admin(['license'], productionEnv(t, { LICENSE_KEY: 'garbled' }))
  t.equal(refused.code, 78, 'production would not start')
  t.match(JSON.parse(refused.stdout), { status: 'invalid', reason: 'malformed' })
  t.match(refused.stderr, /^license error: license invalid \(malformed\)/)
})

t.test(
  'license needs LICENSE_KEY alone, even for production; without a database, or one it cannot read, a valid license is unconfirmed and it says what it could not check',
  async (t) => {
    const key = await testLicense(vendor, { customer: 'Alone' })
    const alone = await adminTrusting(vendor, ['license'], { NODE_ENV: 'production', LICENSE_KEY: key })
    t.equal(alone.code, 0, alone.stderr)
    t.match(JSON.parse(alone.stdout), {
      status: 'unconfirmed',
      statusByThisClock: 'valid',
      customer: 'Alone',
      message:
        /^Unconfirmed: no DATABASE_URL: judged by this machine's clock alone.*\. By this clock: Licensed to Alone/,
      clock: { judgedBy: 'process', unchecked: /^no DATABASE_URL/ },
    })
    t.notMatch(JSON.parse(alone.stdout).status, 'valid', 'never "valid" on a clock nobody checked')
    const ended = await testLicense(vendor, {
      issuedAt: new Date(Date.now() - 200 * DAY),
      expiresAt: new Date(Date.now() - 60 * DAY),
    })
    const expired = await adminTrusting(vendor, ['license'], { NODE_ENV: 'production', LICENSE_KEY: ended })
    t.match(
      JSON.parse(expired.stdout),
      { status: 'expired', readOnly: true, clock: { unchecked: /^no DATABASE_URL/ } },
      'expired by this clock is expired: the trusted time is never earlier',
    )
    const unreachable = await adminTrusting(vendor, ['license'], {
      NODE_ENV: 'production',
      LICENSE_KEY: key,
      DATABASE_URL: `postgres://atrium@127.0.0.1:${await freePort()}/none`,
    })
    t.equal(unreachable.code, 0, unreachable.stderr)
    t.match(JSON.parse(unreachable.stdout), {
      status: 'unconfirmed',
      statusByThisClock: 'valid',
      clock: {
        judgedBy: 'process',
        unchecked: /^the database could not be read \(.+\): judged by this machine's clock$/,
      },
    })
    const bad = await adminTrusting(vendor, ['license'], { LICENSE_KEY: key, AIR_GAPPED: 'maybe' })
    t.equal(bad.code, 78, 'a bad setting it reads is still a configuration error')
    t.match(bad.stderr, /^config error: AIR_GAPPED/)
  },
)

t.test(
  'under a clock set back 90 days (faketime), an expired license is never "valid": unconfirmed without a database, expired with one',
  { skip: needsFaketime() },
  async (t) => {
    const ended = await testLicense(vendor, {
      issuedAt: new Date(Date.now() - 200 * DAY),
      expiresAt: new Date(Date.now() - 60 * DAY),
    })
    const behind = { NODE_ENV: 'production', LICENSE_KEY: ended, ...clockSetBack(90) }
    const alone = await adminTrusting(vendor, ['license'], behind)
    t.equal(alone.code, 0, alone.stderr)
    t.match(JSON.parse(alone.stdout), {
      status: 'unconfirmed',
      statusByThisClock: 'valid',
      message: /^Unconfirmed: no DATABASE_URL: judged by this machine's clock alone/,
      clock: { judgedBy: 'process', unchecked: /^no DATABASE_URL/ },
    })
    if (!services.databaseUrl) return
    const judged = await adminTrusting(vendor, ['license'], { ...behind, DATABASE_URL: await freshDatabase(t) })
    t.match(
      JSON.parse(judged.stdout),
      { status: 'expired', readOnly: true, clock: { judgedBy: 'database' } },
      "with DATABASE_URL it is judged by the database's clock, as the server judges it",
    )
  },
)

t.test(
  'migrate never checks the license, so an upgrade is never blocked by one',
  { skip: !services.databaseUrl && 'needs TEST_DATABASE_URL (production refuses the embedded database)' },
  async (t) => {
    const r = await admin(
      ['migrate'],
      productionEnv(t, { DATABASE_URL: await freshDatabase(t), LICENSE_KEY: 'expired-or-garbled' }),
    )
    t.equal(r.code, 0, r.stderr)
    t.match(JSON.parse(r.stdout), { applied: Array })
  },
)

t.test(
  'check-services checks what the settings name and prints the results as one JSON line, whatever they found',
  async (t) => {
    const none = await admin(['check-services'], {})
    t.same(
      { code: none.code, stdout: none.stdout },
      { code: 0, stdout: '{"checks":[]}\n' },
      'nothing named, nothing checked',
    )
    const down = await admin(['check-services'], {
      DATABASE_URL: 'postgres://atrium:pw@127.0.0.1:1/atrium',
      REGION_STORES: '{not json',
    })
    t.equal(down.code, 0, 'a failed check is a result, not a failure of the command')
    const checks = JSON.parse(down.stdout).checks as { id: string; status: string; found: string }[]
    t.match(checks, [
      { id: 'postgres.connect', status: 'fail' },
      { id: 'region.stores', status: 'fail', found: 'is not JSON' },
    ])
    t.notMatch(down.stdout, /pw@/, 'no password in what it prints')
    if (!services.databaseUrl) return
    const up = await admin(['check-services'], { DATABASE_URL: services.databaseUrl })
    t.match(JSON.parse(up.stdout).checks, [
      { id: 'postgres.connect', status: 'pass' },
      { id: 'postgres.version', status: 'pass' },
      { id: 'postgres.privileges' },
    ])
  },
)

t.test(
  'unlock-sign-in lifts the lock that guesses from 22 addresses put on an owner, and prints what it cleared and whose accounts the address has',
  { skip: !services.redisUrl && 'needs TEST_REDIS_URL (the CLI reaches the counters through Redis)' },
  async (t) => {
    const email = `locked-${suffix()}@example.com`
    const created = await admin(['create-tenant', '--name', 'Locked Co', '--plan', 'pro', '--email', email], env)
    t.equal(created.code, 0, created.stderr)
    const { tenantId, userId } = JSON.parse(created.stdout)
    // The server's throttle as it counts in Redis: the same keys, the default limits.
    const log = pino({ level: 'silent' })
    const cache = await openCache({ redisUrl: services.redisUrl, log })
    t.teardown(() => cache.close())
    const counters = openCounters({ redis: cache.redis, log, registry: new Registry() })
    const throttle = loginThrottle({ counters, keyPrefix: RATE_LIMIT_PREFIX })
    const from = `unlock-${suffix()}`
    // Each address's own failures stay; they are the guessers' limit, under a name only this test uses.
    t.teardown(() =>
      counters
        .counter({ points: 1, windowSeconds: 1, keyPrefix: `${RATE_LIMIT_PREFIX}:login:ip`, name: 'cleanup' })
        .deleteStartingWith(from),
    )
    const at = (ip: string) => ({ account: accountKey(email), ip: `${from}-${ip}`, device: null })
    for (let n = 0; n < 22; n++)
      for (let i = 0; i < 5; i++) await throttle.failed(at(String(n)), { trusted: false, suspect: false })
    await t.rejects(
      throttle.check(at('owner')),
      { code: 'RATE_LIMIT_EXCEEDED', details: { reason: 'sign_in_throttled' } },
      'the owner is locked out',
    )

    const r = await admin(['unlock-sign-in', '--email', email.toUpperCase()], env)
    t.equal(r.code, 0, r.stderr)
    t.same(JSON.parse(r.stdout), {
      email: email.toUpperCase(),
      failures: 110,
      locked: true,
      addresses: 22,
      waiting: 22,
      accounts: [{ tenantId, userId }],
    })
    t.same(await throttle.check(at('owner')), { trusted: false, suspect: false }, 'the owner signs in again')
  },
)

t.test(
  "without REDIS_URL unlock-sign-in refuses: the counters are in the server's memory (exit 1, SERVICE_UNAVAILABLE)",
  async (t) => {
    const { REDIS_URL: _, ...embedded } = env
    const r = await admin(['unlock-sign-in', '--email', 'owner@example.com'], embedded)
    t.equal(r.code, 1)
    t.match(JSON.parse(r.stdout), {
      error: { code: 'SERVICE_UNAVAILABLE', details: { reason: 'counters_in_server_memory' } },
    })
    t.match(r.stderr, /^error: Without REDIS_URL/)
  },
)
