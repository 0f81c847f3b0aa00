// Customer-owned storage (BYOS) against a real MinIO: the validation's checks (good keys pass every
// one; a wrong secret, a missing bucket, a closed port and an address the outbound policy refuses
// each fail at the right check with a fix), the plan gate, keys never shown, and a tenant switched
// from platform storage to its own and back: every earlier file and backup still downloads with
// its checksum.
import { createHash } from 'node:crypto'
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { freePort, freshBucket, s3Client, services } from '../../../helpers/platform.js'
import { portability } from '../../../helpers/portability.js'
import { hostileStore } from '../../../helpers/hostile-store.js'
import { byosFields, holdsBackupAndExport, ownStoreTurning } from '../../../helpers/own-store.js'

const skip = services.s3Endpoint
  ? false
  : 'needs an S3 store (TEST_S3_ENDPOINT): the tenant’s own store is a bucket of it'

t.test('BYOS', { skip }, async (t) => {
  // The store is on loopback, which the outbound policy refuses unless it is listed.
  const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
  const own = await freshBucket(t)
  await s3Client().makeBucket(own, 'us-east-1')
  const good = byosFields({ endpoint: services.s3Endpoint, bucket: own })
  const tn = await h.tenant('enterprise')
  const storage = `/api/v1/regions/storage/${tn.tenantId}`

  await t.test('validate: good keys pass every check, in order, and nothing is left in the bucket', async (t) => {
    const r = await tn.call('POST', `${storage}/validate`, good)
    t.equal(r.status, 200, JSON.stringify(r.body))
    t.equal(r.body.data.valid, true)
    t.same(
      r.body.data.checks.map((c: { id: string }) => c.id),
      ['endpoint', 'outbound', 'reachable', 'tls', 'credentials', 'bucket', 'write', 'read', 'delete', 'region'],
    )
    t.same(
      r.body.data.checks
        .filter((c: { status: string }) => c.status !== 'pass')
        .map((c: { id: string; status: string }) => `${c.id}:${c.status}`),
      ['tls:warn'],
      'every check passes; TLS warns, as the test store speaks http',
    )
    const left: string[] = []
    for await (const o of s3Client().listObjectsV2(own, '', true)) left.push((o as { name: string }).name)
    t.same(left, [], 'the probe is gone')
    t.notMatch(JSON.stringify(r.body), new RegExp(services.s3SecretKey), 'no key in the answer')
  })

  await t.test('validate: each wrong store fails at its check, with a fix', async (t) => {
    const closed = await freePort()
    const cases: [string, Record<string, string>, string][] = [
      ['a wrong secret', { byosSecretKey: 'not-the-secret' }, 'credentials'],
      ['a bucket that is not there', { byosBucket: 'no-such-bucket-byos' }, 'bucket'],
      ['a closed port', { byosEndpoint: `http://127.0.0.1:${closed}` }, 'reachable'],
      ['an address the outbound policy refuses', { byosEndpoint: 'http://169.254.169.254' }, 'outbound'],
      ['an endpoint that is not a URL', { byosEndpoint: 'minio:9000' }, 'endpoint'],
    ]
    for (const [what, change, failing] of cases) {
      const r = await tn.call('POST', `${storage}/validate`, { ...good, ...change })
      t.equal(r.status, 200, what)
      t.equal(r.body.data.valid, false, what)
      const last = r.body.data.checks.at(-1)
      t.match(last, { id: failing, status: 'fail', fix: /\S/ }, `${what}: fails at ${failing}, with a fix`)
      t.ok(
        r.body.data.checks.slice(0, -1).every((c: { status: string }) => c.status !== 'fail'),
        `${what}: the checks before it did not fail`,
      )
    }
  })

  await t.test(
    'validate takes the PUT body: the object a PUT saves is checked, and fails where the PUT fails',
    async (t) => {
      const ids = [
        'endpoint',
        'outbound',
        'reachable',
        'tls',
        'credentials',
        'bucket',
        'write',
        'read',
        'delete',
        'region',
      ]
      const put = { storageMode: 'byos', ...good }
      const r = await tn.call('POST', `${storage}/validate`, put)
      t.equal(r.status, 200, JSON.stringify(r.body))
      t.equal(r.body.data.valid, true)
      t.same(
        r.body.data.checks.map((c: { id: string }) => c.id),
        ids,
      )
      const withRegion = await tn.call('POST', `${storage}/validate`, { ...put, platformRegion: 'us-east' })
      t.equal(withRegion.body.data.valid, true)
      t.same(
        withRegion.body.data.checks.map((c: { id: string }) => c.id),
        [...ids, 'platform-region'],
        'a platformRegion is checked too: the PUT changes the primary region',
      )
      const away = await tn.call('POST', `${storage}/validate`, { ...put, platformRegion: 'ap-east' })
      t.match(away.body.data, { valid: false })
      t.match(away.body.data.checks.at(-1), { id: 'platform-region', status: 'fail', found: /region-unavailable/ })
      const wrong = { ...put, byosSecretKey: 'not-the-secret' }
      const checked = await tn.call('POST', `${storage}/validate`, wrong)
      t.match(checked.body.data, { valid: false })
      t.match(checked.body.data.checks.at(-1), { id: 'credentials', status: 'fail' })
      const refused = await tn.call('PUT', storage, wrong)
      t.equal(refused.status, 400)
      t.match(
        refused.body.error.details,
        { rule: 'store-check', check: 'credentials' },
        'the PUT fails at the same check',
      )
      t.notMatch(JSON.stringify([r.body, checked.body]), /not-the-secret/, 'no key in the answers')
      t.equal((await tn.call('GET', storage)).body.data.storageMode, 'platform', 'validating saved nothing')
    },
  )

  await t.test('the plan gate: only Enterprise keeps its objects in a store of its own', async (t) => {
    for (const plan of ['free', 'pro', 'growth'] as const) {
      const other = await h.tenant(plan)
      const put = await other.call('PUT', `/api/v1/regions/storage/${other.tenantId}`, { storageMode: 'byos', ...good })
      t.equal(put.status, 403, plan)
      t.match(put.body.error.details, { feature: 'byos', reason: 'plan', requiredPlan: 'enterprise' })
      t.equal(
        (await other.call('POST', `/api/v1/regions/storage/${other.tenantId}/validate`, good)).status,
        403,
        `${plan}: validate too`,
      )
      t.equal((await other.call('GET', `/api/v1/regions/storage/${other.tenantId}`)).body.data.storageMode, 'platform')
    }
  })

  await t.test(
    'switching to its own store and back: every earlier file and backup still downloads with its checksum',
    async (t) => {
      const p = portability(h)
      const project = (await tn.call('POST', '/api/v1/projects', { name: 'Moves' })).body.data
      const put = (path: string, content: string) =>
        tn.call('PUT', `/api/v1/projects/${project.id}/files/${path}`, content, { 'content-type': 'text/plain' })
      const backup = async () =>
        (await tn.call('POST', `/api/v1/projects/${project.id}/backup`, { includeHistory: true })).body.data
      const objectsIn = async (bucket: string) => {
        const out: string[] = []
        for await (const o of s3Client().listObjectsV2(bucket, `tenants/${tn.tenantId}/`, true))
          out.push((o as { name: string }).name)
        return out
      }

      await put('a.txt', 'on platform storage')
      const b1 = await backup()

      const wrong = await tn.call('PUT', storage, { storageMode: 'byos', ...good, byosSecretKey: 'not-the-secret' })
      t.equal(wrong.status, 400, 'a store that fails a check is refused')
      t.match(wrong.body.error.details, { rule: 'store-check', check: 'credentials' })
      t.equal((await tn.call('GET', storage)).body.data.storageMode, 'platform', 'and nothing changed')

      const switched = await tn.call('PUT', storage, { storageMode: 'byos', ...good })
      t.equal(switched.status, 200, JSON.stringify(switched.body))
      t.match(switched.body.data, {
        storageMode: 'byos',
        byosBucket: own,
        byosEndpoint: services.s3Endpoint,
        byosAccessKey: { configured: true },
        byosSecretKey: { configured: true },
      })
      t.notMatch(JSON.stringify(switched.body), new RegExp(services.s3SecretKey), 'keys never returned')
      const [sealed] = await h.platform.db.system(
        (sql) => sql`select byos_secret_key_sealed from tenant_storage where tenant_id = ${tn.tenantId}`,
      )
      t.match(sealed!.byos_secret_key_sealed, /^atrium:v1:/, 'sealed at rest')
      t.match((await tn.call('GET', '/api/v1/routing-info')).body.data, { storageMode: 'byos', store: { bucket: own } })

      await put('c.txt', 'in its own store')
      const b2 = await backup()
      const exported = await p.exported(tn.call, tn.tenantId, { include: ['projects'] })
      t.equal(exported.job.status, 'completed')
      const inOwn = await objectsIn(own)
      t.ok(
        inOwn.some((k) => k.endsWith(createHash('sha256').update('in its own store').digest('hex'))),
        'the new file is in its store',
      )
      holdsBackupAndExport(t, inOwn, 'its own store')

      const back = await tn.call('PUT', storage, { storageMode: 'platform' })
      t.equal(back.status, 200)
      t.match(
        back.body.data,
        { storageMode: 'platform', byosBucket: own, byosAccessKey: { configured: true } },
        'its own store is remembered: what is there stays readable',
      )
      await put('d.txt', 'on platform storage again')
      t.equal((await objectsIn(own)).length, inOwn.length, 'nothing new in its store')

      for (const [path, content] of [
        ['a.txt', 'on platform storage'],
        ['c.txt', 'in its own store'],
        ['d.txt', 'on platform storage again'],
      ]) {
        t.equal(
          (await tn.call('GET', `/api/v1/projects/${project.id}/files/${path}`)).raw.toString(),
          content,
          `${path} reads`,
        )
      }
      for (const [name, b] of [
        ['the backup before the switch', b1],
        ['the backup in its own store', b2],
      ]) {
        const zip = await p.download(b.downloadUrl)
        t.equal(
          `sha256:${createHash('sha256').update(zip).digest('hex')}`,
          b.checksum,
          `${name} downloads with its checksum`,
        )
      }
      const again = await tn.call('GET', `/api/v1/platform/tenants/${tn.tenantId}/export/${exported.job.exportId}`)
      const zip = await p.download(again.body.data.downloadUrl)
      t.equal(
        `sha256:${createHash('sha256').update(zip).digest('hex')}`,
        exported.job.checksum,
        'the export in its own store downloads too',
      )
    },
  )
})

