// The time the license is judged by: never earlier than the database's clock, the installation's
// high-water mark, or a later time already seen (carried on the monotonic clock). The last test runs
// the server itself under libfaketime (Debian's faketime package) with its clock 90 days
// behind, as a site that sets its clock back to revive an expired license would.
import t from 'tap'
import {
  checkClock,
  CLOCK_TOLERANCE_MS,
  clockLag,
  readClock,
  trustedTime,
  writeMark,
} from '../../../server/platform/trusted-time.js'
import { finished, serverProcessOf } from '../../helpers/cli.js'
import { captureLog } from '../../helpers/log.js'
import {
  adminTrusting,
  clockSetBack,
  DAY,
  needsFaketime,
  spawnTrusting,
  testLicense,
  testVendor,
} from '../../helpers/license.js'
import { services, testEnv, testPlatform, unmigratedEmbeddedDb } from '../../helpers/platform.js'

/** A clock and a monotonic clock the test moves by hand. */
function clocks(start: number) {
  const c = { wall: start, mono: 1_000 }
  return {
    c,
    time: trustedTime(
      () => c.wall,
      () => c.mono,
    ),
  }
}

t.test('a reading ahead of the process clock is believed, carried forward, and says where it came from', async (t) => {
  const { c, time } = clocks(Date.UTC(2026, 0, 1))
  t.equal(time.source(), 'process')
  const database = c.wall + 90 * DAY
  t.equal(time.observe({ database, mark: null }), 90 * DAY)
  t.equal(time.now(), database)
  t.equal(time.source(), 'database')
  c.wall += 1000
  c.mono += 1000
  t.equal(time.now(), database + 1000, 'the later time moves on with the monotonic clock')
  t.equal(time.behindMs(), 90 * DAY)
  t.equal(
    time.observe({ database: c.wall, mark: database + 5 * DAY }),
    95 * DAY - 1000,
    'a mark later than the database wins',
  )
  t.equal(time.source(), 'mark')
})

t.test('a clock set back while the process runs is not believed', async (t) => {
  const { c, time } = clocks(Date.UTC(2026, 5, 1))
  const before = time.now()
  c.wall -= 30 * DAY
  c.mono += 60_000
  t.equal(time.now(), before + 60_000)
  t.equal(time.behindMs(), 30 * DAY + 60_000)
  t.equal(time.source(), 'process', 'no reading said otherwise: the lag is the process clock against itself')
})

t.test(
  'a reading behind the process clock changes nothing; drift within the tolerance is the process clock',
  async (t) => {
    const { c, time } = clocks(Date.UTC(2026, 5, 1))
    t.equal(time.observe({ database: c.wall - DAY, mark: c.wall - 2 * DAY }), 0)
    t.equal(time.now(), c.wall)
    time.observe({ database: c.wall + CLOCK_TOLERANCE_MS - 1, mark: null })
    t.equal(time.source(), 'process')
    const log = captureLog()
    clockLag(log.log, time)
    t.same(log.lines, [], 'drift is not worth a warning')
  },
)

t.test('the high-water mark is raised, never lowered, and a mark ahead of both clocks decides', async (t) => {
  const platform = await testPlatform(t)
  const { db } = platform
  const opened = await db.system(readClock)
  t.ok(
    opened.marked && opened.mark !== null && Math.abs(opened.mark - Date.now()) < 60_000,
    'opening the platform wrote the mark',
  )
  const ahead = Date.now() + 10 * DAY
  await db.system((sql) => writeMark(sql, ahead))
  await db.system((sql) => writeMark(sql, Date.now()))
  t.equal((await db.system(readClock)).mark, ahead, 'an earlier time does not lower it')

  const time = trustedTime()
  const behind = await checkClock(db, time)
  t.ok(behind > 10 * DAY - 60_000 && behind <= 10 * DAY, `${behind} ms behind`)
  t.equal(time.source(), 'mark')
  const log = captureLog()
  clockLag(log.log, time)
  t.match(log.lines, [
    {
      level: 40,
      clock: { source: 'mark' },
      msg: /^This machine's clock is 9 day\(s\) behind the latest time this installation recorded: the license is judged by the later time/,
    },
  ])
})

