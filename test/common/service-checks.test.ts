// Service checks against the real PostgreSQL, Redis and S3 store when TEST_* name them, and a
// PostgreSQL cluster of the test's own for pg_hba.conf and password refusals; grading at the
// thresholds, down services and small fakes everywhere: a Redis that speaks RESP as 6.2 does, a
// PostgreSQL out of connections and an S3 store reached by bucket host name, because none of those
// can be produced with the real services here.
import { spawn } from 'node:child_process'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type AddressInfo, type LookupFunction, type Server, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import postgres from 'postgres'
import { Redis } from 'ioredis'
import {
  detectAddressing,
  gradePostgresPrivileges,
  gradePostgresVersion,
  gradeRedisEviction,
  gradeRedisVersion,
  postgresChecks,
  redactUrl,
  redisChecks,
  s3Checks,
  virtualHostCandidate,
  where,
  xmlText,
} from '../../common/service-checks.js'
import { freePort, freshBucket, freshDatabase, s3Client, services, suffix, tempDir } from '../helpers/platform.js'
import { findTool as findExecutable } from '../helpers/tools.js'
import { silentServer } from '../helpers/silent.js'
import { clusterSkip, pgCluster } from '../helpers/pg-cluster.js'

const quick = { timeoutMs: 2000 }
/** The checks of these ids, in this order, each passed. */
const passed = (...ids: string[]) => ids.map((id) => ({ id, status: 'pass' }))

/** A new bucket on the test's S3 store, and the store as the checks are given it. */
async function realS3Target(t: Test) {
  const bucket = await freshBucket(t)
  return {
    bucket,
    target: {
      endpoint: services.s3Endpoint,
      bucket,
      accessKey: services.s3AccessKey,
      secretKey: services.s3SecretKey,
      region: 'us-east-1',
    },
  }
}

async function listen(t: Test, server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise((r) => server.close(r)))
  return (server.address() as AddressInfo).port
}

/** A port where nothing listens: bound, noted and closed. */
async function deadPort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

/**
 * One RESP command (an array of bulk strings, which is all ioredis sends) and its length, or null until it is complete.
 */
function parseCommand(buf: Buffer): { args: string[]; length: number } | null {
  let pos = 0
  const line = () => {
    const end = buf.indexOf('\r\n', pos)
    if (end < 0) return null
    const text = buf.toString('latin1', pos, end)
    pos = end + 2
    return text
  }
  const head = line()
  if (head === null) return null
  const args: string[] = []
  for (let i = Number(head.slice(1)); i > 0; i--) {
    const len = line()
    if (len === null || buf.length < pos + Number(len.slice(1)) + 2) return null
    args.push(buf.toString('utf8', pos, pos + Number(len.slice(1))))
    pos += Number(len.slice(1)) + 2
  }
  return { args, length: pos }
}

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`

/** A Redis stand-in: INFO answers `info`, CONFIG GET maxmemory-policy answers `policy`, the rest +OK. */
async function fakeRedis(t: Test, info: string, policy: string): Promise<string> {
  const server = createServer((socket) => {
    let buf = Buffer.alloc(0)
    socket.on('data', (data) => {
      buf = Buffer.concat([buf, data])
      for (let cmd = parseCommand(buf); cmd; cmd = parseCommand(buf)) {
        buf = buf.subarray(cmd.length)
        const [name = '', sub = ''] = cmd.args.map((a) => a.toUpperCase())
        socket.write(
          name === 'INFO'
            ? bulk(info)
            : name === 'CONFIG' && sub === 'GET'
              ? `*2\r\n${bulk('maxmemory-policy')}${bulk(policy)}`
              : name === 'PING'
                ? '+PONG\r\n'
                : '+OK\r\n',
        )
      }
    })
  })
  return `redis://127.0.0.1:${await listen(t, server)}`
}

