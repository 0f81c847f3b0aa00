// Service checks against the real PostgreSQL, Redis and S3 store when TEST_* name them; a down
// service and the version thresholds everywhere; a too-old Redis through a fake that speaks RESP,
// since no old Redis can run here.
import { createServer, type AddressInfo, type Server } from 'node:net'
import t, { type Test } from 'tap'
import { Client } from 'minio'
import postgres from 'postgres'
import { Redis } from 'ioredis'
import {
  gradePostgresPrivileges, gradePostgresVersion, gradeRedisEviction, gradeRedisVersion, postgresChecks, redisChecks, s3Checks, where,
} from '../../../../installer/core/checks/services.js'
import { freshBucket, services, suffix } from '../../../helpers/platform.js'

async function listen(t: Test, server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => server.close())
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

t.test('versions are graded at, just under and just over the minimum', async (t) => {
  t.same([149999, 150000, 150001, 170004].map((n) => gradePostgresVersion(n, String(n)).status), ['fail', 'pass', 'pass', 'pass'])
  t.match(gradePostgresVersion(130004, '13.4'), { found: 'PostgreSQL 13.4', fix: /Upgrade PostgreSQL to 15/ })
  t.same(['6.2.14', '6.99.99', '7.0.0', '7.0.1', '7.2.4'].map((v) => gradeRedisVersion(v).status), ['fail', 'fail', 'pass', 'pass', 'pass'])
  t.equal(gradeRedisVersion('unknown').status, 'fail')
})

t.test('the migrations need CREATEROLE and CREATE on the database, or a superuser', async (t) => {
  const p = { user: 'atrium', database: 'atrium', superuser: false, createrole: true, createOnDb: true }
  t.equal(gradePostgresPrivileges(p).status, 'pass')
  t.equal(gradePostgresPrivileges({ ...p, createrole: false, createOnDb: false, superuser: true }).status, 'pass')
  t.match(gradePostgresPrivileges({ ...p, createrole: false }), { status: 'fail', fix: 'As a superuser run: ALTER ROLE "atrium" CREATEROLE;' })
  t.match(gradePostgresPrivileges({ ...p, createOnDb: false }), { status: 'fail', fix: /GRANT CREATE ON DATABASE "atrium" TO "atrium";/ })
})

t.test('eviction: noeviction passes, volatile-* warns, allkeys-* fails', async (t) => {
  t.same(['noeviction', 'volatile-lru', 'allkeys-lru', 'allkeys-random'].map((p) => gradeRedisEviction(p).status), ['pass', 'warn', 'fail', 'fail'])
  t.equal(gradeRedisEviction(null).status, 'warn')
})

t.test('a service that is down fails as not reachable, with host and port and no password', async (t) => {
  const port = await deadPort()
  const pg = await postgresChecks(`postgres://atrium:hunter2@127.0.0.1:${port}/atrium`, 2000)
  const redis = await redisChecks(`redis://:hunter2@127.0.0.1:${port}`, 2000)
  const s3 = await s3Checks({ endpoint: `http://127.0.0.1:${port}`, bucket: 'atrium-down', accessKey: 'k', secretKey: 'hunter2', region: 'us-east-1' }, 2000)
  for (const [name, r] of [['postgres', pg], ['redis', redis], ['s3', s3]] as const) {
    t.equal(r.length, 1, name)
    t.match(r[0], { status: 'fail', found: new RegExp(`not reachable at 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`), fix: /Start / }, name)
    t.notMatch(JSON.stringify(r), /hunter2/, `${name}: no password in the result`)
  }
  t.equal(where('postgres://u:p@db.internal:5433/x'), 'db.internal:5433')
})

