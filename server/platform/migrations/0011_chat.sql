-- Chat sessions, their messages and their streams. A session may be bound to an agent (its system prompt) and a
-- project; deleting either unbinds the session rather than deleting the conversation.

create table chat_sessions (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  title text not null check (length(title) between 1 and 200),
  agent_id uuid,
  project_id uuid,
  message_count integer not null default 0,
  -- The assistant reply being generated, if any: one at a time per session.
  generating_id uuid,
  -- The number of the session's last stream event (chat_events.seq).
  event_seq integer not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, id),
  -- The composite keys are the wall between tenants: another tenant's agent or project cannot be bound.
  foreign key (tenant_id, agent_id) references agents (tenant_id, id) on delete set null (agent_id),
  foreign key (tenant_id, project_id) references projects (tenant_id, id) on delete set null (project_id)
);
create index chat_sessions_tenant_idx on chat_sessions (tenant_id, id desc);
select atrium_protect('chat_sessions');

create table chat_messages (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  session_id uuid not null,
  role text not null check (role in ('user', 'assistant')),
  content text not null,
  -- An assistant reply is 'generating' until it is saved whole ('completed') or ends 'failed'.
  status text not null default 'completed' check (status in ('generating', 'completed', 'failed')),
  -- {code, message} from the error catalog when failed.
  error jsonb,
  usage jsonb,
  created_at timestamptz not null default now(),
  completed_at timestamptz,
  foreign key (tenant_id, session_id) references chat_sessions (tenant_id, id) on delete cascade
);
create index chat_messages_session_idx on chat_messages (tenant_id, session_id, id);
-- The chat export reads a tenant's messages by time.
create index chat_messages_created_idx on chat_messages (tenant_id, created_at);
select atrium_protect('chat_messages');

-- The session's stream: reply deltas and outcomes, numbered per session. Last-Event-ID is seq.
create table chat_events (
  tenant_id uuid not null references tenants (id) on delete cascade,
  session_id uuid not null,
  seq integer not null,
  type text not null,
  data jsonb not null,
  created_at timestamptz not null default now(),
  primary key (session_id, seq),
  foreign key (tenant_id, session_id) references chat_sessions (tenant_id, id) on delete cascade
);
select atrium_protect('chat_events');