/** A PostgreSQL stand-in that answers the startup message with a FATAL ErrorResponse carrying `sqlstate`. */
async function fakePostgres(t: Test, sqlstate: string, message: string): Promise<number> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.once('data', () => {
      const fields = Buffer.from(`SFATAL\0VFATAL\0C${sqlstate}\0M${message}\0\0`)
      const len = Buffer.alloc(4)
      len.writeInt32BE(fields.length + 4)
      socket.end(Buffer.concat([Buffer.from('E'), len, fields]))
    })
  })
  t.teardown(() => sockets.forEach((s) => s.destroy()))
  return listen(t, server)
}

t.test('PostgreSQL 15.0 (150000) is the minimum version', async (t) => {
  t.same(
    [149999, 150000, 150001, 170004].map((n) => gradePostgresVersion(n).status),
    ['fail', 'pass', 'pass', 'pass'],
  )
  t.match(gradePostgresVersion(130004), {
    found: 'PostgreSQL 13.4',
    required: 'PostgreSQL 15 or newer',
    fix: /Upgrade PostgreSQL to 15/,
  })
  t.equal(gradePostgresVersion(90624).found, 'PostgreSQL 9.6.24')
  t.equal(gradePostgresVersion(150000, '15.0').fix, '', 'a pass carries no fix')
})

t.test('Redis 7.0.0 is the minimum version; an unreadable version fails', async (t) => {
  t.same(
    ['6.2.14', '6.99.99', '7.0.0', '7.0.1', '7.2.4'].map((v) => gradeRedisVersion(v).status),
    ['fail', 'fail', 'pass', 'pass', 'pass'],
  )
  t.equal(gradeRedisVersion('unknown').status, 'fail')
})

t.test('the migrations need CREATEROLE (or the roles granted) and CREATE on the schema, or a superuser', async (t) => {
  const p = {
    user: 'atrium',
    database: 'atrium',
    schema: 'public',
    superuser: false,
    createrole: true,
    rolesGranted: false,
    createOnSchema: true,
  }
  t.equal(gradePostgresPrivileges(p).status, 'pass')
  t.equal(
    gradePostgresPrivileges({ ...p, createrole: false, rolesGranted: true }).status,
    'pass',
    'an administrator made and granted the roles',
  )
  t.equal(gradePostgresPrivileges({ ...p, createrole: false, createOnSchema: false, superuser: true }).status, 'pass')
  t.match(gradePostgresPrivileges({ ...p, createrole: false }), {
    status: 'fail',
    found: 'user atrium on atrium: no CREATEROLE, CREATE on schema public',
    fix: /run: ALTER ROLE "atrium" CREATEROLE; \(or, instead/,
  })
  t.match(gradePostgresPrivileges({ ...p, createOnSchema: false }), {
    status: 'fail',
    fix: 'As a superuser, in database atrium, run: GRANT CREATE ON SCHEMA "public" TO "atrium";',
  })
  t.match(gradePostgresPrivileges({ ...p, user: 'we"ird', schema: null, createOnSchema: false }), {
    status: 'fail',
    found: /no schema on the search path/,
    fix: /TO "we""ird";/,
  })
})

t.test('eviction: noeviction passes, volatile-* warns, allkeys-* fails, unreadable warns', async (t) => {
  t.same(
    ['noeviction', 'volatile-lru', 'volatile-ttl', 'allkeys-lru', 'allkeys-random'].map(
      (p) => gradeRedisEviction(p).status,
    ),
    ['pass', 'warn', 'warn', 'fail', 'fail'],
  )
  t.equal(gradeRedisEviction(null).status, 'warn')
})

t.test('URLs are shown without their password', async (t) => {
  t.equal(where('postgres://u:p@db.internal:5433/x'), 'db.internal:5433')
  t.equal(redactUrl('redis://user:s%40cret@cache:6379/0'), 'redis://user:***@cache:6379/0')
  t.equal(redactUrl('not a url'), '(not a URL)')
})

t.test('virtual-hosted addressing is tried only for DNS names', async (t) => {
  t.same(
    [
      'http://127.0.0.1:9000',
      'http://[::1]:9000',
      'http://localhost:9000',
      'http://minio:9000',
      'https://s3.example.com',
      'http://minio.internal:9000',
    ].map((e) => virtualHostCandidate(e, 'atrium')),
    [false, false, false, false, true, true],
  )
  t.equal(
    virtualHostCandidate('https://s3.example.com', 'my.bucket'),
    false,
    'a dotted bucket over HTTPS would break the wildcard certificate',
  )
})

t.test('addressing: virtual-hosted when bucket.host resolves and answers, path-style otherwise', async (t) => {
  // A store that knows the bucket only by its host name, as a virtual-hosted store does.
  const hosts: string[] = []
  const server = createHttpServer((req, res) => {
    hosts.push(req.headers.host ?? '')
    res.writeHead(req.headers.host?.startsWith('atrium.') ? 200 : 404).end()
  })
  const port = await listen(t, server)
  const target = {
    endpoint: `http://s3.atrium.test:${port}`,
    bucket: 'atrium',
    accessKey: 'k',
    secretKey: 's',
    region: 'us-east-1',
  }
  const loopback: LookupFunction = (_host, opts, cb) =>
    opts.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)
  const nowhere: LookupFunction = (host, _opts, cb) =>
    cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), '', 4)
  t.equal(await detectAddressing(target, { ...quick, lookup: loopback }), 'virtual-hosted')
  t.same(hosts, [`atrium.s3.atrium.test:${port}`])
  t.equal(await detectAddressing(target, { ...quick, lookup: nowhere }), 'path-style', 'bucket.host does not resolve')
  t.equal(
    await detectAddressing({ ...target, bucket: 'other' }, { ...quick, lookup: loopback }),
    'path-style',
    'the store does not answer for the bucket there',
  )
  t.equal(
    await detectAddressing({ ...target, endpoint: `http://127.0.0.1:${port}` }, quick),
    'path-style',
    'an IP address',
  )
  t.equal(hosts.length, 2, 'no request for a name that does not resolve, nor for an IP address')
})

