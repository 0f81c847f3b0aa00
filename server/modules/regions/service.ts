// Regions, a tenant's regional preferences, feature checks and routing information. A region is a
// storage location the deployment's operator declares: DEFAULT_REGION (the R2_* store) and each
// region of REGION_STORES. The rules of the preferences are checked on the whole result of a change,
// each refusal naming its rule (details.rule); the plan's gates are the feature checks' own answer
// (domain/features.ts), so the check and the refusal never disagree.
import { hostname } from 'node:os'
import type { Clock } from '../../clock.js'
import {
  COMPLIANCE_LEVEL_NAMES,
  isRegionCode,
  REGIONS,
  regionServes,
  type ComplianceLevel,
  type RegionCode,
} from '../../../common/regions.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, invalid } from '../../domain/errors.js'
import {
  featureStatus,
  requireFeature,
  type FeatureContext,
  type FeatureKey,
  type FeatureStatus,
} from '../../domain/features.js'
import type { Plan } from '../../domain/plans.js'
import type { Db, TxSql } from '../../platform/db.js'
import { checkStore, storeReason, type StoreTarget } from '../../platform/blobs.js'
import type { CompiledPolicy } from '../../platform/outbound.js'
import type { Secrets } from '../../platform/secrets.js'
import { byosKeyContext, type Storage } from '../../platform/storage.js'
import { LAST_FOUR_MIN_KEY_LENGTH } from '../tenants/settings.js'
import { check as checkResult, type CheckResult } from '../../../common/checks.js'
import { auditActor, auditBy } from '../audit/service.js'
import { inTenantFor, tenantFor } from '../tenants/service.js'
import * as store from './store.js'

export interface RegionView {
  code: RegionCode
  name: string
  city: string
  frameworks: string[]
  /** Whether this deployment stores data there. */
  available: boolean
  /** The region of the deployment's own store (R2_*), where tenants' data lives by default. */
  default: boolean
}

export interface Preferences {
  primaryRegion: RegionCode
  secondaryRegion: RegionCode | null
  dataResidencyRequired: boolean
  dataResidencyRegion: RegionCode | null
  complianceLevel: ComplianceLevel
}

export interface PreferencesView extends Preferences {
  tenantId: string
  updatedAt: string | null
}

export const BYOS_PROVIDERS = ['s3', 'r2', 'gcs', 'azure'] as const
export type ByosProvider = (typeof BYOS_PROVIDERS)[number]

/** PUT /regions/storage: the spec's storage configuration; keys write-only (kept when omitted). */
export interface StorageInput {
  storageMode: 'platform' | 'byos'
  platformRegion?: RegionCode
  byosProvider?: ByosProvider
  byosEndpoint?: string
  byosBucket?: string
  byosRegion?: string
  byosAccessKey?: string
  byosSecretKey?: string
}

/**
 * POST .../validate: the same configuration a PUT takes. Without storageMode it is byos (the body
 * validate took before it took the whole configuration).
 */
export type StorageCheckInput = Omit<StorageInput, 'storageMode'> & { storageMode?: StorageInput['storageMode'] }

export interface StorageView {
  tenantId: string
  storageMode: 'platform' | 'byos'
  /** Where platform storage keeps the tenant's objects: its primary (or residency) region. */
  platformRegion: RegionCode
  byosProvider: ByosProvider | null
  byosEndpoint: string | null
  byosBucket: string | null
  byosRegion: string | null
  byosAccessKey: { configured: boolean; lastFour: string | null }
  byosSecretKey: { configured: boolean }
  updatedAt: string | null
}

export interface RegionsDeps {
  db: Db
  /** DEFAULT_REGION */
  defaultRegion: RegionCode
  /** The regions of REGION_STORES. */
  regionStores: readonly string[]
  airGapped: boolean
  webSearch: boolean
  storage: Storage
  secrets: Secrets
  /** The outbound policy: a tenant's own store is checked and reached only where it allows. */
  policy: CompiledPolicy
  /** What routing-info shows of where data lives: each region's store, the database (no credentials). */
  where: {
    stores: Record<string, { kind: 's3' | 'local'; endpoint: string | null; bucket: string | null }>
    database: { kind: 'postgres' | 'embedded'; host: string | null; name: string | null }
  }
  version: string
  now?: Clock
}

