-- The latest time this installation has seen (platform/trusted-time.ts): a process clock set back
-- cannot make an expired license valid again, even with an embedded database whose clock is the
-- process's own. One row, raised and never lowered; only the platform reads or writes it.
create table clock_marks (
  only_row boolean primary key default true check (only_row),
  latest timestamptz not null
);
alter table clock_marks enable row level security;
alter table clock_marks force row level security;
create policy system_access on clock_marks to atrium_system using (true) with check (true);