t.test('a service that is down fails as not reachable, with host and port and no password', async (t) => {
  const port = await deadPort()
  const results = {
    postgres: await postgresChecks(`postgres://atrium:hunter2@127.0.0.1:${port}/atrium`, quick),
    redis: await redisChecks(`redis://:hunter2@127.0.0.1:${port}`, quick),
    s3: await s3Checks(
      {
        endpoint: `http://127.0.0.1:${port}`,
        bucket: 'atrium-down',
        accessKey: 'k',
        secretKey: 'hunter2',
        region: 'us-east-1',
      },
      quick,
    ),
  }
  for (const [name, r] of Object.entries(results)) {
    t.match(r, [{ status: 'fail', found: `not reachable at 127.0.0.1:${port} (ECONNREFUSED)`, fix: /Start / }], name)
    t.equal(r.length, 1, `${name}: nothing else to check`)
    t.notMatch(JSON.stringify(r), /hunter2/, `${name}: no password in the result`)
  }
})

t.test('a Redis older than 7 with allkeys eviction fails both checks', async (t) => {
  const url = await fakeRedis(
    t,
    '# Server\r\nredis_version:6.2.14\r\n# Memory\r\nmaxmemory_policy:allkeys-lru\r\n',
    'noeviction',
  )
  t.match(await redisChecks(url, quick), [
    { id: 'redis.connect', status: 'pass' },
    { id: 'redis.version', status: 'fail', found: 'Redis 6.2.14' },
    { id: 'redis.eviction', status: 'fail', found: 'maxmemory-policy allkeys-lru' },
  ])
})

t.test('the eviction policy comes from CONFIG GET when INFO leaves it out', async (t) => {
  const url = await fakeRedis(t, '# Server\r\nredis_version:7.2.4\r\n', 'volatile-lru')
  t.match(await redisChecks(url, quick), [
    { status: 'pass' },
    { status: 'pass', found: 'Redis 7.2.4' },
    { status: 'warn', found: 'maxmemory-policy volatile-lru' },
  ])
})

