-- A restore takes project backups too (server/modules/restores/project-backup.ts). Its options may
-- name the tenant's project the backup goes into (project_id), or ask for a new project
-- (as_new_project: then project_id is the new project's id, chosen when the restore is asked for so
-- that every attempt of its job makes the same one). No foreign key: the record outlives the project.
alter table tenant_restores
  add column project_id uuid,
  add column as_new_project boolean not null default false;
