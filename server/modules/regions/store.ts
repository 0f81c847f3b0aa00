// Regional preferences SQL. Every query names its tenant even though row-level security would also confine it.
import type { TxSql } from '../../platform/db.js'

export interface PreferencesRow {
  primary_region: string
  secondary_region: string | null
  data_residency_required: boolean
  data_residency_region: string | null
  compliance_level: string
  updated_at: Date
}

export async function selectPreferences(sql: TxSql, tenantId: string): Promise<PreferencesRow | undefined> {
  const [row] = await sql<PreferencesRow[]>`
    select primary_region, secondary_region, data_residency_required, data_residency_region, compliance_level, updated_at
      from tenant_regional_preferences where tenant_id = ${tenantId}`
  return row
}

/** Locks the tenant's preferences for a change (none yet: nothing to lock, the insert decides). */
export async function lockPreferences(sql: TxSql, tenantId: string): Promise<void> {
  await sql`select 1 from tenant_regional_preferences where tenant_id = ${tenantId} for update`
}

export async function upsertPreferences(
  sql: TxSql,
  tenantId: string,
  p: Omit<PreferencesRow, 'updated_at'>,
  by: { type: string; id: string | null },
): Promise<PreferencesRow> {
  const [row] = await sql<PreferencesRow[]>`
    insert into tenant_regional_preferences (tenant_id, primary_region, secondary_region, data_residency_required, data_residency_region, compliance_level, updated_at, updated_by)
    values (${tenantId}, ${p.primary_region}, ${p.secondary_region}, ${p.data_residency_required}, ${p.data_residency_region}, ${p.compliance_level}, now(), ${sql.json(by)})
    on conflict (tenant_id) do update set
      primary_region = excluded.primary_region, secondary_region = excluded.secondary_region,
      data_residency_required = excluded.data_residency_required, data_residency_region = excluded.data_residency_region,
      compliance_level = excluded.compliance_level, updated_at = excluded.updated_at, updated_by = excluded.updated_by
    returning primary_region, secondary_region, data_residency_required, data_residency_region, compliance_level, updated_at`
  return row!
}

export interface StorageRow {
  storage_mode: 'platform' | 'byos'
  byos_provider: 's3' | 'r2' | 'gcs' | 'azure' | null
  byos_endpoint: string | null
  byos_bucket: string | null
  byos_region: string | null
  byos_access_key_sealed: string | null
  byos_secret_key_sealed: string | null
  byos_access_key_last_four: string | null
  updated_at: Date
}

export async function selectStorage(sql: TxSql, tenantId: string): Promise<StorageRow | undefined> {
  const [row] = await sql<StorageRow[]>`
    select storage_mode, byos_provider, byos_endpoint, byos_bucket, byos_region, byos_access_key_sealed, byos_secret_key_sealed, byos_access_key_last_four, updated_at
      from tenant_storage where tenant_id = ${tenantId} for update`
  return row
}

export async function upsertStorage(
  sql: TxSql,
  tenantId: string,
  s: Omit<StorageRow, 'updated_at'>,
  by: { type: string; id: string | null },
): Promise<StorageRow> {
  const [row] = await sql<StorageRow[]>`
    insert into tenant_storage (tenant_id, storage_mode, byos_provider, byos_endpoint, byos_bucket, byos_region, byos_access_key_sealed, byos_secret_key_sealed,
                                byos_access_key_last_four, updated_at, updated_by)
    values (${tenantId}, ${s.storage_mode}, ${s.byos_provider}, ${s.byos_endpoint}, ${s.byos_bucket}, ${s.byos_region}, ${s.byos_access_key_sealed},
            ${s.byos_secret_key_sealed}, ${s.byos_access_key_last_four}, clock_timestamp(), ${sql.json(by)})
    on conflict (tenant_id) do update set
      storage_mode = excluded.storage_mode, byos_provider = excluded.byos_provider, byos_endpoint = excluded.byos_endpoint, byos_bucket = excluded.byos_bucket,
      byos_region = excluded.byos_region, byos_access_key_sealed = excluded.byos_access_key_sealed, byos_secret_key_sealed = excluded.byos_secret_key_sealed,
      byos_access_key_last_four = excluded.byos_access_key_last_four, updated_at = excluded.updated_at, updated_by = excluded.updated_by
    returning storage_mode, byos_provider, byos_endpoint, byos_bucket, byos_region, byos_access_key_sealed, byos_secret_key_sealed, byos_access_key_last_four, updated_at`
  return row!
}