t.test(
  "a real PostgreSQL's refusals say which they are: pg_hba.conf (fix pg_hba.conf, not the password), a wrong password, a missing user",
  { skip: clusterSkip() },
  async (t) => {
    // A cluster of the test's own: the shared one trusts every loopback connection.
    const cluster = await pgCluster(t, [
      'host open all 127.0.0.1/32 scram-sha-256',
      'host closed all 127.0.0.1/32 reject',
      'host trusted all 127.0.0.1/32 trust',
    ])
    await cluster.psql("create role atrium login password 'right-password'")
    for (const db of ['open', 'closed', 'other', 'trusted']) await cluster.psql(`create database ${db} owner atrium`)
    const at = `127.0.0.1:${cluster.port}`
    const url = (user: string, password: string, db: string) => `postgres://${user}:${password}@${at}/${db}`

    t.match(await postgresChecks(url('atrium', 'right-password', 'open'), quick), [{ status: 'pass' }])

    const noEntry = await postgresChecks(url('atrium', 'right-password', 'other'), quick)
    t.match(noEntry, [
      {
        id: 'postgres.connect',
        status: 'fail',
        found: `PostgreSQL at ${at} does not admit this client: no pg_hba.conf entry for host "127.0.0.1", user "atrium", database "other", no encryption`,
        fix: /^The password is not the problem: on the PostgreSQL server, add a pg_hba\.conf line admitting it \(host other atrium 127\.0\.0\.1\/32 scram-sha-256\) .*reload .*sslmode=require/,
      },
    ])
    t.notMatch(noEntry[0]!.found, /authentication failed/, 'not said as a wrong password')
    t.match(await postgresChecks(url('atrium', 'right-password', 'closed'), quick), [
      {
        status: 'fail',
        found:
          /does not admit this client: pg_hba\.conf rejects connection for host "127\.0\.0\.1", user "atrium", database "closed"/,
        fix: /^The password is not the problem: .*host closed atrium 127\.0\.0\.1\/32 scram-sha-256/,
      },
    ])

    const wrong = await postgresChecks(url('atrium', 'hunter2-wrong', 'open'), quick)
    t.match(wrong, [
      {
        id: 'postgres.connect',
        status: 'fail',
        found: `password authentication failed for user atrium at ${at}`,
        fix: /^Correct the password in DATABASE_URL, or the user .*pg_hba\.conf admits this client/,
      },
    ])
    t.notMatch(JSON.stringify(wrong), /hunter2-wrong/, 'the password is not in the check')
    t.match(await postgresChecks(url('nobody', 'x', 'trusted'), quick), [
      { status: 'fail', found: `the user nobody does not exist at ${at}`, fix: /CREATE ROLE "nobody" LOGIN/ },
    ])
  },
)

t.test('a PostgreSQL that answers with another error says it, with its SQLSTATE', async (t) => {
  const busy = await fakePostgres(t, '53300', 'sorry, too many clients already')
  t.match(await postgresChecks(`postgres://atrium@127.0.0.1:${busy}/atrium`, quick), [
    { status: 'fail', found: /refused: sorry, too many clients already \(SQLSTATE 53300\)/ },
  ])
})

