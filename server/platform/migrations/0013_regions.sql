-- A tenant's regional preferences (API-SPEC "Regional preferences"): where its data lives. A tenant
-- without a row has the deployment's defaults (DEFAULT_REGION, no residency, standard compliance).
create table tenant_regional_preferences (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  primary_region text not null,
  secondary_region text,
  data_residency_required boolean not null default false,
  data_residency_region text,
  compliance_level text not null default 'standard',
  updated_at timestamptz not null default now(),
  updated_by jsonb,
  -- residency names its region; none is named without it
  check (data_residency_required = (data_residency_region is not null))
);
select atrium_protect('tenant_regional_preferences');
