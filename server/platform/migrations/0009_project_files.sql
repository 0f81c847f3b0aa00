-- Project files: the workspace agents act on. The bytes live in the tenant's blob store, content
-- addressed (tenants/<t>/projects/<p>/files/<sha256>), so versions share unchanged bytes; these
-- tables hold what points at them.

-- A change of files is a version of its own kind.
alter table project_versions drop constraint project_versions_change_check;
alter table project_versions add constraint project_versions_change_check check (change in ('created', 'updated', 'restored', 'files'));
-- What a version's manifest rows point at, tenant included (the composite-key pattern of 0001).
alter table project_versions add constraint project_versions_tenant_version_key unique (tenant_id, project_id, version);

-- The current files of a project.
create table project_files (
  tenant_id uuid not null,
  project_id uuid not null,
  -- byte order ("C"): the list pages by path, and its cursor must mean the same on every database
  path text collate "C" not null check (octet_length(path) between 1 and 1024),
  blob_key text not null,
  size bigint not null check (size >= 0),
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  content_type text not null,
  -- the project version that last wrote this path
  version integer not null,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, project_id, path),
  foreign key (tenant_id, project_id) references projects (tenant_id, id) on delete cascade
);
select atrium_protect('project_files');

-- Every version's full manifest. Rows rather than a jsonb column on project_versions: a restore
-- and the snapshot after each change are one INSERT ... SELECT each, without the manifest passing
-- through the server, and a version pruned by its plan takes its manifest with it (cascade).
create table project_version_files (
  tenant_id uuid not null,
  project_id uuid not null,
  version integer not null,
  path text collate "C" not null,
  blob_key text not null,
  size bigint not null,
  sha256 text not null,
  content_type text not null,
  primary key (tenant_id, project_id, version, path),
  foreign key (tenant_id, project_id, version) references project_versions (tenant_id, project_id, version) on delete cascade
);
select atrium_protect('project_version_files');
