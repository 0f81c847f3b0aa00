// Regions and regional preferences: the deployment's regions (the default store, and a second bucket
// of the test's S3 store as eu-west), the rules of a change each naming itself, the plan gates, and
// residency enforced: a residency tenant's files, backups and exports land only in its region's
// bucket, while a tenant without residency stays in the default one, and what was stored before a
// move stays readable.
import { createHash } from 'node:crypto'
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { freePort, freshBucket, s3Client, services } from '../../../helpers/platform.js'
import { portability } from '../../../helpers/portability.js'
import { holdsBackupAndExport } from '../../../helpers/own-store.js'
import { operatorKey } from '../../../helpers/operator.js'

const withS3 = services.s3Endpoint ? false : 'needs an S3 store (TEST_S3_ENDPOINT): a second region is a second bucket'
const euBucket = services.s3Endpoint ? await freshBucket(t) : ''
if (euBucket) await s3Client().makeBucket(euBucket, 'us-east-1')
const h = await testApp(
  t,
  euBucket
    ? {
        DEFAULT_REGION: 'us-east',
        REGION_STORES: JSON.stringify({
          'eu-west': {
            endpoint: services.s3Endpoint,
            bucket: euBucket,
            accessKeyId: services.s3AccessKey,
            secretAccessKey: services.s3SecretKey,
          },
        }),
      }
    : { DEFAULT_REGION: 'us-east' },
  { jobs: { pollMs: 50 } },
)
const p = portability(h)
const prefs = (tenantId: string) => `/api/v1/regions/preferences/${tenantId}`

t.test('the regions: all fifteen of the specification, with those this deployment serves', async (t) => {
  const tn = await h.tenant('free')
  const r = await tn.call('GET', '/api/v1/regions')
  t.equal(r.status, 200)
  t.equal(r.body.data.length, 15)
  t.match(
    r.body.data.find((x: { code: string }) => x.code === 'us-east'),
    { name: 'US East', city: 'Virginia', frameworks: ['CCPA', 'HIPAA', 'SOC2'], available: true, default: true },
  )
  t.match(
    r.body.data.find((x: { code: string }) => x.code === 'eu-west'),
    { city: 'Frankfurt', frameworks: ['GDPR'], available: Boolean(euBucket), default: false },
  )
  t.equal(r.body.data.filter((x: { available: boolean }) => x.available).length, euBucket ? 2 : 1)
})

t.test(
  'preferences start as the deployment’s defaults; a change is checked whole and each refusal names its rule',
  async (t) => {
    const tn = await h.tenant('growth')
    const start = await tn.call('GET', prefs(tn.tenantId))
    t.same(start.body.data, {
      tenantId: tn.tenantId,
      primaryRegion: 'us-east',
      secondaryRegion: null,
      dataResidencyRequired: false,
      dataResidencyRegion: null,
      complianceLevel: 'standard',
      updatedAt: null,
    })
    const cases: [string, Record<string, unknown>, number, string, Record<string, unknown>][] = [
      [
        'a region this deployment does not serve',
        { primaryRegion: 'ap-east' },
        400,
        'VALIDATION_ERROR',
        { rule: 'region-unavailable' },
      ],
      [
        'residency without its region',
        { dataResidencyRequired: true },
        400,
        'VALIDATION_ERROR',
        { rule: 'residency-region-required' },
      ],
      [
        'a residency region without residency',
        { dataResidencyRegion: 'us-east' },
        400,
        'VALIDATION_ERROR',
        { rule: 'residency-region-without-residency' },
      ],
      [
        'the failover the same as the primary',
        { secondaryRegion: 'us-east' },
        400,
        'VALIDATION_ERROR',
        { rule: 'secondary-same-as-primary' },
      ],
      [
        'GDPR outside the regions that serve it',
        { complianceLevel: 'gdpr' },
        400,
        'VALIDATION_ERROR',
        { rule: 'compliance-region', regions: ['eu-west', 'eu-west-uk', 'eu-north'] },
      ],
      ['a compliance level that is not one', { complianceLevel: 'iso-27001' }, 400, 'VALIDATION_ERROR', {}],
      ['a field that is not one', { region: 'us-east' }, 400, 'VALIDATION_ERROR', {}],
    ]
    for (const [what, body, status, code, details] of cases) {
      const r = await tn.call('PATCH', prefs(tn.tenantId), body)
      t.equal(r.status, status, what)
      t.equal(r.body.error?.code, code, what)
      t.match(r.body.error?.details, details, what)
    }
    t.same((await tn.call('GET', prefs(tn.tenantId))).body.data, start.body.data, 'nothing was changed by the refusals')
    const hipaa = await tn.call('PATCH', prefs(tn.tenantId), { complianceLevel: 'hipaa' })
    t.equal(hipaa.status, 200, 'HIPAA is served in us-east')
    t.match(hipaa.body.data, { complianceLevel: 'hipaa', updatedAt: String })
    const audit = await h.platform.db.system(
      (sql) =>
        sql`select details from audit_events where tenant_id = ${tn.tenantId} and action = 'regions.preferences_changed'`,
    )
    t.match(audit, [{ details: { before: { complianceLevel: 'standard' }, after: { complianceLevel: 'hipaa' } } }])
  },
)