t.test(
  'validate against a store answering a 200 MB error body: the check fails ResponseTooLarge, read no further',
  async (t) => {
    // found by the second hardening round: 20 MB answers grew the server by 560 MB, 200 MB killed it
    const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })
    const tn = await h.tenant('enterprise')
    const store = await hostileStore(t, { mode: 'huge-error', bytes: 200 * 1024 * 1024 })
    const body = byosFields({
      endpoint: store.url,
      bucket: 'hostile-bucket',
      accessKey: 'key-id',
      secretKey: 'secret-value',
    })
    const r = await tn.call('POST', `/api/v1/regions/storage/${tn.tenantId}/validate`, body)
    t.equal(r.status, 200)
    t.equal(r.body.data.valid, false)
    t.match(r.body.data.checks.at(-1), { id: 'write', status: 'fail', found: 'ResponseTooLarge' })
    t.ok(store.written < 32 * 1024 * 1024, `the store wrote ${store.written} bytes before the server hung up`)
    const put = await tn.call('PUT', `/api/v1/regions/storage/${tn.tenantId}`, { storageMode: 'byos', ...body })
    t.equal(put.status, 400, 'such a store is refused')
    t.match(put.body.error.details, { rule: 'store-check', check: 'write' })
  },
)

t.test(
  'a store that validated and turns hostile later: file writes and reads answer 503, the process serves on',
  { skip },
  async (t) => {
    const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32', STORAGE_TIMEOUT_SECONDS: '2' })
    const { store, settings: byos } = await ownStoreTurning(t)
    const tn = await h.tenant('enterprise')
    t.equal(
      (await tn.call('PUT', `/api/v1/regions/storage/${tn.tenantId}`, byos)).status,
      200,
      'validated while it behaved',
    )
    const project = (await tn.call('POST', '/api/v1/projects', { name: 'turned' })).body.data
    const file = `/api/v1/projects/${project.id}/files/a.txt`
    t.equal((await tn.call('PUT', file, 'stored while it behaved', { 'content-type': 'text/plain' })).status, 201)

    for (const mode of ['huge-error', 'huge-object', 'silent'] as const) {
      store.mode = mode
      const write = await tn.call('PUT', `/api/v1/projects/${project.id}/files/b.txt`, 'written while it misbehaves', {
        'content-type': 'text/plain',
      })
      t.equal(write.status, 503, `${mode}: a write is 503`)
      t.equal(write.body.error.code, 'SERVICE_UNAVAILABLE')
      const read = await tn.call('GET', file)
      t.equal(read.status, 503, `${mode}: a read is 503`)
      t.equal((await tn.call('GET', '/api/v1/projects')).status, 200, `${mode}: the rest of the API serves on`)
    }
    t.ok(store.written < 64 * 1024 * 1024, `the store wrote ${store.written} bytes in all, not 200 MB an answer`)
    store.mode = 'forward'
    t.equal((await tn.call('GET', file)).raw.toString(), 'stored while it behaved', 'back to normal, the file reads')
    const files = (await tn.call('GET', `/api/v1/projects/${project.id}/files`)).body.data.map(
      (f: { path: string }) => f.path,
    )
    t.same(files, ['a.txt'], 'no write half made')
  },
)
