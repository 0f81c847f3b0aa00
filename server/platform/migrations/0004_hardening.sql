-- Hardening: API keys carry a tag that proves they were issued here (platform/credential-tags.ts).
-- Keys made before have none; they are found through the hashes of the untagged live keys.
alter table api_keys add column tagged boolean not null default false;
create index api_keys_untagged_idx on api_keys (id) where not tagged;

-- An account belongs to one tenant; the same address may have accounts in several, each with its
-- own password and role. An address unique across the deployment let one tenant learn that an
-- address had an account elsewhere, and reserve an address so that its own tenant could not
-- invite that person.
drop index users_email_key;
create unique index users_tenant_email_key on users (tenant_id, lower(email));
create index users_email_idx on users (lower(email));

-- Failed sign-ins are now counted in the rate-limit store (Redis, keys that expire with their
-- window): see modules/auth/throttle.ts. login_throttle is no longer used; it stays for this
-- release because servers of the previous one may still run during a rolling upgrade, and is
-- dropped by the next.

-- An OpenID Connect sign-in may name the organization to sign in to (an address with accounts in
-- several, through a provider that serves every tenant). Not the row's owner: the table stays the
-- system role's alone.
alter table oauth_states add column chosen_tenant_id uuid;
