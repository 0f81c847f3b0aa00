-- Identity and access: sessions and their rotating tokens, login throttling, CLI device logins,
-- OAuth sign-in state, invitations, tenant LLM settings and the audit log.

-- 'invited': a member added by an admin who has not yet chosen a password or signed in.
alter table users drop constraint users_status_check;
alter table users add constraint users_status_check check (status in ('active', 'disabled', 'invited'));
alter table users add column last_login_at timestamptz;

-- An identity session: what a sign-in (password, OpenID Connect, CLI device login) creates. Access
-- tokens (JWTs) name it in their sid claim, so revoking it ends every token minted from it.
create table identity_sessions (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  user_id uuid not null,
  method text not null check (method in ('password', 'oidc', 'cli', 'invitation')),
  ip text not null default '',
  user_agent text not null default '',
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  foreign key (tenant_id, user_id) references users (tenant_id, id) on delete cascade
);
create index identity_sessions_user_idx on identity_sessions (user_id);
select atrium_protect('identity_sessions');

-- The session token is a refresh token: each refresh retires it and issues the next. Showing a
-- retired one again means it was copied, and ends the session (reuse detection).
create table session_tokens (
  hash bytea primary key,
  session_id uuid not null references identity_sessions (id) on delete cascade,
  tenant_id uuid not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz
);
create index session_tokens_session_idx on session_tokens (session_id);
select atrium_protect('session_tokens');

-- Failed logins per email address (hashed), whether or not an account has it: the answer to a
-- locked address is the same for a real and a made-up one, so lockout reveals nothing.
create table login_throttle (
  email_hash bytea primary key,
  failures integer not null default 0,
  locked_until timestamptz,
  updated_at timestamptz not null default now()
);
revoke all on login_throttle from atrium_app;

-- CLI device login (API-SPEC "CLI login session"). No tenant until a signed-in user approves it.
create table cli_logins (
  login_id text primary key,
  state text not null,
  code_challenge text not null,
  cli_version text not null,
  platform text not null,
  verification_code text not null,
  status text not null default 'pending' check (status in ('pending', 'approved', 'consumed')),
  requester_ip text not null default '',
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  tenant_id uuid references tenants (id) on delete cascade,
  user_id uuid,
  approved_at timestamptz,
  approved_ip text,
  consumed_at timestamptz
);
create index cli_logins_expires_idx on cli_logins (expires_at);
-- Only the system role works here (a login has no tenant until approved); the rules still apply
-- so that a grant added by mistake exposes nothing.
select atrium_protect('cli_logins');
revoke all on cli_logins from atrium_app;

-- OpenID Connect sign-ins in flight: state, nonce and PKCE verifier between start and authorize.
create table oauth_states (
  state_hash bytea primary key,
  provider text not null,
  nonce text not null,
  code_verifier text not null,
  browser_hash bytea not null,
  return_to text not null default '',
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index oauth_states_expires_idx on oauth_states (expires_at);
revoke all on oauth_states from atrium_app;

-- A member invited by an admin accepts with this token and chooses a password.
create table invitations (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  user_id uuid not null,
  token_hash bytea not null unique,
  invited_by uuid,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  foreign key (tenant_id, user_id) references users (tenant_id, id) on delete cascade
);
select atrium_protect('invitations');

-- The tenant's LLM connection. The API key is write-only: sealed by the secrets adapter.
create table tenant_llm_settings (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  provider text not null default 'openai-compatible',
  base_url text not null default '',
  model text not null default '',
  temperature double precision,
  max_tokens integer,
  api_key_sealed text,
  api_key_last_four text,
  updated_at timestamptz not null default now(),
  updated_by uuid
);
select atrium_protect('tenant_llm_settings');

-- Security-relevant actions, kept per the tenant's plan (free: none; pro 30 days; growth 90;
-- enterprise 1 year).
create table audit_events (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  actor_type text not null check (actor_type in ('user', 'api_key', 'system', 'anonymous')),
  actor_id uuid,
  action text not null,
  target_type text not null default '',
  target_id text not null default '',
  ip text not null default '',
  user_agent text not null default '',
  details jsonb not null default '{}',
  created_at timestamptz not null default now()
);
create index audit_events_tenant_idx on audit_events (tenant_id, id desc);
-- The retention sweep deletes per tenant by age; since/until filters read by age too.
create index audit_events_tenant_created_idx on audit_events (tenant_id, created_at);
select atrium_protect('audit_events');

-- A tenant's API keys, newest first (the key management list).
create index api_keys_tenant_idx on api_keys (tenant_id, id desc);

create function atrium_audit_retention(plan text) returns interval
  language sql immutable
  as $$ select case plan when 'pro' then interval '30 days' when 'growth' then interval '90 days'
                         when 'enterprise' then interval '1 year' else interval '0' end $$;
