// The feature checks agree with what the server does: for every feature key, on every plan, on a
// connected deployment without and with web search, and air-gapped, the check's answer is compared
// with the feature's own behaviour (accepted, or refused with the same reason).
import pino from 'pino'
import t from 'tap'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { byosFields } from '../../../helpers/own-store.js'
import { FEATURE_KEYS, type FeatureKey } from '../../../../server/domain/features.js'
import { PLANS, type Plan } from '../../../../server/domain/plans.js'
import { backupRound } from '../../../../server/modules/exports/backups.js'
import { archiveLimits } from '../../../../server/modules/exports/limits.js'
import { exportsService } from '../../../../server/modules/exports/service.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'

const SECRET = 'a-shared-secret-of-32-characters'

/**
 * A store nothing listens on: a tenant allowed its own store, or scheduled exports to one, gets as far as the
 * store's checks (400).
 */
const NOWHERE = { endpoint: 'http://127.0.0.1:9', bucket: 'nowhere', accessKey: 'a', secretKey: 'b' }

/** What each feature does, and whether it did it: true accepted, false refused for the check's reason. */
type Behaviour = (
  h: TestApp,
  tn: Awaited<ReturnType<TestApp['tenant']>>,
  status: { reason: string | null },
) => Promise<boolean>

const behaviours: Record<FeatureKey, Behaviour> = {
  async web_search(_h, tn, status) {
    const r = await tn.call('POST', '/api/v1/agents', {
      name: 'Searcher',
      systemPrompt: '',
      config: { autonomyLevel: 'medium', tools: ['web_search'] },
    })
    if (r.status === 201) return true
    if (r.body.error.code !== 'FEATURE_DISABLED' || r.body.error.details.reason !== status.reason)
      throw new Error(`web_search: ${JSON.stringify(r.body)}`)
    return false
  },
  async external_integrations(_h, tn) {
    // A receiver on the public internet (an address given as such: no lookup).
    const r = await tn.call('POST', '/api/v1/webhooks', {
      url: 'https://93.184.216.34/atrium',
      events: ['project.created'],
      secret: SECRET,
    })
    if (r.status === 201) return true
    if (r.body.error.details?.reason !== 'outbound_refused')
      throw new Error(`external_integrations: ${JSON.stringify(r.body)}`)
    return false
  },
  async byos(_h, tn) {
    const r = await tn.call('PUT', `/api/v1/regions/storage/${tn.tenantId}`, {
      storageMode: 'byos',
      ...byosFields(NOWHERE),
    })
    return refusedForPlan(r, 'byos')
  },
  async data_residency(_h, tn) {
    const r = await tn.call('PATCH', `/api/v1/regions/preferences/${tn.tenantId}`, {
      dataResidencyRequired: true,
      dataResidencyRegion: 'us-east',
    })
    return refusedForPlan(r, 'data_residency')
  },
  async secondary_region(_h, tn) {
    // This deployment serves one region: an allowed failover is still refused, for the region (400), not the plan
    // (403).
    const r = await tn.call('PATCH', `/api/v1/regions/preferences/${tn.tenantId}`, { secondaryRegion: 'eu-west' })
    return refusedForPlan(r, 'secondary_region')
  },
  async scheduled_export(_h, tn) {
    const r = await tn.call('POST', `/api/v1/platform/tenants/${tn.tenantId}/export/schedule`, {
      frequency: 'weekly',
      s3Endpoint: NOWHERE.endpoint,
      s3Bucket: NOWHERE.bucket,
      s3AccessKey: NOWHERE.accessKey,
      s3SecretKey: NOWHERE.secretKey,
    })
    return refusedForPlan(r, 'scheduled_export')
  },
  async automatic_backups(h, tn) {
    const exports = exportsService({
      db: h.platform.db,
      storage: h.platform.storage,
      secrets: h.platform.secrets,
      policy: compilePolicy({ allowedCidrs: [], airGapped: false }),
      limits: archiveLimits(h.platform.config),
      version: 'test',
    })
    await backupRound(
      { db: h.platform.db, storage: h.platform.storage, exports, log: pino({ level: 'silent' }) },
      new Date(),
    )
    const [r] = await h.platform.db.system(
      (sql) => sql`select count(*)::int as n from tenant_exports where tenant_id = ${tn.tenantId} and kind = 'backup'`,
    )
    return r!.n > 0
  },
}

/** true when the answer is not a refusal for the plan; false when it is one naming the feature. */
function refusedForPlan(
  r: { status: number; body: { error?: { code: string; details: Record<string, unknown> } } },
  feature: FeatureKey,
): boolean {
  if (r.status !== 403) return true
  if (r.body.error?.details.feature !== feature || r.body.error.details.reason !== 'plan')
    throw new Error(`${feature}: ${JSON.stringify(r.body)}`)
  return false
}

const deployments: [string, Record<string, string>][] = [
  ['connected, no web search', {}],
  ['connected, with web search', { WEB_SEARCH_URL: 'https://search.example.com/search' }],
  ['air-gapped', { AIR_GAPPED: 'true', WEB_SEARCH_URL: 'https://search.example.com/search' }],
]

for (const [name, env] of deployments) {
  t.test(`${name}: every key, every plan, the check and the behaviour agree`, async (t) => {
    const h = await testApp(t, env)
    const seen: string[] = []
    for (const plan of PLANS as readonly Plan[]) {
      for (const key of FEATURE_KEYS) {
        const tn = await h.tenant(plan)
        const check = await tn.call('GET', `/api/v1/regions/features/${tn.tenantId}/check/${key}`)
        t.equal(check.status, 200)
        const status = check.body.data
        t.equal(status.featureKey, key)
        t.equal(status.reason === null, status.enabled, `${plan} ${key}: a reason exactly when off`)
        const did = await behaviours[key](h, tn, status)
        t.equal(
          did,
          status.enabled,
          `${plan} ${key}: the check says ${status.enabled ? 'on' : `off (${status.reason})`}, and so does the feature`,
        )
        seen.push(`${plan}/${key}/${status.enabled ? 'on' : status.reason}`)
      }
    }
    if (env.AIR_GAPPED)
      t.ok(
        seen.includes('enterprise/web_search/air-gapped') &&
          seen.includes('enterprise/external_integrations/air-gapped'),
        'air-gapped turns the outside off on every plan',
      )
    else
      t.ok(
        seen.includes('free/data_residency/plan') && seen.includes('growth/data_residency/on'),
        'the plans gate residency',
      )
  })
}

t.test('an unknown feature key is VALIDATION_ERROR; another tenant is 404', async (t) => {
  const h = await testApp(t)
  const tn = await h.tenant('free')
  const other = await h.tenant('free')
  const r = await tn.call('GET', `/api/v1/regions/features/${tn.tenantId}/check/teleportation`)
  t.equal(r.status, 400)
  t.equal(r.body.error.code, 'VALIDATION_ERROR')
  t.equal((await other.call('GET', `/api/v1/regions/features/${tn.tenantId}/check/byos`)).status, 404)
})
