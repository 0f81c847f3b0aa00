-- Backup retention. The hourly sweep (sweepExpiredBackups in server/modules/projects/service.ts)
-- reads the oldest backups first, all of them older than the shortest retention of any plan: this
-- index finds them without reading every backup the plans still keep.
create index project_backups_created_idx on project_backups (created_at, id);
