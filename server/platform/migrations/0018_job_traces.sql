-- The W3C traceparent of the traced request that queued a job (TRACING_OTLP_ENDPOINT): the job's own
-- trace links to that request's span (server/platform/jobs.ts). Null for a job queued untraced,
-- and for every job queued before this migration. No check: a constraint would scan the table.
alter table jobs add column traceparent text;
