// The plan gates of the specification's tables, in one place.
import type { Plan } from '../../common/plans.js'

export { isPlan, PLANS, type Plan } from '../../common/plans.js'

export interface PlanLimits {
  /** Versions kept per project; null keeps every version. */
  projectVersions: number | null
  /**
   * Webhook endpoints a tenant may register (enabled or disabled). Every plan has a bound: each
   * endpoint takes a share of the deployment's delivery capacity.
   */
  webhookEndpoints: number
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { projectVersions: 5, webhookEndpoints: 2 },
  pro: { projectVersions: 20, webhookEndpoints: 10 },
  growth: { projectVersions: 50, webhookEndpoints: 25 },
  enterprise: { projectVersions: null, webhookEndpoints: 100 },
}
