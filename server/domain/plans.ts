// What each plan allows, one record per plan. The plan names are in common/plans.ts (the license
// tool needs them too). One number also lives in SQL: the audit log's retention is
// atrium_audit_retention(plan) (migration 0002), which the statements that write, read and sweep the
// log call; test/server/domain/plans.test.ts holds the two to the same values.
import { PLANS, type Plan } from '../../common/plans.js'

export { isPlan, PLANS, type Plan } from '../../common/plans.js'

/** The gates of the specification's tables: what GET /tenant shows as the tenant's limits. */
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
  /** Bytes one project file may hold. */
  fileBytes: number
  /** Bytes all current files of one project may hold together (earlier versions' bytes are not counted). */
  projectFileBytes: number
  /** Agent runs a tenant may have queued or running at once: each holds a share of the replicas' workers. */
  concurrentRuns: number
  /** Chat sessions a tenant may keep. */
  chatSessions: number
  /** Characters one chat message may hold. */
  chatMessageChars: number
  /** Tenant exports asked for by hand in a calendar month (UTC); null: unlimited. Scheduled ones are not counted. */
  manualExportsPerMonth: number | null
  /** Hours between automatic backups of the whole tenant; null: none (their retention is backupRetentionDays). */
  automaticBackupHours: number | null
  /** Whether the tenant may keep its objects in storage of its own (BYOS, and BYOS backup). */
  byosBackup: boolean
  /** Whether the tenant may require data residency (its data only in one region). */
  dataResidency: boolean
  /** Whether the tenant may name a failover region (secondaryRegion). */
  secondaryRegion: boolean
  /** Whether the tenant may schedule exports to a bucket of its own. */
  scheduledExports: boolean
}

export interface PlanTerms {
  /** The plan's name as people read it. */
  title: string
  limits: PlanLimits
  /** How long the audit log keeps events, as a PostgreSQL interval; null: the plan keeps no audit log. */
  auditRetention: string | null
}

const MiB = 1024 * 1024
const GiB = 1024 * MiB

export const PLAN_TERMS: Record<Plan, PlanTerms> = {
  free: {
    title: 'Free',
    limits: {
      projectVersions: 5,
      webhookEndpoints: 2,
      backupRetentionDays: 0,
      fileBytes: 1 * MiB,
      projectFileBytes: 10 * MiB,
      concurrentRuns: 1,
      chatSessions: 100,
      chatMessageChars: 4_000,
      manualExportsPerMonth: 1,
      automaticBackupHours: null,
      byosBackup: false,
      dataResidency: false,
      secondaryRegion: false,
      scheduledExports: false,
    },
    auditRetention: null,
  },
  pro: {
    title: 'Pro',
    limits: {
      projectVersions: 20,
      webhookEndpoints: 10,
      backupRetentionDays: 7,
      fileBytes: 10 * MiB,
      projectFileBytes: 100 * MiB,
      concurrentRuns: 5,
      chatSessions: 1_000,
      chatMessageChars: 16_000,
      manualExportsPerMonth: null,
      automaticBackupHours: 24,
      byosBackup: false,
      dataResidency: false,
      secondaryRegion: false,
      scheduledExports: true,
    },
    auditRetention: '30 days',
  },
  growth: {
    title: 'Growth',
    limits: {
      projectVersions: 50,
      webhookEndpoints: 25,
      backupRetentionDays: 30,
      fileBytes: 25 * MiB,
      projectFileBytes: 500 * MiB,
      concurrentRuns: 20,
      chatSessions: 10_000,
      chatMessageChars: 32_000,
      manualExportsPerMonth: null,
      automaticBackupHours: 24,
      byosBackup: false,
      dataResidency: true,
      secondaryRegion: true,
      scheduledExports: true,
    },
    auditRetention: '90 days',
  },
  enterprise: {
    title: 'Enterprise',
    limits: {
      projectVersions: null,
      webhookEndpoints: 100,
      backupRetentionDays: 90,
      fileBytes: 100 * MiB,
      projectFileBytes: 5 * GiB,
      concurrentRuns: 100,
      chatSessions: 100_000,
      chatMessageChars: 100_000,
      manualExportsPerMonth: null,
      automaticBackupHours: 1,
      byosBackup: true,
      dataResidency: true,
      secondaryRegion: true,
      scheduledExports: true,
    },
    auditRetention: '1 year',
  },
}

/** The smallest plan that keeps an audit log. */
export const AUDIT_LOG_PLAN: Plan = PLANS.find((p) => PLAN_TERMS[p].auditRetention !== null)!

/** The largest file any plan allows: the body limit of the file upload route. */
export const MAX_FILE_BYTES = Math.max(...PLANS.map((p) => PLAN_TERMS[p].limits.fileBytes))
