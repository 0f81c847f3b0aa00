-- Agents and their runs. A run is durable: its conversation, steps, usage and the file changes it
-- has staged are written after every step, so a run taken over by another replica (its worker died)
-- resumes where the last step ended. Its events are rows too: a stream on any replica reads them,
-- and Last-Event-ID is the event's sequence number.

create table agents (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  system_prompt text not null default '',
  -- {autonomyLevel, model, temperature, maxSteps, tools}: checked by the service, kept whole.
  config jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, id)
);
create index agents_tenant_idx on agents (tenant_id, id desc);
select atrium_protect('agents');

create table agent_runs (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  agent_id uuid not null,
  project_id uuid not null,
  goal text not null,
  status text not null check (status in ('queued', 'running', 'completed', 'failed', 'cancelled')),
  output text,
  -- {code, message} from the error catalog when failed.
  error jsonb,
  usage jsonb not null default '{"inputTokens": 0, "outputTokens": 0}',
  -- Tool calls with their arguments and results, bounded (the service keeps the newest).
  steps jsonb not null default '[]',
  -- The conversation handed to the model at the next step: what a resumed run continues from.
  messages jsonb not null default '[]',
  -- File changes staged by the run, applied as one project version when it completes.
  pending_files jsonb not null default '[]',
  -- The agent as it was when the run was started: a later edit does not change a run in flight.
  agent_snapshot jsonb not null,
  -- Who started it (kind, id, userId): the actor of the project version and the audit entries.
  started_by jsonb not null,
  job_id uuid,
  event_seq integer not null default 0,
  project_version integer,
  cancel_requested boolean not null default false,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now(),
  -- The composite keys are the wall between tenants: another tenant's agent or project cannot be named.
  foreign key (tenant_id, agent_id) references agents (tenant_id, id) on delete cascade,
  foreign key (tenant_id, project_id) references projects (tenant_id, id) on delete cascade
);
create index agent_runs_agent_idx on agent_runs (tenant_id, agent_id, id desc);
-- The per-plan limit on runs in progress counts these.
create index agent_runs_active_idx on agent_runs (tenant_id) where status in ('queued', 'running');
select atrium_protect('agent_runs');

create table agent_run_events (
  tenant_id uuid not null references tenants (id) on delete cascade,
  run_id uuid not null references agent_runs (id) on delete cascade,
  seq integer not null,
  type text not null,
  data jsonb not null,
  created_at timestamptz not null default now(),
  primary key (run_id, seq)
);
select atrium_protect('agent_run_events');