const rule = (field: string, name: string, message: string, more: Record<string, unknown> = {}) =>
  invalid(field, message, { rule: name, ...more })

export function regionsService(deps: RegionsDeps) {
  const { db } = deps
  const available = new Set<string>([deps.defaultRegion, ...deps.regionStores])
  const defaults: Preferences = {
    primaryRegion: deps.defaultRegion,
    secondaryRegion: null,
    dataResidencyRequired: false,
    dataResidencyRegion: null,
    complianceLevel: 'standard',
  }
  const context = (plan: Plan): FeatureContext => ({ plan, airGapped: deps.airGapped, webSearch: deps.webSearch })

  const fromRow = (r: store.PreferencesRow | undefined): Preferences =>
    r
      ? {
          primaryRegion: r.primary_region as RegionCode,
          secondaryRegion: r.secondary_region as RegionCode | null,
          dataResidencyRequired: r.data_residency_required,
          dataResidencyRegion: r.data_residency_region as RegionCode | null,
          complianceLevel: r.compliance_level as ComplianceLevel,
        }
      : defaults

  const view = (tenantId: string, r: store.PreferencesRow | undefined): PreferencesView => ({
    tenantId,
    ...fromRow(r),
    updatedAt: r?.updated_at.toISOString() ?? null,
  })

  /** The rules, on the preferences as they would be after a change; the first broken one is thrown. */
  function check(p: Preferences, plan: Plan): void {
    const served = (field: string, code: string) => {
      if (!isRegionCode(code)) throw rule(field, 'region-code', `${code} is not a region code`)
      if (!available.has(code))
        throw rule(field, 'region-unavailable', `this deployment does not store data in ${code}`, {
          available: [...available],
        })
    }
    served('body.primaryRegion', p.primaryRegion)
    if (p.secondaryRegion !== null) {
      requireFeature('secondary_region', context(plan), 'body.secondaryRegion')
      served('body.secondaryRegion', p.secondaryRegion)
      if (p.secondaryRegion === p.primaryRegion)
        throw rule('body.secondaryRegion', 'secondary-same-as-primary', 'must differ from primaryRegion')
    }
    if (p.dataResidencyRequired) {
      requireFeature('data_residency', context(plan), 'body.dataResidencyRequired')
      if (p.dataResidencyRegion === null)
        throw rule(
          'body.dataResidencyRegion',
          'residency-region-required',
          'is required when dataResidencyRequired is true',
        )
      served('body.dataResidencyRegion', p.dataResidencyRegion)
      if (p.primaryRegion !== p.dataResidencyRegion)
        throw rule(
          'body.primaryRegion',
          'residency-primary',
          `must be the residency region (${p.dataResidencyRegion}): the data lives only there`,
        )
      if (p.secondaryRegion !== null)
        throw rule(
          'body.secondaryRegion',
          'residency-no-failover',
          'must be null when data residency is required: a failover copy would leave the region',
        )
    } else if (p.dataResidencyRegion !== null) {
      throw rule(
        'body.dataResidencyRegion',
        'residency-region-without-residency',
        'is only set together with dataResidencyRequired: true',
      )
    }
    if (!(COMPLIANCE_LEVEL_NAMES as string[]).includes(p.complianceLevel))
      throw rule('body.complianceLevel', 'compliance-level', `must be one of ${COMPLIANCE_LEVEL_NAMES.join(', ')}`)
    for (const [field, code] of [
      ['body.primaryRegion', p.primaryRegion],
      ['body.secondaryRegion', p.secondaryRegion],
    ] as const) {
      if (code && !regionServes(code, p.complianceLevel)) {
        throw rule(
          'body.complianceLevel',
          'compliance-region',
          `${p.complianceLevel} is not served in ${code} (${field.slice(5)})`,
          {
            regions: REGIONS.filter((r) => regionServes(r.code, p.complianceLevel)).map((r) => r.code),
          },
        )
      }
    }
  }

  const storageView = (tenantId: string, r: store.StorageRow | undefined, prefs: Preferences): StorageView => ({
    tenantId,
    storageMode: r?.storage_mode ?? 'platform',
    platformRegion: prefs.dataResidencyRequired ? prefs.dataResidencyRegion! : prefs.primaryRegion,
    byosProvider: r?.byos_provider ?? null,
    byosEndpoint: r?.byos_endpoint ?? null,
    byosBucket: r?.byos_bucket ?? null,
    byosRegion: r?.byos_region ?? null,
    byosAccessKey: { configured: Boolean(r?.byos_access_key_sealed), lastFour: r?.byos_access_key_last_four ?? null },
    byosSecretKey: { configured: Boolean(r?.byos_secret_key_sealed) },
    updatedAt: r?.updated_at.toISOString() ?? null,
  })

  /** The store a request names, its keys given or (omitted) the ones the tenant has saved. */
  function byosTarget(
    tenantId: string,
    input: Omit<StorageInput, 'storageMode' | 'platformRegion'>,
    saved: store.StorageRow | undefined,
  ): StoreTarget & { provider: ByosProvider } {
    const provider = input.byosProvider ?? saved?.byos_provider ?? 's3'
    const endpoint = input.byosEndpoint ?? saved?.byos_endpoint
    const bucket = input.byosBucket ?? saved?.byos_bucket
    if (!endpoint) throw invalid('body.byosEndpoint', 'is required for byos storage')
    if (!bucket) throw invalid('body.byosBucket', 'is required for byos storage')
    const savedKey = (field: 'access_key' | 'secret_key', sealed: string | null | undefined) =>
      sealed ? deps.secrets.decrypt(sealed, byosKeyContext(tenantId, field)) : null
    const accessKey = input.byosAccessKey ?? savedKey('access_key', saved?.byos_access_key_sealed)
    const secretKey = input.byosSecretKey ?? savedKey('secret_key', saved?.byos_secret_key_sealed)
    if (!accessKey) throw invalid('body.byosAccessKey', 'is required for byos storage (none is saved)')
    if (!secretKey) throw invalid('body.byosSecretKey', 'is required for byos storage (none is saved)')
    return {
      provider,
      endpoint,
      bucket,
      region: input.byosRegion || saved?.byos_region || (provider === 'r2' ? 'auto' : 'us-east-1'),
      accessKey,
      secretKey,
    }
  }

  /** The platform region a PUT would leave the tenant in, and its preferences then. */
  function platformAfter(prefs: Preferences, platformRegion: RegionCode | undefined) {
    const now = prefs.dataResidencyRequired ? prefs.dataResidencyRegion! : prefs.primaryRegion
    // As putStorage does: a platformRegion other than the current one changes the primary region.
    const next =
      platformRegion !== undefined && platformRegion !== now ? { ...prefs, primaryRegion: platformRegion } : prefs
    return { region: platformRegion ?? now, next }
  }

  /**
   * Platform storage's checks, each reported as the BYOS ones are: the region is one this site
   * stores data in and the tenant's preferences allow (the rules a PUT applies, each refusal's
   * message as found), then (withStore) the site's store of that region answers (its bucket, or its
   * folder). The list stops at the first failure.
   */
  async function platformChecks(
    prefs: Preferences,
    plan: Plan,
    platformRegion: RegionCode | undefined,
    withStore: boolean,
  ): Promise<CheckResult[]> {
    const { region, next } = platformAfter(prefs, platformRegion)
    const required = 'a region this site stores data in, allowed by the regional preferences'
    try {
      check(next, plan)
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      const rule = typeof err.details.rule === 'string' ? err.details.rule : err.code
      // The rule's own words, without the field it names in a PATCH (primaryRegion).
      const said = (err.details.errors as { message?: string }[] | undefined)?.[0]?.message ?? err.message
      return [
        checkResult(
          'platform-region',
          'Region offered',
          'fail',
          `${region}: ${said} (${rule})`,
          required,
          rule === 'region-unavailable'
            ? `Choose one of ${[...available].join(', ')} (GET /api/v1/regions: available)`
            : 'Choose a region the regional preferences allow, or change them first (PATCH /api/v1/regions/preferences/{tenantId})',
        ),
      ]
    }
    const out = [checkResult('platform-region', 'Region offered', 'pass', region, required)]
    if (!withStore) return out
    const site = deps.storage.siteStore(region)!
    const where = site.s3 ? site.s3.endpoint : 'a folder on the server'
    try {
      await site.blobs.ping()
      out.push(checkResult('platform-store', 'Region’s store answers', 'pass', `${where} answers`, 'the store answers'))
    } catch (err) {
      out.push(
        checkResult(
          'platform-store',
          'Region’s store answers',
          'fail',
          `${where}: ${storeReason(err)}`,
          'the store answers',
          'The site’s store is the operator’s: ask them to check it (GET /readyz shows it too)',
        ),
      )
    }
    return out
  }

  return {
    regions(): RegionView[] {
      return REGIONS.map((r) => ({
        code: r.code,
        name: r.name,
        city: r.city,
        frameworks: [...r.frameworks],
        available: available.has(r.code),
        default: r.code === deps.defaultRegion,
      }))
    },

    async preferences(a: Actor<string | null>, tenantId: string): Promise<PreferencesView> {
      return inTenantFor(db, a, tenantId, async (sql) => view(tenantId, await store.selectPreferences(sql, tenantId)))
    },

    /** PATCH: the fields given over the current ones, checked whole; unchanged when a rule is broken. */
    async update(a: Actor<string | null>, tenantId: string, patch: Partial<Preferences>): Promise<PreferencesView> {
      return inTenantFor(db, a, tenantId, async (sql, { plan }) => {
        await store.lockPreferences(sql, tenantId)
        const current = fromRow(await store.selectPreferences(sql, tenantId))
        const next: Preferences = { ...current, ...patch }
        // Turning residency off forgets its region; turning it on with a region moves the primary there when only
        // residency was asked.
        if (patch.dataResidencyRequired === false && patch.dataResidencyRegion === undefined)
          next.dataResidencyRegion = null
        if (next.dataResidencyRequired && patch.primaryRegion === undefined && next.dataResidencyRegion)
          next.primaryRegion = next.dataResidencyRegion
        check(next, plan)
        const actor: Actor = { ...a, tenantId }
        const row = await store.upsertPreferences(
          sql,
          tenantId,
          {
            primary_region: next.primaryRegion,
            secondary_region: next.secondaryRegion,
            data_residency_required: next.dataResidencyRequired,
            data_residency_region: next.dataResidencyRegion,
            compliance_level: next.complianceLevel,
          },
          auditActor(actor),
        )
        await auditBy(sql, actor, {
          action: 'regions.preferences_changed',
          target: { type: 'tenant', id: tenantId },
          details: { before: current, after: next },
        })
        return view(tenantId, row)
      })
    },

    async feature(a: Actor<string | null>, tenantId: string, key: FeatureKey): Promise<FeatureStatus> {
      const { plan } = await db.tenant(tenantId, (sql: TxSql) => tenantFor(sql, a, tenantId))
      return featureStatus(key, context(plan))
    },

    async storageSettings(a: Actor<string | null>, tenantId: string): Promise<StorageView> {
      return inTenantFor(db, a, tenantId, async (sql) =>
        storageView(
          tenantId,
          await store.selectStorage(sql, tenantId),
          fromRow(await store.selectPreferences(sql, tenantId)),
        ),
      )
    },

    /**
     * PUT: platform storage (in the region the preferences give; platformRegion changes the primary
     * region under the preferences' rules) or the tenant's own store (Enterprise), which must pass
     * every check first. A store of its own keeps its settings when the tenant goes back to platform
     * storage: what was written there stays readable.
     */
    async putStorage(a: Actor, tenantId: string, input: StorageInput): Promise<StorageView> {
      const { plan, current } = await inTenantFor(db, a, tenantId, async (sql, { plan }) => ({
        plan,
        current: await store.selectStorage(sql, tenantId),
      }))
      let target: (StoreTarget & { provider: ByosProvider }) | null = null
      if (input.storageMode === 'byos') {
        requireFeature('byos', context(plan), 'body.storageMode')
        target = byosTarget(tenantId, input, current)
        const checks = await checkStore(deps.policy, target)
        const failed = checks.find((c) => c.status === 'fail')
        if (failed)
          throw rule(
            `body.${failed.id === 'credentials' ? 'byosAccessKey' : failed.id === 'bucket' ? 'byosBucket' : 'byosEndpoint'}`,
            'store-check',
            `the store fails its ${failed.id} check: ${failed.found}`,
            { check: failed.id, checks },
          )
      }
      if (input.platformRegion !== undefined) {
        const prefs = await this.preferences(a, tenantId)
        if (input.platformRegion !== (prefs.dataResidencyRequired ? prefs.dataResidencyRegion : prefs.primaryRegion))
          await this.update(a, tenantId, { primaryRegion: input.platformRegion })
      }
      return db.tenant(tenantId, async (sql) => {
        const before = await store.selectStorage(sql, tenantId)
        const sealed = target
          ? {
              byos_provider: target.provider,
              byos_endpoint: target.endpoint,
              byos_bucket: target.bucket,
              byos_region: target.region,
              byos_access_key_sealed: deps.secrets.encrypt(target.accessKey, byosKeyContext(tenantId, 'access_key')),
              byos_secret_key_sealed: deps.secrets.encrypt(target.secretKey, byosKeyContext(tenantId, 'secret_key')),
              byos_access_key_last_four:
                target.accessKey.length >= LAST_FOUR_MIN_KEY_LENGTH ? target.accessKey.slice(-4) : null,
            }
          : {
              byos_provider: before?.byos_provider ?? null,
              byos_endpoint: before?.byos_endpoint ?? null,
              byos_bucket: before?.byos_bucket ?? null,
              byos_region: before?.byos_region ?? null,
              byos_access_key_sealed: before?.byos_access_key_sealed ?? null,
              byos_secret_key_sealed: before?.byos_secret_key_sealed ?? null,
              byos_access_key_last_four: before?.byos_access_key_last_four ?? null,
            }
        const by = auditActor(a)
        const row = await store.upsertStorage(sql, tenantId, { storage_mode: input.storageMode, ...sealed }, by)
        await auditBy(sql, a, {
          action: 'storage.changed',
          target: { type: 'tenant', id: tenantId },
          details: {
            from: before?.storage_mode ?? 'platform',
            to: input.storageMode,
            ...(target ? { provider: target.provider, endpoint: target.endpoint, bucket: target.bucket } : {}),
          },
        })
        return storageView(tenantId, row, fromRow(await store.selectPreferences(sql, tenantId)))
      })
    },

    /**
     * POST .../validate: the configuration a PUT would save, checked, nothing saved; each check as the
     * installer reports its own. byos (also when storageMode is left out): the store's checks, then the
     * platformRegion when one is given (a PUT changes the primary region too); platform: the region and
     * its store.
     */
    async validateStorage(
      a: Actor,
      tenantId: string,
      input: StorageCheckInput,
    ): Promise<{ valid: boolean; checks: CheckResult[] }> {
      const { plan, current, prefs } = await inTenantFor(db, a, tenantId, async (sql, { plan }) => ({
        plan,
        current: await store.selectStorage(sql, tenantId),
        prefs: fromRow(await store.selectPreferences(sql, tenantId)),
      }))
      const failed = (list: CheckResult[]) => list.some((c) => c.status === 'fail')
      let checks: CheckResult[] = []
      if ((input.storageMode ?? 'byos') === 'byos') {
        requireFeature('byos', context(plan), input.storageMode ? 'body.storageMode' : 'body.byosEndpoint')
        checks = await checkStore(deps.policy, byosTarget(tenantId, input, current))
        if (input.platformRegion !== undefined && !failed(checks))
          checks.push(...(await platformChecks(prefs, plan, input.platformRegion, false)))
      } else {
        checks = await platformChecks(prefs, plan, input.platformRegion, true)
      }
      return { valid: !failed(checks), checks }
    },

    /** Where this request's tenant data lives (the storage seam's own answer), and who answers: nothing secret. */
    async routingInfo(a: Actor) {
      const [{ mode, region }, [prefs, own]] = await Promise.all([
        deps.storage.placement(a.tenantId),
        db.tenant(
          a.tenantId,
          async (sql) =>
            [
              fromRow(await store.selectPreferences(sql, a.tenantId)),
              await store.selectStorage(sql, a.tenantId),
            ] as const,
        ),
      ])
      const code = (region || deps.defaultRegion) as RegionCode
      return {
        tenantId: a.tenantId,
        region: code,
        storageMode: mode,
        dataResidencyRequired: prefs.dataResidencyRequired,
        store:
          mode === 'byos' && own
            ? { kind: 's3' as const, endpoint: own.byos_endpoint, bucket: own.byos_bucket }
            : (deps.where.stores[code] ?? deps.where.stores[deps.defaultRegion]!),
        database: deps.where.database,
        replica: { id: `${hostname()}:${process.pid}`, version: deps.version },
        at: new Date((deps.now ?? Date.now)()).toISOString(),
      }
    },
  }
}

export type RegionsService = ReturnType<typeof regionsService>
