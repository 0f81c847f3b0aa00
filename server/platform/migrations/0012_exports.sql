-- Tenant exports (manual, scheduled and the plans' automatic backups), their schedules, and
-- restores. An export's archive is an object in the tenant's store (destination download) or in a
-- bucket the tenant named (destination s3); a restore's upload is an object in the tenant's store
-- until the restore has read it.

-- Where scheduled exports go: a bucket of the tenant's, reached through the outbound policy. The
-- keys are sealed by the secrets adapter (bound to this row) and never returned.
create table export_schedules (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  frequency text not null check (frequency in ('daily', 'weekly', 'monthly')),
  format text not null check (format in ('zip', 'json', 'csv')),
  include text[] not null,
  provider text not null check (provider in ('s3', 'r2', 'gcs', 'azure')),
  endpoint text not null,
  region text not null,
  bucket text not null,
  prefix text not null default '',
  access_key_sealed text not null,
  secret_key_sealed text not null,
  created_by jsonb not null,
  created_at timestamptz not null default now(),
  unique (tenant_id, id)
);
create index export_schedules_tenant_idx on export_schedules (tenant_id, id desc);
select atrium_protect('export_schedules');

create table tenant_exports (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  -- manual: asked for through the API; scheduled: a schedule's slot; backup: the plan's automatic backup.
  kind text not null check (kind in ('manual', 'scheduled', 'backup')),
  -- A schedule's runs stay listed after the schedule is deleted (no foreign key).
  schedule_id uuid,
  format text not null check (format in ('zip', 'json', 'csv')),
  include text[] not null,
  destination text not null check (destination in ('download', 's3')),
  -- destination s3 when asked for once (not through a schedule): {provider, endpoint, region, bucket,
  -- prefix} and the sealed keys.
  target jsonb,
  status text not null default 'pending' check (status in ('pending', 'running', 'completed', 'failed')),
  -- The archive: its key in the tenant's store (download, backup) or in the destination bucket (s3).
  object_key text,
  size bigint,
  checksum text,
  -- {code, message} from the error catalog when failed.
  error jsonb,
  requested_by jsonb not null,
  job_id uuid,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  -- When the download link (download) or the backup (backup) expires; the retention sweep removes
  -- the object of a download or backup after it.
  expires_at timestamptz,
  unique (tenant_id, id)
);
create index tenant_exports_tenant_idx on tenant_exports (tenant_id, id desc);
-- The free plan's monthly count of manual exports, a schedule's last runs, the last automatic backup.
create index tenant_exports_kind_idx on tenant_exports (tenant_id, kind, created_at);
create index tenant_exports_schedule_idx on tenant_exports (schedule_id, id desc) where schedule_id is not null;
-- The retention sweep: objects past their expiry.
create index tenant_exports_expires_idx on tenant_exports (expires_at) where object_key is not null and destination = 'download';
select atrium_protect('tenant_exports');

create table tenant_restores (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  status text not null default 'processing' check (status in ('processing', 'completed', 'failed')),
  merge boolean not null,
  validate_only boolean not null,
  -- The uploaded archive in the tenant's store; removed once the restore has ended.
  upload_key text,
  upload_size bigint not null,
  -- Counts per kind, what was skipped and why, conflicts (merge), the archive's metadata.
  report jsonb,
  error jsonb,
  requested_by jsonb not null,
  job_id uuid,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  unique (tenant_id, id)
);
create index tenant_restores_tenant_idx on tenant_restores (tenant_id, id desc);
select atrium_protect('tenant_restores');
