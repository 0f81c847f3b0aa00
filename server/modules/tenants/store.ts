import type { TxSql } from '../../platform/db.js'
import type { Plan } from '../../domain/plans.js'

export async function insertTenant(sql: TxSql, t: { id: string; name: string; plan: Plan }): Promise<TenantRow> {
  const [row] = await sql<
    TenantRow[]
  >`insert into tenants (id, name, plan) values (${t.id}, ${t.name}, ${t.plan}) returning id, name, plan, status, created_at, updated_at`
  return row!
}

/** Whether a tenant exists; any text is accepted (an id typed on a command line may not be a uuid). */
export async function tenantExists(sql: TxSql, id: string): Promise<boolean> {
  const [row] = await sql`select 1 from tenants where id::text = ${id}`
  return row !== undefined
}

// Tenant creations take this lock (for their transaction) before counting, so two at once cannot
// both see room for one more under the license's limit.
const CREATE_LOCK_KEY = 7_242_019_407

/** How many tenants there are, counted after waiting for any other creation in progress. */
export async function countTenantsForCreation(sql: TxSql): Promise<number> {
  await sql`select pg_advisory_xact_lock(${CREATE_LOCK_KEY})`
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from tenants`
  return row!.n
}

export interface TenantRow {
  id: string
  name: string
  plan: Plan
  status: 'active' | 'suspended'
  created_at: Date
  updated_at: Date
}

export function selectTenant(sql: TxSql, id: string) {
  return sql<TenantRow[]>`select id, name, plan, status, created_at, updated_at from tenants where id = ${id}`
}

export async function renameTenant(sql: TxSql, id: string, name: string): Promise<TenantRow | undefined> {
  const [row] = await sql<TenantRow[]>`
    update tenants set name = ${name}, updated_at = now() where id = ${id}
    returning id, name, plan, status, created_at, updated_at`
  return row
}

// The tenant's LLM connection (one row per tenant, created on the first change).
export interface LlmSettingsRow {
  provider: string
  base_url: string
  model: string
  temperature: number | null
  max_tokens: number | null
  api_key_sealed: string | null
  api_key_last_four: string | null
  updated_at: Date
  updated_by: string | null
}

const LLM_COLUMNS = (sql: TxSql) =>
  sql`provider, base_url, model, temperature, max_tokens, api_key_sealed, api_key_last_four, updated_at, updated_by`

export function selectLlmSettings(sql: TxSql, tenantId: string, opts: { lock?: boolean } = {}) {
  return sql<LlmSettingsRow[]>`
    select ${LLM_COLUMNS(sql)} from tenant_llm_settings
     where tenant_id = ${tenantId} ${opts.lock ? sql`for update` : sql``}`
}

/** The row with its defaults, unless a concurrent first change made it already. */
export async function ensureLlmSettings(sql: TxSql, tenantId: string): Promise<void> {
  await sql`insert into tenant_llm_settings (tenant_id) values (${tenantId}) on conflict (tenant_id) do nothing`
}

export type LlmSettingsFields = Omit<LlmSettingsRow, 'updated_at' | 'updated_by'>

export async function updateLlmSettings(
  sql: TxSql,
  tenantId: string,
  f: LlmSettingsFields,
  by: { userId: string | null; at: Date },
): Promise<LlmSettingsRow> {
  const [row] = await sql<LlmSettingsRow[]>`
    update tenant_llm_settings
       set provider = ${f.provider}, base_url = ${f.base_url}, model = ${f.model}, temperature = ${f.temperature},
           max_tokens = ${f.max_tokens}, api_key_sealed = ${f.api_key_sealed}, api_key_last_four = ${f.api_key_last_four},
           updated_at = ${by.at}, updated_by = ${by.userId}
     where tenant_id = ${tenantId}
    returning ${LLM_COLUMNS(sql)}`
  return row!
}

export interface LlmUsageRow {
  day: string
  provider: string
  model: string
  requests: number
  input_tokens: number
  output_tokens: number
}

/** The tenant's model usage per day, provider and model, for days from..to (both included, YYYY-MM-DD). */
export function selectLlmUsage(sql: TxSql, tenantId: string, from: string, to: string) {
  return sql<LlmUsageRow[]>`
    select to_char(day, 'YYYY-MM-DD') as day, provider, model,
      requests::float8 as requests, input_tokens::float8 as input_tokens, output_tokens::float8 as output_tokens
    from llm_usage
    where tenant_id = ${tenantId} and day between ${from}::date and ${to}::date
    order by day, provider, model`
}