t.test(
  'plan gates: a free tenant is refused a failover region and residency with the rule; enterprise is not',
  async (t) => {
    const free = await h.tenant('free')
    for (const [body, feature] of [
      [{ secondaryRegion: 'eu-west' }, 'secondary_region'],
      [{ dataResidencyRequired: true, dataResidencyRegion: 'us-east' }, 'data_residency'],
    ] as const) {
      const r = await free.call('PATCH', prefs(free.tenantId), body)
      t.equal(r.status, 403, feature)
      t.match(r.body.error, {
        code: 'FORBIDDEN',
        details: { feature, reason: 'plan', plan: 'free', requiredPlan: 'growth' },
      })
      const check = await free.call('GET', `/api/v1/regions/features/${free.tenantId}/check/${feature}`)
      t.same(
        check.body.data,
        { featureKey: feature, enabled: false, reason: 'plan', requiredPlan: 'growth', setting: null },
        'the check says the same',
      )
    }
    const enterprise = await h.tenant('enterprise')
    const r = await enterprise.call('PATCH', prefs(enterprise.tenantId), {
      dataResidencyRequired: true,
      dataResidencyRegion: 'us-east',
    })
    t.equal(r.status, 200)
    t.match(r.body.data, { dataResidencyRequired: true, dataResidencyRegion: 'us-east', primaryRegion: 'us-east' })
  },
)

t.test('who may read and change which tenant’s preferences', async (t) => {
  const a = await h.tenant('enterprise')
  const b = await h.tenant('enterprise')
  t.equal((await b.call('GET', prefs(a.tenantId))).status, 404, 'another tenant’s are not there')
  t.equal((await b.call('PATCH', prefs(a.tenantId), { complianceLevel: 'soc2' })).status, 404)
  const op = (await operatorKey(h)).call
  const byOperator = await op('PATCH', `/api/v1/platform/tenants/${a.tenantId}/regional-preferences`, {
    complianceLevel: 'soc2',
  })
  t.equal(byOperator.status, 200, 'a deployment operator key changes any tenant’s')
  t.equal(byOperator.body.data.complianceLevel, 'soc2')
  t.equal(
    (await a.call('PATCH', `/api/v1/platform/tenants/${a.tenantId}/regional-preferences`, { complianceLevel: 'ccpa' }))
      .status,
    403,
    'the platform route is for operator keys',
  )
  t.equal(
    (await op('PATCH', prefs(a.tenantId), { complianceLevel: 'ccpa' })).status,
    403,
    'and the tenant route for the tenant’s credentials',
  )
})