t.test(
  'the real PostgreSQL passes; a role without CREATEROLE or CREATE on the schema fails; a missing database fails',
  { skip: !services.databaseUrl && 'TEST_DATABASE_URL is not set' },
  async (t) => {
    t.match(
      await postgresChecks(services.databaseUrl),
      passed('postgres.connect', 'postgres.version', 'postgres.privileges'),
    )
    const admin = postgres(services.databaseUrl, { max: 1, onnotice: () => {} })
    const role = `atrium_pf_${suffix()}`
    await admin.unsafe(`create role ${role} login password 'limited-password'`)
    // Teardowns run last-registered first: the database below (which holds a grant to the role) goes before the role.
    t.teardown(async () => {
      await admin.unsafe(`drop role if exists ${role}`)
      await admin.end()
    })
    const dbUrl = await freshDatabase(t)
    const url = new URL(dbUrl)
    url.username = role
    url.password = 'limited-password'
    const database = url.pathname.slice(1)
    t.match((await postgresChecks(url.toString()))[2], {
      id: 'postgres.privileges',
      status: 'fail',
      found: `user ${role} on ${database}: no CREATEROLE, no CREATE on schema public`,
      fix:
        `As a superuser, in database ${database}, run: ALTER ROLE "${role}" CREATEROLE; GRANT CREATE ON SCHEMA "public" TO "${role}"; ` +
        `(or, instead of CREATEROLE: CREATE ROLE atrium_app NOLOGIN; CREATE ROLE atrium_system NOLOGIN; GRANT atrium_app, atrium_system TO "${role}";)`,
    })
    // What the fix says to run makes the check pass.
    await admin.unsafe(`alter role ${role} createrole`)
    const inDb = postgres(dbUrl, { max: 1, onnotice: () => {} })
    await inDb.unsafe(`grant create on schema public to ${role}`)
    await inDb.end()
    t.match((await postgresChecks(url.toString()))[2], {
      status: 'pass',
      found: `user ${role} on ${database}: CREATEROLE, CREATE on schema public`,
    })
    url.pathname = `/atrium_no_such_db_${suffix()}`
    t.match(await postgresChecks(url.toString()), [
      { status: 'fail', found: /^the database atrium_no_such_db_\w+ does not exist/ },
    ])
  },
)

t.test(
  'the real Redis passes; a wrong password fails as such',
  { skip: !services.redisUrl && 'TEST_REDIS_URL is not set' },
  async (t) => {
    // Eviction is graded by the server's own setting: any grade.
    t.match(await redisChecks(services.redisUrl), [
      ...passed('redis.connect', 'redis.version'),
      { id: 'redis.eviction' },
    ])
    // A user of our own on the shared server, so that its default user and password stay untouched.
    const admin = new Redis(services.redisUrl)
    const user = `atrium-pf-${suffix()}`
    await admin.call('ACL', 'SETUSER', user, 'on', '>right-password', '+@all', '~*')
    t.teardown(async () => {
      await admin.call('ACL', 'DELUSER', user)
      admin.disconnect()
    })
    const url = new URL(services.redisUrl)
    url.username = user
    url.password = 'wrong-password'
    const wrong = await redisChecks(url.toString())
    t.match(wrong, [
      {
        id: 'redis.connect',
        status: 'fail',
        found: `authentication failed for user ${user} at ${where(services.redisUrl)}`,
        fix: /REDIS_URL/,
      },
    ])
    t.notMatch(JSON.stringify(wrong), /wrong-password/)
    url.password = 'right-password'
    t.match(await redisChecks(url.toString()), [{ status: 'pass' }, { status: 'pass' }, {}])
  },
)

t.test(
  'a password this Redis does not ask for is a warning in the check, and nothing is printed to the terminal',
  { skip: !services.redisUrl && 'TEST_REDIS_URL is not set' },
  async (t) => {
    const admin = new Redis(services.redisUrl)
    t.teardown(() => admin.disconnect())
    const [, requirepass] = (await admin.config('GET', 'requirepass')) as [string, string]
    if (requirepass) return t.pass('this Redis has a password of its own: nothing to show here')
    const printed = [t.capture(console, 'warn'), t.capture(console, 'error'), t.capture(console, 'log')]
    const url = new URL(services.redisUrl)
    url.password = 'not-needed'
    const r = await redisChecks(url.toString())
    t.match(r, [
      {
        id: 'redis.connect',
        status: 'warn',
        found: /asks for no password although REDIS_URL gives one/,
        fix: /Set a password on Redis/,
      },
      { status: 'pass' },
      {},
    ])
    t.notMatch(JSON.stringify(r), /not-needed/)
    t.same(
      printed.flatMap((p) => p()),
      [],
      "ioredis's own warning never reaches the terminal",
    )
  },
)

