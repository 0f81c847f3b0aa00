// The plan gates of the specification's tables, in one place.
import type { Plan } from '../../http/principal.js'

export interface PlanLimits {
  /** Versions kept per project; null keeps every version. */
  projectVersions: number | null
  /**
   * Webhook endpoints a tenant may register (enabled or disabled). Every plan has a bound: each
   * endpoint takes a share of the deployment's delivery capacity.
   */
  webhookEndpoints: number
  /**
   * Days a project backup is kept (the specification's backup retention). 0 keeps none: the
   * object stays only while its download link is valid, and no plan loses it sooner.
   */
  backupRetentionDays: number
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { projectVersions: 5, webhookEndpoints: 2, backupRetentionDays: 0 },
  pro: { projectVersions: 20, webhookEndpoints: 10, backupRetentionDays: 7 },
  growth: { projectVersions: 50, webhookEndpoints: 25, backupRetentionDays: 30 },
  enterprise: { projectVersions: null, webhookEndpoints: 100, backupRetentionDays: 90 },
}
