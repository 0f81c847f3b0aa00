-- A tenant's storage configuration (API-SPEC "Storage configuration"): platform storage (its
-- region's store) or a store of its own (BYOS, Enterprise). The BYOS fields stay when the tenant
-- goes back to platform storage, so that what was written there stays readable; the keys are
-- sealed by the secrets adapter, bound to this row, and never returned.
create table tenant_storage (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  storage_mode text not null check (storage_mode in ('platform', 'byos')),
  byos_provider text check (byos_provider in ('s3', 'r2', 'gcs', 'azure')),
  byos_endpoint text,
  byos_bucket text,
  byos_region text,
  byos_access_key_sealed text,
  byos_secret_key_sealed text,
  byos_access_key_last_four text,
  updated_at timestamptz not null default now(),
  updated_by jsonb,
  check (storage_mode = 'platform' or (byos_endpoint is not null and byos_bucket is not null and byos_access_key_sealed is not null and byos_secret_key_sealed is not null))
);
select atrium_protect('tenant_storage');