t.test(
  'the real S3 store passes the round trip on a bucket it creates; wrong credentials fail',
  { skip: !services.s3Endpoint && 'TEST_S3_ENDPOINT is not set' },
  async (t) => {
    const { bucket, target } = await realS3Target(t)
    t.match(await s3Checks(target), [
      {
        id: 's3.roundtrip',
        status: 'pass',
        found: `bucket ${bucket} at ${where(services.s3Endpoint)} (created): put, get, presigned get and delete work`,
      },
      { id: 's3.addressing', status: 'pass', found: 'path-style' },
    ])
    t.match(
      await s3Checks(target),
      [{ status: 'pass', found: /^bucket \S+ at \S+: put/ }, {}],
      'an existing bucket is used as it is',
    )
    t.same(await s3Client().listObjectsV2(bucket, '', true).toArray(), [], 'the test objects were deleted')
    const wrongSecret = await s3Checks({ ...target, secretKey: 'wrong-secret' })
    t.match(wrongSecret, [
      {
        status: 'fail',
        found: 'the store refused the credentials (SignatureDoesNotMatch) at the step: find the bucket',
        fix: /R2_SECRET_ACCESS_KEY/,
      },
    ])
    t.notMatch(JSON.stringify(wrongSecret), /wrong-secret/)
    t.match(await s3Checks({ ...target, accessKey: 'no-such-key' }), [
      { status: 'fail', found: /refused the credentials \(InvalidAccessKeyId\)/ },
    ])
  },
)

t.test(
  'a region store of REGION_STORES is checked as the default one, under its own ids and settings',
  { skip: !services.s3Endpoint && 'TEST_S3_ENDPOINT is not set' },
  async (t) => {
    const { target } = await realS3Target(t)
    t.match(await s3Checks(target, { region: 'eu-west' }), [
      { id: 'region.eu-west.roundtrip', title: 'Region eu-west store round trip', status: 'pass' },
      { id: 'region.eu-west.addressing', status: 'pass' },
    ])
    const wrong = await s3Checks({ ...target, secretKey: 'wrong-secret' }, { region: 'eu-west' })
    t.match(wrong, [
      {
        id: 'region.eu-west.roundtrip',
        status: 'fail',
        fix: 'Correct REGION_STORES["eu-west"].accessKeyId and .secretAccessKey',
      },
    ])
  },
)

t.test(
  'services that accept the connection and never answer fail at their deadline, saying so, with nothing left open',
  async (t) => {
    const silent = await silentServer(t)
    const deadline = { timeoutMs: 500 }
    const [pg] = await postgresChecks(
      silent.url('postgres').replace('postgres://', 'postgres://atrium:pw@') + '/atrium',
      deadline,
    )
    t.match(pg, { id: 'postgres.connect', status: 'fail', found: `no answer from 127.0.0.1:${silent.port} in 0.5 s` })
    const [redis] = await redisChecks(silent.url('redis'), deadline)
    t.match(redis, { id: 'redis.connect', status: 'fail', found: `no answer from 127.0.0.1:${silent.port} in 0.5 s` })
    const [s3] = await s3Checks(
      {
        endpoint: silent.url('http'),
        bucket: 'atrium',
        accessKey: 'atrium',
        secretKey: 'secret-key',
        region: 'us-east-1',
      },
      deadline,
    )
    t.match(s3, { id: 's3.roundtrip', status: 'fail', found: `no answer from 127.0.0.1:${silent.port} in 0.5 s` })
    t.ok(await silent.allClosed(), 'every connection closed by the checks')
  },
)

t.test('a password whose %-escape is broken is a failed check, not a crash that hides the other checks', async (t) => {
  t.match(await redisChecks('redis://:p%zz@127.0.0.1:1', quick), [
    { id: 'redis.connect', status: 'fail', found: /not reachable at 127\.0\.0\.1:1/ },
  ])
})

