-- Events and webhooks. An event is written to the outbox (webhook_events) in the transaction of
-- the change it announces; a background worker on every replica fans it out to the subscribed
-- endpoints (webhook_deliveries) and delivers each one, recording every attempt.

-- A time-ordered (version 7) UUID, as server/ids.ts makes, for rows the database fans out itself.
create function atrium_uuid_v7() returns uuid
  language sql volatile
  as $$
    select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
             placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
             from 1 for 6), 52, 1), 53, 1), 'hex')::uuid
  $$;

-- A receiver. tenant_id null: a platform operator's endpoint, which hears every tenant.
create table webhooks (
  id uuid primary key,
  tenant_id uuid references tenants (id) on delete cascade,
  url text not null,
  description text not null default '',
  events text[] not null check (cardinality(events) > 0),
  -- Sealed by the secrets adapter: the secret is needed in the clear to sign.
  secret_sealed text not null,
  -- After a rotation the previous secret signs too, until previous_secret_expires_at.
  previous_secret_sealed text,
  previous_secret_expires_at timestamptz,
  secret_rotated_at timestamptz,
  status text not null default 'enabled' check (status in ('enabled', 'disabled')),
  -- gone: the receiver answered 410; failing: every attempt failed for 5 days; manual: a person.
  disabled_reason text check (disabled_reason in ('gone', 'failing', 'manual')),
  disabled_message text,
  disabled_at timestamptz,
  -- Start of the current run of failed attempts; null after a success.
  failing_since timestamptz,
  last_success_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhooks_tenant_idx on webhooks (tenant_id, id desc);
select atrium_protect('webhooks');

-- The outbox. dispatched_at is set once deliveries exist for every subscribed endpoint. tenant_id
-- is null only for a test event sent to a platform endpoint.
create table webhook_events (
  id uuid primary key,
  tenant_id uuid references tenants (id) on delete cascade,
  type text not null,
  data jsonb not null,
  created_at timestamptz not null default now(),
  dispatched_at timestamptz
);
create index webhook_events_undispatched_idx on webhook_events (id) where dispatched_at is null;
create index webhook_events_created_idx on webhook_events (created_at);
select atrium_protect('webhook_events');

-- One event to one endpoint. A worker that claims a delivery leases it (leased_until, on the
-- database's clock) for longer than an attempt can last: no other worker takes it meanwhile, and if
-- the worker dies mid-attempt the delivery is taken again once the lease ends. The lease is also the
-- claim's token: only its holder records the attempt's outcome.
create table webhook_deliveries (
  id uuid primary key,
  webhook_id uuid not null references webhooks (id) on delete cascade,
  event_id uuid not null references webhook_events (id) on delete cascade,
  -- The endpoint's tenant (null for a platform endpoint), for row-level security.
  tenant_id uuid references tenants (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempts integer not null default 0,
  next_attempt_at timestamptz,
  leased_until timestamptz,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default now(),
  completed_at timestamptz,
  unique (webhook_id, event_id)
);
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_webhook_idx on webhook_deliveries (webhook_id, id desc);
create index webhook_deliveries_event_idx on webhook_deliveries (event_id);
select atrium_protect('webhook_deliveries');

create table webhook_attempts (
  id uuid primary key,
  delivery_id uuid not null references webhook_deliveries (id) on delete cascade,
  tenant_id uuid references tenants (id) on delete cascade,
  attempt integer not null,
  started_at timestamptz not null,
  duration_ms integer not null,
  status_code integer,
  error text,
  -- The start of the response body (bounded), for the endpoint's owner to see what it said.
  response_excerpt text not null default '',
  outcome text not null check (outcome in ('succeeded', 'retrying', 'failed')),
  next_attempt_at timestamptz
);
create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, attempt);
select atrium_protect('webhook_attempts');
