-- Fair delivery between tenants. The worker's claim reads the next due deliveries of each endpoint
-- with work rather than the oldest due across all of them (server/modules/webhooks/fairness.ts):
-- this index finds them without reading anyone's whole backlog, one probe to step from an endpoint
-- to the next and one for its due deliveries.
create index webhook_deliveries_endpoint_due_idx on webhook_deliveries (webhook_id, next_attempt_at) where status = 'pending';
