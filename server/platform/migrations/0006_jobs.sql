-- The job runner (server/platform/jobs.ts): one table of durable jobs for all background work, and
-- the schedules that enqueue recurring ones. Jobs are claimed with FOR UPDATE SKIP LOCKED under a
-- lease; a job whose lease ran out (its worker died) is taken again.
create table jobs (
  id uuid primary key,
  queue text not null check (length(queue) between 1 and 100),
  -- Whose work it is: a tenant, or null for the platform's own. Fairness is by `party`, the same
  -- value as text ('' for the platform) so that one index can step from one party to the next.
  tenant_id uuid references tenants (id) on delete cascade,
  party text collate "C" not null generated always as (coalesce(tenant_id::text, '')) stored,
  payload jsonb not null default '{}',
  status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed', 'cancelled')),
  run_at timestamptz not null,
  attempts integer not null default 0,
  -- null: the queue's own maximum (the code's, which may change between releases).
  max_attempts integer check (max_attempts between 1 and 100),
  -- Who holds a running job and until when; only the holder records its outcome.
  lease_token uuid,
  lease_until timestamptz,
  cancel_requested boolean not null default false,
  last_error text,
  -- At most one job per queue and key (a schedule's slot): a second enqueue is a no-op.
  unique_key text,
  created_at timestamptz not null,
  started_at timestamptz,
  finished_at timestamptz
);
-- The claim: per queue, step through the parties with due jobs, then each party's next due ones.
create index jobs_queued_idx on jobs (queue, party, run_at) where status = 'queued';
-- Leases that ran out.
create index jobs_running_idx on jobs (lease_until) where status = 'running';
create unique index jobs_unique_key_idx on jobs (queue, unique_key) where unique_key is not null;
-- The sweep of finished jobs.
create index jobs_finished_idx on jobs (finished_at) where finished_at is not null;
select atrium_protect('jobs');

-- Recurring work. Every replica looks for schedules whose next slot is due (SKIP LOCKED), enqueues
-- that slot's job under a unique key and moves the schedule on: each slot runs once across all
-- replicas, and after a time when none ran, the latest missed slot runs once.
create table job_schedules (
  name text primary key check (length(name) between 1 and 200),
  queue text not null,
  tenant_id uuid references tenants (id) on delete cascade,
  payload jsonb not null default '{}',
  cron text,
  every_ms bigint check (every_ms >= 1000),
  timezone text not null default 'UTC',
  last_slot timestamptz,
  next_at timestamptz not null,
  updated_at timestamptz not null,
  check ((cron is null) <> (every_ms is null))
);
create index job_schedules_next_idx on job_schedules (next_at);
select atrium_protect('job_schedules');
