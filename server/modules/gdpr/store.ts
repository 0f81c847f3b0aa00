// GDPR export SQL: what the database holds about one person of a tenant. Every query names its
// tenant even though row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'

export function userRecord(sql: TxSql, tenantId: string, userId: string) {
  return sql<
    {
      id: string
      email: string
      name: string
      role: string
      status: string
      created_at: Date
      updated_at: Date
      last_login_at: Date | null
    }[]
  >`
    select id, email, name, role, status, created_at, updated_at, last_login_at from users where tenant_id = ${tenantId} and id = ${userId}`
}

export function membership(sql: TxSql, tenantId: string) {
  return sql<{ id: string; name: string; plan: string }[]>`select id, name, plan from tenants where id = ${tenantId}`
}

export function sessions(sql: TxSql, tenantId: string, userId: string) {
  return sql<
    {
      id: string
      method: string
      ip: string
      user_agent: string
      created_at: Date
      expires_at: Date
      revoked_at: Date | null
    }[]
  >`
    select id, method, ip, user_agent, created_at, expires_at, revoked_at from identity_sessions
     where tenant_id = ${tenantId} and user_id = ${userId} order by id`
}

/** Keys the person made: what they are, never their secret (only its hash is stored). */
export function apiKeys(sql: TxSql, tenantId: string, userId: string) {
  return sql<
    {
      id: string
      name: string
      type: string
      prefix: string
      last_four: string
      permissions: string[]
      created_at: Date
      expires_at: Date | null
      revoked_at: Date | null
      last_used_at: Date | null
    }[]
  >`
    select id, name, type, prefix, last_four, permissions, created_at, expires_at, revoked_at, last_used_at from api_keys
     where tenant_id = ${tenantId} and user_id = ${userId} order by id`
}

/** Audit entries the person did (as themselves or through their keys) or that are about them. */
export function auditEntries(sql: TxSql, tenantId: string, userId: string, keyIds: string[]) {
  return sql<
    {
      id: string
      actor_type: string
      actor_id: string | null
      action: string
      target_type: string
      target_id: string
      ip: string
      user_agent: string
      details: unknown
      created_at: Date
    }[]
  >`
    select id, actor_type, actor_id, action, target_type, target_id, ip, user_agent, details, created_at from audit_events
     where tenant_id = ${tenantId}
       and (actor_id = ${userId} or actor_id = any(${sql.array(keyIds)}::uuid[]) or target_id = ${userId}::text)
     order by id`
}

/** Invitations to the tenant that were the person's. */
export function invitations(sql: TxSql, tenantId: string, userId: string) {
  return sql<{ id: string; invited_by: string | null; created_at: Date; expires_at: Date; accepted_at: Date | null }[]>`
    select id, invited_by, created_at, expires_at, accepted_at from invitations where tenant_id = ${tenantId} and user_id = ${userId} order by id`
}

/** Command-line logins the person approved in their browser. */
export function cliApprovals(sql: TxSql, tenantId: string, userId: string) {
  return sql<
    {
      login_id: string
      cli_version: string
      platform: string
      approved_at: Date | null
      approved_ip: string | null
      consumed_at: Date | null
    }[]
  >`
    select login_id, cli_version, platform, approved_at, approved_ip, consumed_at from cli_logins
     where tenant_id = ${tenantId} and user_id = ${userId} and approved_at is not null order by approved_at`
}

/** Agent runs the person started: their goals went to the tenant's model provider. */
export function runsStarted(sql: TxSql, tenantId: string, userId: string) {
  return sql<
    { id: string; agent_id: string; model: string | null; status: string; created_at: Date; started_at: Date | null }[]
  >`
    select id, agent_id, agent_snapshot->'config'->>'model' as model, status, created_at, started_at from agent_runs
     where tenant_id = ${tenantId} and started_by->>'userId' = ${userId} and started_at is not null order by id`
}

/** Webhook deliveries of events that named the person (their id or address), to the tenant's receivers. */
export function webhookDeliveries(sql: TxSql, tenantId: string, needles: string[]) {
  return sql<
    {
      event_id: string
      type: string
      url: string
      status: string
      attempts: number
      first_attempt_at: Date | null
      completed_at: Date | null
    }[]
  >`
    select e.id as event_id, e.type, w.url, d.status, d.attempts,
           (select min(a.started_at) from webhook_attempts a where a.delivery_id = d.id) as first_attempt_at, d.completed_at
      from webhook_events e
      join webhook_deliveries d on d.event_id = e.id
      join webhooks w on w.id = d.webhook_id
     where e.tenant_id = ${tenantId} and d.attempts > 0
       and exists (select 1 from unnest(${sql.array(needles)}::text[]) n where strpos(e.data::text, n) > 0)
     order by e.id, d.id`
}

/** The tenant's model provider as configured now (where agent runs and chat replies go). */
export function llmProvider(sql: TxSql, tenantId: string) {
  return sql<
    { provider: string; base_url: string }[]
  >`select provider, base_url from tenant_llm_settings where tenant_id = ${tenantId}`
}