t.test('a Redis older than 7 fails: a fake server that answers as Redis 6.2 does', async (t) => {
  // Enough of RESP for ioredis: every command is an array of bulk strings; INFO gets a bulk reply.
  const server = createServer((socket) => {
    socket.on('data', (data) => {
      for (const cmd of data.toString().split('*').filter(Boolean)) {
        const name = cmd.split('\r\n')[2]?.toUpperCase()
        if (name === 'INFO') {
          const info = '# Server\r\nredis_version:6.2.14\r\n# Memory\r\nmaxmemory_policy:allkeys-lru\r\n'
          socket.write(`$${Buffer.byteLength(info)}\r\n${info}\r\n`)
        } else socket.write('+OK\r\n')
      }
    })
  })
  const port = await listen(t, server)
  const r = await redisChecks(`redis://127.0.0.1:${port}`, 2000)
  t.match(r, [
    { id: 'redis.connect', status: 'pass' },
    { id: 'redis.version', status: 'fail', found: 'Redis 6.2.14' },
    { id: 'redis.eviction', status: 'fail', found: 'maxmemory-policy allkeys-lru' },
  ])
})

t.test('the real PostgreSQL passes; a role without CREATEROLE fails the privilege check', { skip: !services.databaseUrl && 'TEST_DATABASE_URL is not set' }, async (t) => {
  const ok = await postgresChecks(services.databaseUrl)
  t.match(ok, [{ id: 'postgres.connect', status: 'pass' }, { id: 'postgres.version', status: 'pass' }, { id: 'postgres.privileges', status: 'pass' }])
  const admin = postgres(services.databaseUrl, { max: 1, onnotice: () => {} })
  const role = `atrium_pf_${suffix()}`
  await admin.unsafe(`create role ${role} login password 'limited-password'`)
  t.teardown(async () => {
    await admin.unsafe(`drop role if exists ${role}`)
    await admin.end()
  })
  const url = new URL(services.databaseUrl)
  url.username = role
  url.password = 'limited-password'
  const limited = await postgresChecks(url.toString())
  t.match(limited[2], { id: 'postgres.privileges', status: 'fail', found: `user ${role}: no CREATEROLE, no CREATE on ${url.pathname.slice(1)}`, fix: new RegExp(`ALTER ROLE "${role}" CREATEROLE;`) })
  url.pathname = `/atrium_no_such_db_${suffix()}`
  t.match(await postgresChecks(url.toString()), [{ status: 'fail', found: /does not exist/ }])
})

t.test('the real Redis passes; a wrong password fails as such', { skip: !services.redisUrl && 'TEST_REDIS_URL is not set' }, async (t) => {
  t.match(await redisChecks(services.redisUrl), [{ id: 'redis.connect', status: 'pass' }, { id: 'redis.version', status: 'pass' }, { id: 'redis.eviction' }])
  // A user of our own on the shared server, so its default user and password stay untouched.
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
  t.match(wrong, [{ id: 'redis.connect', status: 'fail', found: /authentication failed/, fix: /REDIS_URL/ }])
  t.notMatch(JSON.stringify(wrong), /wrong-password/)
  url.password = 'right-password'
  t.match(await redisChecks(url.toString()), [{ status: 'pass' }])
})

t.test('the real S3 store passes the round trip on a bucket it creates; a wrong secret fails', { skip: !services.s3Endpoint && 'TEST_S3_ENDPOINT is not set' }, async (t) => {
  const bucket = await freshBucket(t)
  const target = { endpoint: services.s3Endpoint, bucket, accessKey: services.s3AccessKey, secretKey: services.s3SecretKey, region: 'us-east-1' }
  const url = new URL(services.s3Endpoint)
  const client = new Client({ endPoint: url.hostname, port: Number(url.port) || undefined, useSSL: url.protocol === 'https:', accessKey: services.s3AccessKey, secretKey: services.s3SecretKey, region: 'us-east-1' })
  t.match(await s3Checks(target), [
    { id: 's3.roundtrip', status: 'pass', found: new RegExp(`bucket ${bucket} .*put, get, presigned get and delete work`) },
    { id: 's3.addressing', status: 'pass', found: 'path-style' },
  ])
  t.ok(await client.bucketExists(bucket), 'the bucket was created')
  const objects = []
  for await (const o of client.listObjectsV2(bucket, '', true)) objects.push(o)
  t.same(objects, [], 'the test object was deleted')
  const wrong = await s3Checks({ ...target, secretKey: 'wrong-secret' })
  t.match(wrong, [{ status: 'fail', found: /refused the credentials/, fix: /R2_SECRET_ACCESS_KEY/ }])
})
