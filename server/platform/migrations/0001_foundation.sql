-- Foundation: the two roles the server acts as, tenant isolation, identity and projects.
--
-- The server runs every query as atrium_app (one tenant, chosen per transaction through the
-- app.tenant_id setting) or atrium_system (across tenants, for authentication and platform work).
-- Neither owns a table, and every tenant table has row-level security ENABLED and FORCED, so a
-- query that forgets its tenant filter still sees only its own tenant's rows.

do $$
declare
  r text;
begin
  foreach r in array array['atrium_app', 'atrium_system'] loop
    if not exists (select from pg_roles where rolname = r) then
      begin
        execute format('create role %I nologin', r);
      exception
        when duplicate_object or unique_violation then null; -- another database of this cluster made it just now
        when insufficient_privilege then
          raise exception 'the database user % may not create the role %', current_user, r
            using hint = format('As an administrator run: CREATE ROLE %I NOLOGIN; GRANT %I TO %I', r, r, current_user);
      end;
    end if;
  end loop;
end $$;
do $$ begin
  grant atrium_app, atrium_system to current_user;
exception when others then
  null; -- judged just below, with a message that says what to do
end $$;
do $$ begin
  if not (pg_has_role(current_user, 'atrium_app', 'MEMBER') and pg_has_role(current_user, 'atrium_system', 'MEMBER')) then
    raise exception 'the database user % cannot act as atrium_app and atrium_system', current_user
      using hint = format('As an administrator run: GRANT atrium_app, atrium_system TO %I', current_user);
  end if;
end $$;

alter default privileges grant select, insert, update, delete on tables to atrium_app, atrium_system;
alter default privileges grant usage, select on sequences to atrium_app, atrium_system;

create function atrium_current_tenant() returns uuid
  language sql stable
  as $$ select nullif(current_setting('app.tenant_id', true), '')::uuid $$;

-- Applies the isolation rules to a tenant table; every later migration calls it for new tables.
create function atrium_protect(tbl regclass, tenant_col text default 'tenant_id') returns void
  language plpgsql as $$
begin
  execute format('alter table %s enable row level security', tbl);
  execute format('alter table %s force row level security', tbl);
  execute format('create policy tenant_isolation on %s to atrium_app using (%I = atrium_current_tenant()) with check (%I = atrium_current_tenant())', tbl, tenant_col, tenant_col);
  execute format('create policy system_access on %s to atrium_system using (true) with check (true)', tbl);
end $$;

create table tenants (
  id uuid primary key,
  name text not null check (length(name) between 1 and 200),
  plan text not null check (plan in ('free', 'pro', 'growth', 'enterprise')),
  status text not null default 'active' check (status in ('active', 'suspended')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
select atrium_protect('tenants', 'id');

create table users (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  email text not null check (length(email) between 3 and 320),
  name text not null default '',
  role text not null check (role in ('owner', 'admin', 'member', 'viewer')),
  password_hash text,
  status text not null default 'active' check (status in ('active', 'disabled')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, id)
);
-- One account per address across the deployment: login needs only the email.
create unique index users_email_key on users (lower(email));
select atrium_protect('users');

create table api_keys (
  id uuid primary key,
  tenant_id uuid references tenants (id) on delete cascade,
  user_id uuid references users (id) on delete set null,
  name text not null default '',
  type text not null check (type in ('sdk', 'ci', 'admin')),
  prefix text not null,
  last_four text not null,
  secret_hash bytea not null unique,
  permissions text[] not null,
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz,
  created_at timestamptz not null default now(),
  -- platform operator keys act across tenants; every other key belongs to one
  check ((type = 'admin') = (tenant_id is null))
);
select atrium_protect('api_keys');

create table projects (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  name text not null,
  description text not null default '',
  language text not null default '',
  version integer not null default 1,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, id)
);
create index projects_tenant_id_idx on projects (tenant_id, id desc);
select atrium_protect('projects');

create table project_versions (
  id uuid primary key,
  tenant_id uuid not null,
  project_id uuid not null,
  version integer not null,
  name text not null,
  description text not null,
  language text not null,
  change text not null check (change in ('created', 'updated', 'restored')),
  restored_from integer,
  created_at timestamptz not null default now(),
  unique (project_id, version),
  -- the composite key keeps a version from ever pointing at another tenant's project
  foreign key (tenant_id, project_id) references projects (tenant_id, id) on delete cascade
);
select atrium_protect('project_versions');

create table project_backups (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  -- no foreign key: a backup outlives the project it was taken from
  project_id uuid not null,
  blob_key text not null,
  size bigint not null,
  checksum text not null,
  include_history boolean not null,
  include_agents boolean not null,
  created_at timestamptz not null default now()
);
create index project_backups_project_idx on project_backups (tenant_id, project_id, id desc);
select atrium_protect('project_backups');