t.test('before the migrations ran (no clock_marks) the database clock serves alone', async (t) => {
  const platform = await testPlatform(t)
  await platform.db.sql`drop table clock_marks`
  const time = trustedTime(() => Date.now() - 3 * DAY)
  const behind = await checkClock(platform.db, time)
  t.ok(behind > 3 * DAY - 60_000, 'the database clock was read')
  t.equal(time.source(), 'database')
})

// A license that ended, grace and all, 30 days ago; 90 days ago it was valid for a month more.
const vendor = testVendor()
const expiredKey = () =>
  testLicense(vendor, { issuedAt: new Date(Date.now() - 200 * DAY), expiresAt: new Date(Date.now() - 60 * DAY) })

t.test(
  'with the server clock set back 90 days by faketime, an expired license keeps the API read-only',
  {
    skip:
      needsFaketime() ||
      ((!services.databaseUrl || !services.redisUrl || !services.s3Endpoint) &&
        'needs TEST_DATABASE_URL, TEST_REDIS_URL and TEST_S3_ENDPOINT (a production server)'),
  },
  async (t) => {
    // Only the wall clock moves, as with `date -s`: no one can set the monotonic clock back.
    const env = await testEnv(t, { NODE_ENV: 'production', LICENSE_KEY: await expiredKey(), LOG_LEVEL: 'info' })
    const behind = { ...env, ...clockSetBack(90) }
    const created = await adminTrusting(vendor, ['create-tenant', '--name', 'Set back'], env)
    t.equal(created.code, 0, created.stderr)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }

    // The control: faketime works, and this clock alone would call the license valid, which is said unconfirmed.
    const alone = await finished(spawnTrusting(vendor, ['license'], { ...behind, DATABASE_URL: '' }))
    t.match(
      JSON.parse(alone.stdout),
      { status: 'unconfirmed', statusByThisClock: 'valid', clock: { judgedBy: 'process', behindSeconds: 0 } },
      alone.stderr,
    )
    const judged = await finished(spawnTrusting(vendor, ['license'], behind))
    t.match(
      JSON.parse(judged.stdout),
      { status: 'expired', readOnly: true, clock: { judgedBy: 'database' } },
      'admin license reads the database clock as the server does',
    )

    const server = await serverProcessOf(t, spawnTrusting(vendor, ['serve'], behind))
    const write = await server.call(apiKey, 'POST', '/api/v1/projects', { name: 'revived?' })
    t.equal(write.status, 403)
    t.equal(write.body.error.code, 'FORBIDDEN')
    t.equal(write.body.error.details.reason, 'license_expired')
    const read = await server.call(apiKey, 'GET', '/api/v1/projects')
    t.equal(read.status, 200, 'reads stay open')
    const metrics = await (await fetch(`${server.base}/metrics`)).text()
    const lag = Number(/^atrium_clock_behind_seconds (\d+)/m.exec(metrics)?.[1])
    t.ok(lag > 89 * 86_400 && lag < 91 * 86_400, `atrium_clock_behind_seconds ${lag}`)
    server.child.kill('SIGTERM')
    const { stderr, stdout } = await server.done
    t.match(
      stdout,
      /"level":40,.*"clock":\{"behindSeconds":\d+,"source":"database"\}/,
      'the log says so, with the lag in seconds',
    )
    t.match(
      stderr,
      /^This machine's clock is (89|90) day\(s\) behind the database's clock: the license is judged by the later time/m,
      'the start-up banner says so',
    )
    t.match(stderr, /Atrium is read-only until the license is renewed/)
  },
)

t.test(
  "before the migrations ran, the check reads the database's clock alone, without the roles the migrations make",
  async (t) => {
    const fresh = await unmigratedEmbeddedDb(t)
    const { c, time } = clocks(Date.now() - 90 * DAY)
    const behind = await checkClock(fresh, time)
    t.ok(behind > 89 * DAY, 'the database clock was believed')
    t.equal(time.source(), 'database')
    t.ok(c.wall < time.now())
  },
)