t.test(
  'a Redis that wants its password first: the database index of REDIS_URL is selected after it, and what fails later is named as itself',
  { skip: !findExecutable('redis-server') && 'needs redis-server (CI has it)' },
  async (t) => {
    const port = await freePort()
    const server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', 'first', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    )
    t.teardown(() => server.kill())
    const admin = new Redis(`redis://:first@127.0.0.1:${port}`, { retryStrategy: (n) => (n > 50 ? null : 100) })
    t.teardown(() => admin.disconnect())
    await admin.ping()
    t.match(await redisChecks(`redis://:first@127.0.0.1:${port}/2`, quick), [
      { status: 'pass' },
      { status: 'pass' },
      {},
    ])
    // A user that may not run INFO: refused for that, not reported as a wrong password (the NOAUTH a
    // SELECT before the AUTH would have drawn).
    await admin.call('ACL', 'SETUSER', 'bob', 'on', '>pw', '+@all', '-info', '~*')
    t.match(await redisChecks(`redis://bob:pw@127.0.0.1:${port}/2`, quick), [
      { id: 'redis.connect', status: 'fail', found: /the user may not run INFO/ },
    ])
  },
)

t.test(
  'a store in another region says which, with its message decoded (no &#39;), and the fix is the region setting',
  { skip: !findExecutable('minio') && 'needs the minio server (CI builds it; see .ci/run)' },
  async (t) => {
    // A MinIO of the test's own that says it is in eu-central-1, as a site's own store may be.
    const port = await freePort()
    const data = tempDir(t)
    const server = spawn(
      findExecutable('minio')!,
      ['server', data, '--address', `127.0.0.1:${port}`, '--console-address', '127.0.0.1:0', '--quiet'],
      {
        env: {
          ...process.env,
          MINIO_ROOT_USER: 'region-test',
          MINIO_ROOT_PASSWORD: 'region-test-secret',
          MINIO_SITE_REGION: 'eu-central-1',
        },
        stdio: 'ignore',
      },
    )
    // Gone before its folder is removed (teardowns run last in, first out).
    const exited = new Promise((r) => server.once('exit', r))
    t.teardown(async () => {
      server.kill()
      await exited
    })
    const endpoint = `http://127.0.0.1:${port}`
    for (
      let i = 0;
      i < 100 &&
      !(await fetch(`${endpoint}/minio/health/live`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    )
      await new Promise((r) => setTimeout(r, 100))
    const target = {
      endpoint,
      bucket: 'atrium',
      accessKey: 'region-test',
      secretKey: 'region-test-secret',
      region: 'us-east-1',
    }
    const wrong = await s3Checks(target)
    t.match(wrong, [
      {
        id: 's3.roundtrip',
        status: 'fail',
        // The bucket lookup meets the region error, or (on a MinIO still starting) answers
        // NoSuchBucket and the creation meets it: either step is named.
        found:
          /^the store is in region eu-central-1, not us-east-1, at the step: (find|create) the bucket \(The authorization header is malformed; the region is wrong; expecting 'eu-central-1'\.\)$/,
        fix: 'Set R2_REGION to eu-central-1',
      },
    ])
    t.notMatch(JSON.stringify(wrong), /&#\d+;|&#x|&apos;/, 'no XML character reference left')
    t.match(
      await s3Checks({ ...target, region: 'eu-central-1' }),
      [{ status: 'pass' }, { status: 'pass' }],
      'in its region the round trip passes',
    )
  },
)

t.test('XML character references in a store message are decoded; anything else is left as it is', async (t) => {
  t.equal(xmlText('expecting &#39;eu&#39; &#x27;x&#X27; &amp;&lt;&gt;&quot;&apos;'), `expecting 'eu' 'x' &<>"'`)
  t.equal(xmlText('&#1114112; &#0; &nbsp; & ;'), '&#1114112; &#0; &nbsp; & ;')
})