t.test(
  'residency enforced: a residency tenant’s files, backups and exports land only in its region’s bucket',
  { skip: withS3 },
  async (t) => {
    const listed = async (bucket: string, prefix: string) => {
      const out: string[] = []
      for await (const o of s3Client().listObjectsV2(bucket, prefix, true)) out.push((o as { name: string }).name)
      return out.sort()
    }
    const defaultBucket = h.platform.config.R2_BUCKET
    const tn = await h.tenant('enterprise')
    const project = (await tn.call('POST', '/api/v1/projects', { name: 'Before' })).body.data
    const before = 'written in us-east\n'
    await tn.call('PUT', `/api/v1/projects/${project.id}/files/old.txt`, before, { 'content-type': 'text/plain' })

    const moved = await tn.call('PATCH', prefs(tn.tenantId), {
      dataResidencyRequired: true,
      dataResidencyRegion: 'eu-west',
      complianceLevel: 'gdpr',
    })
    t.equal(moved.status, 200, JSON.stringify(moved.body))
    t.match(moved.body.data, { primaryRegion: 'eu-west', dataResidencyRegion: 'eu-west' })
    const inDefaultBefore = await listed(defaultBucket, `tenants/${tn.tenantId}/`)

    const after = 'written in eu-west\n'
    t.equal(
      (await tn.call('PUT', `/api/v1/projects/${project.id}/files/new.txt`, after, { 'content-type': 'text/plain' }))
        .status,
      201,
    )
    const backup = await tn.call('POST', `/api/v1/projects/${project.id}/backup`, { includeHistory: true })
    t.equal(backup.status, 201)
    const exported = await p.exported(tn.call, tn.tenantId, { include: ['projects'] })
    t.equal(exported.job.status, 'completed', 'the export job ran')
    t.same(
      await listed(defaultBucket, `tenants/${tn.tenantId}/`),
      inDefaultBefore,
      'nothing new in the default region’s bucket',
    )
    const inEu = await listed(euBucket, `tenants/${tn.tenantId}/`)
    const sha = createHash('sha256').update(after).digest('hex')
    t.ok(inEu.includes(`tenants/${tn.tenantId}/projects/${project.id}/files/${sha}`), 'the new file')
    holdsBackupAndExport(t, inEu, 'the new region’s bucket')
    // What was stored before the move is still read, from where it is.
    t.equal((await tn.call('GET', `/api/v1/projects/${project.id}/files/old.txt`)).raw.toString(), before)
    t.equal((await tn.call('GET', `/api/v1/projects/${project.id}/files/new.txt`)).raw.toString(), after)
    const zip = await p.download(backup.body.data.downloadUrl)
    t.equal(
      `sha256:${createHash('sha256').update(zip).digest('hex')}`,
      backup.body.data.checksum,
      'the backup downloads whole from eu-west',
    )

    const routing = await tn.call('GET', '/api/v1/routing-info')
    t.match(routing.body.data, {
      tenantId: tn.tenantId,
      region: 'eu-west',
      dataResidencyRequired: true,
      store: { kind: 's3', endpoint: services.s3Endpoint, bucket: euBucket },
      replica: { id: String },
    })
    t.notMatch(
      JSON.stringify(routing.body),
      new RegExp(`${services.s3SecretKey}|${services.s3AccessKey}`),
      'no credentials',
    )

    const other = await h.tenant('enterprise')
    const theirs = (await other.call('POST', '/api/v1/projects', { name: 'Stays' })).body.data
    await other.call('PUT', `/api/v1/projects/${theirs.id}/files/a.txt`, 'home', { 'content-type': 'text/plain' })
    t.equal(
      (await listed(euBucket, `tenants/${other.tenantId}/`)).length,
      0,
      'a tenant without residency is not in eu-west',
    )
    t.equal((await listed(defaultBucket, `tenants/${other.tenantId}/`)).length, 1, 'but in the default region')
    t.match((await other.call('GET', '/api/v1/routing-info')).body.data, {
      region: 'us-east',
      dataResidencyRequired: false,
    })
  },
)

