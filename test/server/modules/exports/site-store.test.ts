// Exports and scheduled exports into the site's own object store: a request without s3Endpoint (as
// the specification's fields for a schedule are) goes to the S3 store the site keeps its own objects
// in (R2_ENDPOINT), with the bucket and keys given, with or without a prefix, even though the
// outbound policy here refuses loopback, where that store is; another spelling of the same address
// is still judged by the policy. A site that keeps its files in a folder has no store to default to:
// VALIDATION_ERROR on body.s3Endpoint, and nothing is made.
import { createHash } from 'node:crypto'
import t, { type Test } from 'tap'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { freshBucket, s3Client, services } from '../../../helpers/platform.js'
import { portability } from '../../../helpers/portability.js'
import { unzip } from '../../../helpers/zip.js'

const withS3 = services.s3Endpoint ? false : "needs an S3 store (TEST_S3_ENDPOINT): the site's own store"
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
let now = Date.parse('2026-12-01T00:30:00Z')

async function objectsIn(bucket: string): Promise<{ name: string; size: number }[]> {
  const out: { name: string; size: number }[] = []
  for await (const o of s3Client().listObjectsV2(bucket, '', true)) out.push(o as { name: string; size: number })
  return out.sort((a, b) => a.name.localeCompare(b.name))
}

async function read(bucket: string, key: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of await s3Client().getObject(bucket, key)) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

/** A new bucket of the test's store, made. */
async function madeBucket(t: Test): Promise<string> {
  const bucket = await freshBucket(t)
  await s3Client().makeBucket(bucket, 'us-east-1')
  return bucket
}

interface Run {
  status: string
  error: unknown
  location: { provider: string; endpoint: string; bucket: string; key: string }
  size: number
  checksum: string
}

/**
 * A run completed into `bucket` of the site's store at `{prefix}export_{tenantId}_{timestamp}.zip`, the
 * bucket's only object (no probe left), and that object is the size and checksum the run recorded and
 * this tenant's export.
 */
async function landed(t: Test, run: Run, o: { site: string; bucket: string; prefix: string; tenantId: string }) {
  t.equal(run.status, 'completed', JSON.stringify(run.error))
  t.match(run.location, { provider: 's3', endpoint: o.site, bucket: o.bucket })
  t.match(run.location.key, new RegExp(`^${o.prefix}export_${o.tenantId}_\\d{8}T\\d{6}Z\\.zip$`), 'the documented key')
  t.same(
    (await objectsIn(o.bucket)).map((x) => x.name),
    [run.location.key],
    'the archive alone in the bucket',
  )
  const bytes = await read(o.bucket, run.location.key)
  t.equal(bytes.length, run.size, 'the object is the size the run recorded')
  t.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, run.checksum, 'and its checksum')
  const zip = await unzip(bytes)
  t.match(JSON.parse(zip['metadata.json']!), { format: 'atrium.tenant-export', tenantId: o.tenantId })
}

