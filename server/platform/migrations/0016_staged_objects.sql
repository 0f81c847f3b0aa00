-- Objects uploaded for a change not made yet: a file PUT between its upload and its version, a
-- run's staged files until the run ends. Content-addressed objects are shared (the same bytes in
-- two paths, two versions, two uploads), so an object may be deleted only when nothing points at
-- it: a file, a version's manifest, or one of these. The row is written (under the object's
-- advisory lock) before the upload, and goes in the transaction that makes the change, or when
-- the change is refused; one whose change never came (the process died) expires, and the object
-- collector then removes what nothing else points at.
create table staged_objects (
  id uuid primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  blob_key text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
select atrium_protect('staged_objects');
create index staged_objects_key_idx on staged_objects (tenant_id, blob_key);
create index staged_objects_expires_idx on staged_objects (expires_at);

-- Whether anything points at an object: asked by key, for the few objects a refusal or the
-- collector is about to delete.
create index project_files_blob_key_idx on project_files (tenant_id, blob_key);
create index project_version_files_blob_key_idx on project_version_files (tenant_id, blob_key);
