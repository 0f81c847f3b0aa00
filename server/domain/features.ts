// Whether a tenant may use a feature on this deployment: the one answer that both the feature
// check (GET /api/v1/regions/features/:tenantId/check/:featureKey) and the code that does or
// refuses the thing give, so the two never disagree. A feature is off for a reason: `air-gapped`
// (AIR_GAPPED: it needs the outside world), `not-configured` (the deployment lacks what it needs),
// or `plan` (the tenant's plan does not include it; `requiredPlan` names the smallest that does).
import { AppError } from './errors.js'
import { PLAN_TERMS, PLANS, type Plan, type PlanLimits } from './plans.js'

export const FEATURE_KEYS = [
  'web_search',
  'external_integrations',
  'byos',
  'data_residency',
  'secondary_region',
  'automatic_backups',
  'scheduled_export',
] as const
export type FeatureKey = (typeof FEATURE_KEYS)[number]
export const isFeatureKey = (key: string): key is FeatureKey => (FEATURE_KEYS as readonly string[]).includes(key)

export type FeatureReason = 'air-gapped' | 'not-configured' | 'plan'

export interface FeatureContext {
  plan: Plan
  /** AIR_GAPPED */
  airGapped: boolean
  /** WEB_SEARCH_URL is set */
  webSearch: boolean
}

export interface FeatureStatus {
  featureKey: FeatureKey
  enabled: boolean
  /** null when enabled. */
  reason: FeatureReason | null
  /** The smallest plan that has it, when the plan is the reason. */
  requiredPlan: Plan | null
  /** The setting that would change the answer, when the deployment is the reason. */
  setting: string | null
}

/** The plan gate of each feature that has one. */
const GATES: Partial<Record<FeatureKey, (l: PlanLimits) => boolean>> = {
  byos: (l) => l.byosBackup,
  data_residency: (l) => l.dataResidency,
  secondary_region: (l) => l.secondaryRegion,
  automatic_backups: (l) => l.automaticBackupHours !== null,
  scheduled_export: (l) => l.scheduledExports,
}

/** Features that reach outside the deployment: off when air-gapped. */
const OUTSIDE: readonly FeatureKey[] = ['web_search', 'external_integrations']

/** What the deployment says of a feature, whatever the plan: why it is off, and the setting that would turn it on. */
export function deploymentRefuses(
  featureKey: FeatureKey,
  env: Pick<FeatureContext, 'airGapped' | 'webSearch'>,
): { reason: FeatureReason; setting: string } | null {
  if (OUTSIDE.includes(featureKey) && env.airGapped) return { reason: 'air-gapped', setting: 'AIR_GAPPED' }
  if (featureKey === 'web_search' && !env.webSearch) return { reason: 'not-configured', setting: 'WEB_SEARCH_URL' }
  return null
}

export function featureStatus(featureKey: FeatureKey, ctx: FeatureContext): FeatureStatus {
  const off = (reason: FeatureReason, o: { requiredPlan?: Plan; setting?: string } = {}): FeatureStatus => ({
    featureKey,
    enabled: false,
    reason,
    requiredPlan: o.requiredPlan ?? null,
    setting: o.setting ?? null,
  })
  const refused = deploymentRefuses(featureKey, ctx)
  if (refused) return off(refused.reason, { setting: refused.setting })
  const gate = GATES[featureKey]
  if (gate && !gate(PLAN_TERMS[ctx.plan].limits))
    return off('plan', { requiredPlan: PLANS.find((p) => gate(PLAN_TERMS[p].limits))! })
  return { featureKey, enabled: true, reason: null, requiredPlan: null, setting: null }
}

/**
 * Refuses what a disabled feature would do: FORBIDDEN naming the plan it needs, or
 * FEATURE_DISABLED naming the deployment's reason and setting. `field` names what asked for it.
 */
export function requireFeature(featureKey: FeatureKey, ctx: FeatureContext, field?: string): void {
  const s = featureStatus(featureKey, ctx)
  if (s.enabled) return
  const details = { feature: featureKey, reason: s.reason, ...(field ? { field } : {}) }
  if (s.reason === 'plan') {
    throw new AppError('FORBIDDEN', `${featureKey} needs the ${PLAN_TERMS[s.requiredPlan!].title} plan or higher`, {
      ...details,
      plan: ctx.plan,
      requiredPlan: s.requiredPlan,
    })
  }
  throw new AppError('FEATURE_DISABLED', `${featureKey} is turned off on this deployment (${s.setting})`, {
    ...details,
    setting: s.setting,
  })
}