t.test("into the site's own store, without s3Endpoint", { skip: withS3 }, async (t) => {
  // No OUTBOUND_ALLOWED_NETWORKS: loopback, where the test's store listens, is refused to any other endpoint.
  const h = await testApp(t, {}, { now: () => now, jobs: { pollMs: 50, scheduleTickMs: 3_600_000 } })
  const p = portability(h)
  const site = new URL(services.s3Endpoint).origin
  const tn = await h.tenant('enterprise')
  await tn.call('POST', '/api/v1/projects', { name: 'Kept' })
  const bucket = await madeBucket(t)
  const schedules = `/api/v1/platform/tenants/${tn.tenantId}/export/schedule`
  const keys = { s3AccessKey: services.s3AccessKey, s3SecretKey: services.s3SecretKey }

  /** Runs a schedule's next slot on the app's job runner (the clock moved to it) and answers its run once ended. */
  async function runSlot(schedule: { scheduleId: string; nextRunAt: string }) {
    now = Date.parse(schedule.nextRunAt) + 60_000
    await h.app.jobs.tickSchedules()
    h.app.jobs.kick()
    for (let i = 0; i < 600; i++) {
      const [run] = (await tn.call('GET', `${schedules}/${schedule.scheduleId}`)).body.data.lastRuns
      if (run && (run.status === 'completed' || run.status === 'failed')) return run
      await sleep(50)
    }
    throw new Error('the slot did not run')
  }

  await t.test(
    "the specification's fields for a schedule: made against the site's store, its run lands there",
    async (t) => {
      const body = {
        frequency: 'weekly',
        format: 'zip',
        destination: 's3',
        s3Bucket: bucket,
        s3Prefix: 'atrium/weekly',
        ...keys,
      }
      const made = await tn.call('POST', schedules, body)
      t.equal(made.status, 201, JSON.stringify(made.body))
      t.match(made.body.data, {
        frequency: 'weekly',
        format: 'zip',
        destination: 's3',
        provider: 's3',
        s3Endpoint: site,
        s3Region: 'us-east-1',
        s3Bucket: bucket,
        s3Prefix: 'atrium/weekly/',
      })
      t.notMatch(JSON.stringify(made.body), new RegExp(services.s3SecretKey), 'the keys are never returned')
      t.same(await objectsIn(bucket), [], 'the probe object was deleted')
      await landed(t, await runSlot(made.body.data), { site, bucket, prefix: 'atrium/weekly/', tenantId: tn.tenantId })
      t.equal((await tn.call('DELETE', `${schedules}/${made.body.data.scheduleId}`)).status, 204)
    },
  )

  await t.test('without s3Prefix: the probe and the archive go at the top of the bucket', async (t) => {
    const other = await madeBucket(t)
    const made = await tn.call('POST', schedules, { frequency: 'weekly', destination: 's3', s3Bucket: other, ...keys })
    t.equal(made.status, 201, JSON.stringify(made.body))
    t.match(made.body.data, { s3Endpoint: site, s3Bucket: other, s3Prefix: '' })
    await landed(t, await runSlot(made.body.data), { site, bucket: other, prefix: '', tenantId: tn.tenantId })
    t.equal((await tn.call('DELETE', `${schedules}/${made.body.data.scheduleId}`)).status, 204)
  })

  await t.test('an s3 export without s3Endpoint or s3Prefix', async (t) => {
    const other = await madeBucket(t)
    const { job } = await p.exported(tn.call, tn.tenantId, { destination: 's3', s3Bucket: other, ...keys })
    t.match(job, { kind: 'manual', destination: 's3', downloadUrl: null })
    await landed(t, job, { site, bucket: other, prefix: '', tenantId: tn.tenantId })
  })

  await t.test(
    'the site’s address given as s3Endpoint is the same store; another spelling is judged by the policy',
    async (t) => {
      const other = await freshBucket(t)
      await s3Client().makeBucket(other, 'us-east-1')
      const given = await tn.call('POST', schedules, {
        frequency: 'daily',
        s3Endpoint: services.s3Endpoint,
        s3Bucket: other,
        ...keys,
      })
      t.equal(given.status, 201, JSON.stringify(given.body))
      t.equal(given.body.data.s3Endpoint, site)
      t.equal((await tn.call('DELETE', `${schedules}/${given.body.data.scheduleId}`)).status, 204)
      const url = new URL(services.s3Endpoint)
      const aliased = `${url.protocol}//localhost:${url.port}`
      const refused = await tn.call('POST', schedules, {
        frequency: 'daily',
        s3Endpoint: aliased,
        s3Bucket: other,
        ...keys,
      })
      t.equal(refused.status, 400)
      t.equal(refused.body.error.code, 'VALIDATION_ERROR')
      t.match(refused.body.error.details, { reason: 'outbound_refused', errors: [{ field: 'body.s3Endpoint' }] })
    },
  )

  await t.test('wrong keys or a missing bucket in the site’s store are refused with the store’s reason', async (t) => {
    const cases: [string, Record<string, string>, string, string][] = [
      ['a wrong secret', { s3SecretKey: 'not-the-secret' }, 'body.s3AccessKey', 'SignatureDoesNotMatch'],
      ['a wrong access key', { s3AccessKey: 'not-a-key' }, 'body.s3AccessKey', 'InvalidAccessKeyId'],
      ['a bucket that is not there', { s3Bucket: 'no-such-bucket-site' }, 'body.s3Bucket', 'NoSuchBucket'],
    ]
    for (const [what, change, field, reason] of cases) {
      for (const [url, body] of [
        [schedules, { frequency: 'weekly', s3Bucket: bucket, ...keys, ...change }],
        [`/api/v1/platform/tenants/${tn.tenantId}/export`, { destination: 's3', s3Bucket: bucket, ...keys, ...change }],
      ] as const) {
        const r = await tn.call('POST', url, body)
        t.equal(r.status, 400, `${what}: ${url}`)
        t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
        t.match(r.body.error.details, { check: 'write', reason, errors: [{ field }] }, what)
        t.notMatch(JSON.stringify(r.body), /not-the-secret/, `${what}: no key in the answer`)
      }
    }
    t.same((await tn.call('GET', schedules)).body.data, [], 'no schedule was made')
  })
})

t.test('a site that keeps its files in a folder has no store to default to', async (t) => {
  const h: TestApp = await testApp(t, { R2_ENDPOINT: '' })
  const tn = await h.tenant('enterprise')
  const fields = {
    s3Bucket: 'acme-atrium',
    s3Prefix: 'atrium/weekly',
    s3AccessKey: 'AKIAEXAMPLE',
    s3SecretKey: 'a-secret-never-shown',
  }
  const cases: [string, string, Record<string, unknown>][] = [
    [
      'a schedule',
      `/api/v1/platform/tenants/${tn.tenantId}/export/schedule`,
      { frequency: 'weekly', format: 'zip', destination: 's3', ...fields },
    ],
    ['an s3 export', `/api/v1/platform/tenants/${tn.tenantId}/export`, { destination: 's3', ...fields }],
  ]
  for (const [what, url, body] of cases) {
    const r = await tn.call('POST', url, body)
    t.equal(r.status, 400, what)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
    t.match(
      r.body.error.details,
      {
        rule: 'no-site-store',
        errors: [{ field: 'body.s3Endpoint', message: /no object store of its own to default to/ }],
      },
      what,
    )
    t.notMatch(JSON.stringify(r.body), /a-secret-never-shown/, `${what}: no key in the answer`)
  }
  t.same((await tn.call('GET', cases[0]![1]!)).body.data, [], 'no schedule was made')
  t.same((await tn.call('GET', cases[1]![1]!)).body.data, [], 'no export was queued')
  const missing = await tn.call('POST', cases[0]![1]!, {
    frequency: 'weekly',
    s3Bucket: 'acme-atrium',
    s3AccessKey: 'AKIAEXAMPLE',
  })
  t.equal(missing.status, 400, 'the keys are still required')
  t.match(missing.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'body.s3SecretKey' }] } })
})
