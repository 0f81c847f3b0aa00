// The plan gates of the specification's tables, in one place.
import type { Plan } from '../../http/principal.js'

export interface PlanLimits {
  /** Versions kept per project; null keeps every version. */
  projectVersions: number | null
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { projectVersions: 5 },
  pro: { projectVersions: 20 },
  growth: { projectVersions: 50 },
  enterprise: { projectVersions: null },
}
