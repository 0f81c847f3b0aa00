-- Model usage per tenant, day (UTC), provider and model: one row upserted by every successful model
-- call (server/platform/llm.ts), read by GET /api/v1/tenant/usage. Counted here rather than in the
-- metrics, which carry no tenant label.
--
-- tenant_llm_settings.provider has no CHECK constraint (0002): the API's schema is what limits it,
-- so accepting 'anthropic' needs no change there.
create table llm_usage (
  tenant_id uuid not null references tenants (id) on delete cascade,
  day date not null,
  provider text not null,
  model text not null,
  requests bigint not null default 0,
  input_tokens bigint not null default 0,
  output_tokens bigint not null default 0,
  primary key (tenant_id, day, provider, model)
);
select atrium_protect('llm_usage');