t.test(
  'validate takes the PUT body: platform storage is checked for its region and that region’s store, on any plan',
  async (t) => {
    const tn = await h.tenant('free')
    const storage = `/api/v1/regions/storage/${tn.tenantId}`
    const validate = (body: Record<string, unknown>) => tn.call('POST', `${storage}/validate`, body)
    const store = euBucket ? new URL(services.s3Endpoint).origin : 'a folder on the server'
    for (const body of [{ storageMode: 'platform' }, { storageMode: 'platform', platformRegion: 'us-east' }]) {
      const r = await validate(body)
      t.equal(r.status, 200, JSON.stringify(r.body))
      t.same(r.body.data, {
        valid: true,
        checks: [
          {
            id: 'platform-region',
            title: 'Region offered',
            status: 'pass',
            found: 'us-east',
            required: 'a region this site stores data in, allowed by the regional preferences',
            fix: '',
          },
          {
            id: 'platform-store',
            title: 'Region’s store answers',
            status: 'pass',
            found: `${store} answers`,
            required: 'the store answers',
            fix: '',
          },
        ],
      })
    }
    if (euBucket) {
      const eu = await validate({ storageMode: 'platform', platformRegion: 'eu-west' })
      t.match(eu.body.data, { valid: true, checks: [{ found: 'eu-west' }, { status: 'pass' }] }, 'the second region')
    }
    const elsewhere = await validate({ storageMode: 'platform', platformRegion: 'ap-east' })
    t.equal(elsewhere.status, 200)
    t.match(elsewhere.body.data, {
      valid: false,
      checks: [{ id: 'platform-region', status: 'fail', found: /^ap-east: .*\(region-unavailable\)$/, fix: /us-east/ }],
    })
    t.equal(elsewhere.body.data.checks.length, 1, 'the list stops at the failure')
    const put = await tn.call('PUT', storage, { storageMode: 'platform', platformRegion: 'ap-east' })
    t.equal(put.status, 400, 'the PUT of the same body is refused')
    t.match(put.body.error.details, { rule: 'region-unavailable' })
    t.match(
      (await tn.call('GET', prefs(tn.tenantId))).body.data,
      { primaryRegion: 'us-east', updatedAt: null },
      'validating saved nothing',
    )

    const byos = { byosEndpoint: 'http://127.0.0.1:1', byosBucket: 'not-mine', byosAccessKey: 'k', byosSecretKey: 's' }
    for (const body of [byos, { storageMode: 'byos', ...byos }]) {
      const r = await validate(body)
      t.equal(r.status, 403, `byos (${body === byos ? 'storageMode left out' : 'storageMode byos'}) needs Enterprise`)
      t.match(r.body.error, {
        code: 'FORBIDDEN',
        details: { feature: 'byos', reason: 'plan', requiredPlan: 'enterprise' },
      })
    }
    for (const [what, body] of [
      ['a storage mode that is not one', { storageMode: 'cloud' }],
      ['a region that is not a code', { storageMode: 'platform', platformRegion: 'mars-1' }],
      ['a field the configuration does not have', { storageMode: 'platform', bucket: 'x' }],
    ] as const) {
      const r = await validate(body)
      t.equal(r.status, 400, what)
      t.equal(r.body.error.code, 'VALIDATION_ERROR', what)
    }
  },
)

t.test(
  'validate and the PUT agree: a platformRegion other than the residency region fails the rule the PUT refuses',
  { skip: withS3 },
  async (t) => {
    const tn = await h.tenant('growth')
    const storage = `/api/v1/regions/storage/${tn.tenantId}`
    t.equal(
      (await tn.call('PATCH', prefs(tn.tenantId), { dataResidencyRequired: true, dataResidencyRegion: 'eu-west' }))
        .status,
      200,
    )
    const body = { storageMode: 'platform', platformRegion: 'us-east' }
    const checked = await tn.call('POST', `${storage}/validate`, body)
    t.match(checked.body.data, {
      valid: false,
      checks: [{ id: 'platform-region', status: 'fail', found: /\(residency-primary\)$/, fix: /preferences/ }],
    })
    const put = await tn.call('PUT', storage, body)
    t.equal(put.status, 400)
    t.match(put.body.error.details, { rule: 'residency-primary' })
    const home = await tn.call('POST', `${storage}/validate`, { storageMode: 'platform', platformRegion: 'eu-west' })
    t.match(home.body.data, { valid: true, checks: [{ found: 'eu-west' }, { id: 'platform-store', status: 'pass' }] })
  },
)

t.test('validate: a platform store that does not answer fails its check', async (t) => {
  const closed = await freePort()
  const down = await testApp(t, {
    R2_ENDPOINT: `http://127.0.0.1:${closed}`,
    R2_BUCKET: 'gone',
    R2_ACCESS_KEY_ID: 'key-id',
    R2_SECRET_ACCESS_KEY: 'secret-value',
  })
  const tn = await down.tenant('free')
  const r = await tn.call('POST', `/api/v1/regions/storage/${tn.tenantId}/validate`, { storageMode: 'platform' })
  t.equal(r.status, 200, JSON.stringify(r.body))
  t.match(r.body.data, {
    valid: false,
    checks: [
      { id: 'platform-region', status: 'pass' },
      { id: 'platform-store', status: 'fail', found: `http://127.0.0.1:${closed}: ECONNREFUSED`, fix: /operator/ },
    ],
  })
  t.notMatch(JSON.stringify(r.body), /secret-value/, 'no key in the answer')
})
