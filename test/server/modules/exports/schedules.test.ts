// Scheduled exports into a bucket of the tenant's (a second bucket on the test's S3 store): the
// destination check at creation, the keys never shown, and two replicas (processes of their own)
// running a weekly schedule over ten weeks of an injected clock: ten exports, not twenty.
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { appOn } from '../../../helpers/app.js'
import { ipcChild, type IpcChild } from '../../../helpers/ipc.js'
import { configFrom, freshBucket, s3Client, services, testEnv } from '../../../helpers/platform.js'
import { unzip } from '../../../helpers/zip.js'
import { createLogger } from '../../../../server/logger.js'
import { openPlatform } from '../../../../server/platform/index.js'

const skip = !services.s3Endpoint
  ? 'needs an S3 store (TEST_S3_ENDPOINT) for the destination bucket'
  : !services.databaseUrl
    ? 'needs PostgreSQL (TEST_DATABASE_URL): replicas in processes of their own share it'
    : false
const REPLICA = fileURLToPath(new URL('../../../helpers/replica.ts', import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('scheduled exports', { skip }, async (t) => {
  // Loopback is where the test's S3 store is: the outbound policy must list it.
  const env = await testEnv(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
  const platform = await openPlatform(configFrom(env), createLogger('silent'), { migrate: true })
  t.teardown(() => platform.close())
  const clock = Date.parse('2026-11-30T12:00:00Z') // a Monday
  const h = await appOn(t, platform, { now: () => clock, jobs: false })
  const tn = await h.tenant('enterprise')
  await tn.call('POST', '/api/v1/projects', { name: 'Weekly' })
  const bucket = await freshBucket(t)
  const s3 = s3Client()
  await s3.makeBucket(bucket, 'us-east-1')
  const base = `/api/v1/platform/tenants/${tn.tenantId}/export/schedule`
  const destination = {
    s3Endpoint: services.s3Endpoint,
    s3Bucket: bucket,
    s3AccessKey: services.s3AccessKey,
    s3SecretKey: services.s3SecretKey,
    s3Prefix: 'atrium/weekly',
  }

  await t.test(
    'a destination the server cannot write to is refused at creation with the check that failed',
    async (t) => {
      const cases: [string, Record<string, string>, Record<string, unknown>][] = [
        ['a wrong access key', { s3AccessKey: 'not-a-key' }, { check: 'write', reason: 'InvalidAccessKeyId' }],
        ['a wrong secret key', { s3SecretKey: 'not-the-secret' }, { check: 'write', reason: 'SignatureDoesNotMatch' }],
        [
          'a bucket that does not exist',
          { s3Bucket: 'no-such-bucket-atrium' },
          { check: 'write', reason: 'NoSuchBucket' },
        ],
        [
          'an endpoint the outbound policy refuses',
          { s3Endpoint: 'http://169.254.169.254' },
          { reason: 'outbound_refused' },
        ],
        ['an endpoint that is not a URL', { s3Endpoint: 'minio:9000' }, {}],
      ]
      for (const [what, change, details] of cases) {
        const r = await tn.call('POST', base, { frequency: 'weekly', ...destination, ...change })
        t.equal(r.status, 400, what)
        t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
        t.match(r.body.error.details, details, what)
        t.notMatch(JSON.stringify(r.body), /not-the-secret|minioadmin|atrium-ci/, `${what}: no key in the answer`)
      }
      t.same((await tn.call('GET', base)).body.data, [], 'no schedule was made')
      const objects: string[] = []
      for await (const o of s3.listObjectsV2(bucket, '', true)) objects.push((o as { name: string }).name)
      t.same(objects, [], 'every probe object was deleted')
    },
  )

  const made = await tn.call('POST', base, { frequency: 'weekly', format: 'zip', ...destination })
  t.equal(made.status, 201, JSON.stringify(made.body))
  const schedule = made.body.data
  t.match(schedule, {
    frequency: 'weekly',
    destination: 's3',
    s3Bucket: bucket,
    s3Prefix: 'atrium/weekly/',
    lastRuns: [],
  })
  t.notMatch(JSON.stringify(made.body), new RegExp(services.s3SecretKey), 'the keys are never returned')
  const next = Date.parse(schedule.nextRunAt)
  t.equal(new Date(next).getUTCDay(), 0, 'weekly on Sunday')
  const [sealed] = await platform.db.system(
    (sql) => sql`select access_key_sealed, secret_key_sealed from export_schedules where id = ${schedule.scheduleId}`,
  )
  t.match(sealed!.secret_key_sealed, /^atrium:v1:/, 'sealed at rest')

  await t.test('two replicas, ten weeks of an injected clock: one export a week, ten in the bucket', async (t) => {
    const replicas = [replica(t, env, clock), replica(t, env, clock)]
    await Promise.all(replicas.map((r) => r.next((m) => m.ready)))
    for (let week = 0; week < 10; week++) {
      const slot = next + week * 7 * 86_400_000
      // Both replicas inside the week that follows the slot, at different times of it.
      const at = replicas.map(() => slot + 60_000 + Math.floor(Math.random() * 6 * 86_400_000))
      const answers = await Promise.all(
        replicas.map((r, i) => {
          r.send({ tick: at[i] })
          return r.next((m) => m.ticked === at[i] || m.error)
        }),
      )
      for (const a of answers) if (a.error) throw new Error(a.error)
      // The week's export is written before the clocks move on (its name carries its time).
      await until(`week ${week + 1}'s export`, async () => (await objects()).length === week + 1)
    }
    // (The slots' jobs themselves are swept a week after they complete: the runner's upkeep runs on the same clock.)
    const [runs] = await platform.db.system(
      (sql) => sql`select count(*)::int as n from tenant_exports where schedule_id = ${schedule.scheduleId}`,
    )
    t.equal(runs!.n, 10, 'the two replicas made ten exports between them, one per slot')
    const names = await objects()
    t.equal(names.length, 10, 'ten archives in the bucket, not twenty')
    t.ok(
      names.every((n) => new RegExp(`^atrium/weekly/export_${tn.tenantId}_\\d{8}T\\d{6}Z\\.zip$`).test(n)),
      'under the prefix, named as the specification says',
    )
    const zip = await unzip(Buffer.concat(await toArray(await s3.getObject(bucket, names[0]!))))
    t.match(JSON.parse(zip['projects/index.json']!), [{ name: 'Weekly' }])
    const shown = await tn.call('GET', `${base}/${schedule.scheduleId}`)
    t.equal(shown.body.data.lastRuns.length, 10)
    t.ok(
      shown.body.data.lastRuns.every(
        (r: { status: string; kind: string; size: number }) =>
          r.status === 'completed' && r.kind === 'scheduled' && r.size > 0,
      ),
      'each run completed, with its size',
    )
    for (const r of replicas) r.send({ stop: true })
    await Promise.all(replicas.map((r) => new Promise((resolve) => r.once('exit', resolve))))
  })

  await t.test('deleting the schedule stops its slots; its runs stay listed', async (t) => {
    t.equal((await tn.call('DELETE', `${base}/${schedule.scheduleId}`)).status, 204)
    t.equal((await tn.call('GET', `${base}/${schedule.scheduleId}`)).status, 404)
    t.equal(
      (
        await platform.db.system(
          (sql) => sql`select count(*)::int as n from job_schedules where name like ${'export:' + tn.tenantId + ':%'}`,
        )
      )[0]!.n,
      0,
    )
    const runs = await tn.call('GET', `/api/v1/platform/tenants/${tn.tenantId}/export?limit=50`)
    t.equal(runs.body.data.filter((r: { kind: string }) => r.kind === 'scheduled').length, 10)
  })

  async function objects(): Promise<string[]> {
    const out: string[] = []
    for await (const o of s3.listObjectsV2(bucket, 'atrium/weekly/', true)) out.push((o as { name: string }).name)
    return out.sort()
  }
})

type Msg = { ready?: number; ticked?: number; enqueued?: number; error?: string }

const replica = (tt: Test, env: Record<string, string>, now: number): IpcChild<Msg> =>
  ipcChild<Msg>(tt, REPLICA, { ...env, PATH: process.env.PATH ?? '', REPLICA_NOW: String(now) })

async function until(what: string, probe: () => Promise<boolean>, ms = 60_000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) if (await probe()) return
  throw new Error(`${what} did not happen within ${ms} ms`)
}

async function toArray(stream: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = []
  for await (const c of stream) out.push(c)
  return out
}
