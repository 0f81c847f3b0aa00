// Webhook SQL. An endpoint's owner is a tenant id, or null for a platform operator's endpoint;
// every query names it, though row-level security would also confine a tenant's.
import type { TxSql } from '../../platform/db.js'

export type Owner = string | null
export type DisabledReason = 'gone' | 'failing' | 'manual'

export interface WebhookRow {
  id: string
  tenant_id: string | null
  url: string
  description: string
  events: string[]
  secret_sealed: string
  previous_secret_sealed: string | null
  previous_secret_expires_at: Date | null
  secret_rotated_at: Date | null
  status: 'enabled' | 'disabled'
  disabled_reason: DisabledReason | null
  disabled_message: string | null
  disabled_at: Date | null
  failing_since: Date | null
  last_success_at: Date | null
  created_at: Date
  updated_at: Date
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed'

export interface DeliveryRow {
  id: string
  webhook_id: string
  event_id: string
  event_type: string
  status: DeliveryStatus
  attempts: number
  next_attempt_at: Date | null
  last_status_code: number | null
  last_error: string | null
  created_at: Date
  completed_at: Date | null
}

export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed'

export interface AttemptRow {
  id: string
  delivery_id: string
  attempt: number
  started_at: Date
  duration_ms: number
  status_code: number | null
  error: string | null
  response_excerpt: string
  outcome: AttemptOutcome
  next_attempt_at: Date | null
}

const ownedBy = (sql: TxSql, owner: Owner) => (owner === null ? sql`tenant_id is null` : sql`tenant_id = ${owner}`)
const deliveryOwnedBy = (sql: TxSql, owner: Owner) =>
  owner === null ? sql`d.tenant_id is null` : sql`d.tenant_id = ${owner}`

const COLUMNS = (sql: TxSql) => sql`
  id, tenant_id, url, description, events, secret_sealed, previous_secret_sealed, previous_secret_expires_at,
  secret_rotated_at, status, disabled_reason, disabled_message, disabled_at, failing_since, last_success_at, created_at, updated_at`

export async function insertWebhook(
  sql: TxSql,
  w: { id: string; owner: Owner; url: string; description: string; events: readonly string[]; secretSealed: string },
): Promise<WebhookRow> {
  const [row] = await sql<WebhookRow[]>`
    insert into webhooks (id, tenant_id, url, description, events, secret_sealed)
    values (${w.id}, ${w.owner}, ${w.url}, ${w.description}, ${w.events as string[]}, ${w.secretSealed})
    returning ${COLUMNS(sql)}`
  return row!
}

// Registrations of one tenant take this lock (for their transaction) before counting, so that two
// at once cannot both see room for one more under the plan's limit. Two keys: this namespace and the
// tenant (a collision between tenants only makes one wait for the other's registration).
const CREATE_LOCK_SPACE = 724_201_905

/** How many endpoints the tenant has, counted after waiting for any other registration of its in progress. */
export async function countWebhooksForCreation(sql: TxSql, tenantId: string): Promise<number> {
  await sql`select pg_advisory_xact_lock(${CREATE_LOCK_SPACE}::int, hashtext(${tenantId}))`
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from webhooks where tenant_id = ${tenantId}`
  return row!.n
}

export function selectWebhook(sql: TxSql, owner: Owner, id: string, opts: { lock?: boolean } = {}) {
  return sql<WebhookRow[]>`
    select ${COLUMNS(sql)} from webhooks where ${ownedBy(sql, owner)} and id = ${id} ${opts.lock ? sql`for update` : sql``}`
}

/** Newest first. */
export function listWebhooks(sql: TxSql, owner: Owner, limit: number, before: string | null) {
  return sql<WebhookRow[]>`
    select ${COLUMNS(sql)} from webhooks
     where ${ownedBy(sql, owner)} ${before ? sql`and id < ${before}` : sql``}
     order by id desc limit ${limit}`
}

export interface WebhookChange {
  url: string
  description: string
  events: readonly string[]
  status: 'enabled' | 'disabled'
  disabledReason: DisabledReason | null
  disabledMessage: string | null
  disabledAt: Date | null
  failingSince: Date | null
}

export async function updateWebhook(
  sql: TxSql,
  owner: Owner,
  id: string,
  c: WebhookChange,
  at: Date,
): Promise<WebhookRow> {
  const [row] = await sql<WebhookRow[]>`
    update webhooks set url = ${c.url}, description = ${c.description}, events = ${c.events as string[]}, status = ${c.status},
           disabled_reason = ${c.disabledReason}, disabled_message = ${c.disabledMessage}, disabled_at = ${c.disabledAt},
           failing_since = ${c.failingSince}, updated_at = ${at}
     where ${ownedBy(sql, owner)} and id = ${id}
    returning ${COLUMNS(sql)}`
  return row!
}

export async function rotateSecret(
  sql: TxSql,
  owner: Owner,
  id: string,
  r: { secretSealed: string; previousSealed: string | null; previousExpiresAt: Date | null; at: Date },
): Promise<WebhookRow> {
  const [row] = await sql<WebhookRow[]>`
    update webhooks set secret_sealed = ${r.secretSealed}, previous_secret_sealed = ${r.previousSealed},
           previous_secret_expires_at = ${r.previousExpiresAt}, secret_rotated_at = ${r.at}, updated_at = ${r.at}
     where ${ownedBy(sql, owner)} and id = ${id}
    returning ${COLUMNS(sql)}`
  return row!
}

export function deleteWebhook(sql: TxSql, owner: Owner, id: string) {
  return sql<{ id: string }[]>`delete from webhooks where ${ownedBy(sql, owner)} and id = ${id} returning id`
}

/**
 * Pending deliveries of an endpoint that stopped: they will not be tried. One being attempted right
 * now is left to its worker, which fails it when it records the attempt (unless it succeeded).
 */
export function failPendingDeliveries(sql: TxSql, webhookId: string, at: Date) {
  return sql`
    update webhook_deliveries set status = 'failed', next_attempt_at = null, last_error = 'The endpoint was disabled', completed_at = ${at}
     where webhook_id = ${webhookId} and status = 'pending' and (leased_until is null or leased_until < clock_timestamp())`
}

// ---- deliveries, as the endpoint's owner sees them ------------------------------------------

const DELIVERY = (sql: TxSql) => sql`
  d.id, d.webhook_id, d.event_id, e.type as event_type, d.status, d.attempts, d.next_attempt_at,
  d.last_status_code, d.last_error, d.created_at, d.completed_at`

/** Newest first; `status` narrows to one state. */
export function listDeliveries(
  sql: TxSql,
  owner: Owner,
  webhookId: string,
  o: { limit: number; before: string | null; status?: DeliveryStatus },
) {
  return sql<DeliveryRow[]>`
    select ${DELIVERY(sql)} from webhook_deliveries d join webhook_events e on e.id = d.event_id
     where ${deliveryOwnedBy(sql, owner)} and d.webhook_id = ${webhookId}
       ${o.status ? sql`and d.status = ${o.status}` : sql``} ${o.before ? sql`and d.id < ${o.before}` : sql``}
     order by d.id desc limit ${o.limit}`
}

export function selectDelivery(sql: TxSql, owner: Owner, webhookId: string, id: string) {
  return sql<DeliveryRow[]>`
    select ${DELIVERY(sql)} from webhook_deliveries d join webhook_events e on e.id = d.event_id
     where ${deliveryOwnedBy(sql, owner)} and d.webhook_id = ${webhookId} and d.id = ${id}`
}

export function selectAttempts(sql: TxSql, deliveryIds: readonly string[]) {
  return sql<AttemptRow[]>`
    select id, delivery_id, attempt, started_at, duration_ms, status_code, error, response_excerpt, outcome, next_attempt_at
      from webhook_attempts where delivery_id = any(${deliveryIds as string[]}) order by delivery_id, attempt`
}

/** A finished delivery goes back in the queue, due at `at`; nothing when it is still pending. */
export function requeueDelivery(sql: TxSql, owner: Owner, webhookId: string, id: string, at: Date) {
  return sql<{ id: string }[]>`
    update webhook_deliveries set status = 'pending', next_attempt_at = ${at}, completed_at = null
     where ${ownedBy(sql, owner)} and webhook_id = ${webhookId} and id = ${id} and status <> 'pending'
    returning id`
}

/** An event for one endpoint only (a test event): already dispatched, its delivery due at `at`. */
export async function insertDirectEvent(
  sql: TxSql,
  e: {
    eventId: string
    deliveryId: string
    owner: Owner
    webhookId: string
    type: string
    data: Record<string, unknown>
    at: Date
  },
): Promise<void> {
  await sql`
    insert into webhook_events (id, tenant_id, type, data, created_at, dispatched_at)
    values (${e.eventId}, ${e.owner}, ${e.type}, ${sql.json(e.data as never)}, ${e.at}, ${e.at})`
  await sql`
    insert into webhook_deliveries (id, webhook_id, event_id, tenant_id, next_attempt_at, created_at)
    values (${e.deliveryId}, ${e.webhookId}, ${e.eventId}, ${e.owner}, ${e.at}, ${e.at})`
}

// ---- the worker's side (system role) --------------------------------------------------------

/**
 * Fans out up to `limit` undispatched events to the enabled endpoints subscribed to them (their
 * tenant's and the platform's), in one statement. SKIP LOCKED lets replicas share the work.
 */
export async function dispatchEvents(
  sql: TxSql,
  limit: number,
  at: Date,
): Promise<{ events: number; deliveries: number }> {
  const [row] = await sql<{ events: number; deliveries: number }[]>`
    with ev as (
      select id, tenant_id, type, created_at from webhook_events
       where dispatched_at is null order by id limit ${limit} for update skip locked
    ), fanned as (
      insert into webhook_deliveries (id, webhook_id, event_id, tenant_id, next_attempt_at, created_at)
      select atrium_uuid_v7(), w.id, ev.id, w.tenant_id, ${at}, ${at}
        from ev join webhooks w on (w.tenant_id = ev.tenant_id or w.tenant_id is null)
                               and ev.type = any(w.events) and w.status = 'enabled'
                               -- an endpoint hears what happens after it is registered, even when
                               -- the fan-out runs later
                               and w.created_at <= ev.created_at
      on conflict (webhook_id, event_id) do nothing
      returning 1
    ), marked as (
      update webhook_events set dispatched_at = ${at} where id in (select id from ev) returning 1
    )
    select (select count(*) from marked)::int as events, (select count(*) from fanned)::int as deliveries`
  return row!
}

export interface ClaimedDelivery {
  id: string
  attempts: number
  /** The claim's token: the lease's end. */
  leased_until: Date
  webhook_id: string
  webhook_tenant_id: string | null
  /** Whether the endpoint was known to work when claimed (platform/fairness.ts). */
  healthy: boolean
  url: string
  secret_sealed: string
  previous_secret_sealed: string | null
  previous_secret_expires_at: Date | null
  event_id: string
  event_tenant_id: string | null
  event_type: string
  data: Record<string, unknown>
  event_created_at: Date
}

/** An endpoint is known to work when an attempt has succeeded and none has failed since. */
const KNOWN_TO_WORK = (sql: TxSql) => sql`(w.failing_since is null and w.last_success_at is not null)`

export interface DueDelivery {
  id: string
  webhook_id: string
  tenant_id: string | null
  next_attempt_at: Date
  healthy: boolean
}

/**
 * The next deliveries due at `at` (the app's clock) and not leased, of every enabled endpoint that
 * has any: up to `perEndpoint` each, and one for an endpoint not known to work (it may hold no
 * more). The endpoints are found by stepping through the pending deliveries' index one endpoint at
 * a time (a loose index scan): the cost follows how many endpoints have work, not how long anyone's
 * backlog is. Nothing is locked: the lease takes what it still can.
 */
export function dueDeliveries(sql: TxSql, at: Date, perEndpoint: number) {
  return sql<DueDelivery[]>`
    with recursive endpoints (id) as (
      (select webhook_id from webhook_deliveries where status = 'pending' order by webhook_id limit 1)
      union all
      select (select d.webhook_id from webhook_deliveries d where d.status = 'pending' and d.webhook_id > e.id order by d.webhook_id limit 1)
        from endpoints e where e.id is not null
    )
    select d.id, w.id as webhook_id, w.tenant_id, d.next_attempt_at, ${KNOWN_TO_WORK(sql)} as healthy
      from endpoints e
      join webhooks w on w.id = e.id and w.status = 'enabled'
     cross join lateral (
       select d.id, d.next_attempt_at from webhook_deliveries d
        where d.webhook_id = w.id and d.status = 'pending' and d.next_attempt_at <= ${at}
          and (d.leased_until is null or d.leased_until < clock_timestamp())
        order by d.next_attempt_at
        limit case when ${KNOWN_TO_WORK(sql)} then ${perEndpoint}::int else 1 end
     ) d`
}

/**
 * Leases the first `limit` of `ranked` (delivery ids, in the order to take them) that are still
 * due, not leased and not being claimed by another replica right now (SKIP LOCKED), for `leaseMs`
 * on the database's clock, the one every replica shares. Returned in that order.
 */
export function leaseDeliveries(sql: TxSql, ranked: readonly string[], limit: number, at: Date, leaseMs: number) {
  return sql<ClaimedDelivery[]>`
    with due as (
      select d.id, r.n from unnest(${ranked as string[]}::uuid[]) with ordinality as r (id, n)
        join webhook_deliveries d on d.id = r.id
       where d.status = 'pending' and d.next_attempt_at <= ${at}
         and (d.leased_until is null or d.leased_until < clock_timestamp())
         and exists (select 1 from webhooks w where w.id = d.webhook_id and w.status = 'enabled')
       order by r.n limit ${limit}
       for update of d skip locked
    ), claimed as (
      -- whole milliseconds: the token goes to JavaScript and back, and a Date holds no microseconds
      update webhook_deliveries d set leased_until = date_trunc('milliseconds', clock_timestamp() + make_interval(secs => ${leaseMs / 1000}))
        from due where d.id = due.id
      returning d.id, d.attempts, d.leased_until, d.webhook_id, d.event_id, due.n
    )
    select c.id, c.attempts, c.leased_until, w.id as webhook_id, w.tenant_id as webhook_tenant_id, ${KNOWN_TO_WORK(sql)} as healthy,
           w.url, w.secret_sealed, w.previous_secret_sealed, w.previous_secret_expires_at, e.id as event_id, e.tenant_id as event_tenant_id,
           e.type as event_type, e.data, e.created_at as event_created_at
      from claimed c join webhooks w on w.id = c.webhook_id join webhook_events e on e.id = c.event_id
     order by c.n`
}

/** Seconds the oldest delivery due at `at` and not being attempted has waited; 0 when none waits. */
export async function oldestDueSeconds(sql: TxSql, at: Date): Promise<number> {
  const [row] = await sql<{ age: number | null }[]>`
    select extract(epoch from ${at}::timestamptz - min(next_attempt_at))::float8 as age from webhook_deliveries
     where status = 'pending' and next_attempt_at <= ${at} and (leased_until is null or leased_until < clock_timestamp())`
  return Math.max(0, row?.age ?? 0)
}

/** Gives claims back (a worker stopping before it began them): due again at once, for any worker. */
export async function releaseClaims(
  sql: TxSql,
  claims: readonly Pick<ClaimedDelivery, 'id' | 'leased_until'>[],
): Promise<void> {
  for (const c of claims)
    await sql`update webhook_deliveries set leased_until = null where id = ${c.id} and leased_until = ${c.leased_until}`
}

export interface AttemptResult {
  deliveryId: string
  attempt: number
  startedAt: Date
  durationMs: number
  statusCode: number | null
  error: string | null
  excerpt: string
  outcome: AttemptOutcome
  nextAttemptAt: Date | null
}

/**
 * Records an attempt, and its outcome on the delivery when this worker still holds the claim
 * (`lease`): a claim lost meanwhile (the lease ran out and another worker took the delivery) must
 * not overwrite what that worker does. The attempt itself is recorded either way: it happened.
 * One statement. False when the delivery is gone (its endpoint was deleted meanwhile).
 */
export async function recordAttempt(sql: TxSql, id: string, r: AttemptResult, lease: Date): Promise<boolean> {
  const done = r.outcome !== 'retrying'
  const rows = await sql`
    with updated as (
      update webhook_deliveries
         set attempts = ${r.attempt}, status = ${r.outcome === 'retrying' ? 'pending' : r.outcome}, next_attempt_at = ${r.nextAttemptAt},
             leased_until = null, last_status_code = ${r.statusCode}, last_error = ${r.error},
             completed_at = ${done ? new Date(r.startedAt.getTime() + r.durationMs) : null}
       where id = ${r.deliveryId} and leased_until = ${lease}
      returning tenant_id, true as held
    ), delivery as (
      select tenant_id, held from updated
      union all
      select tenant_id, false from webhook_deliveries where id = ${r.deliveryId} and not exists (select 1 from updated)
    )
    insert into webhook_attempts (id, delivery_id, tenant_id, attempt, started_at, duration_ms, status_code, error, response_excerpt, outcome, next_attempt_at)
    select ${id}, ${r.deliveryId}, tenant_id, ${r.attempt}, ${r.startedAt}, ${r.durationMs}, ${r.statusCode}, ${r.error},
           ${r.excerpt}, ${r.outcome}, case when held then ${r.nextAttemptAt}::timestamptz end
      from delivery
    returning 1`
  return rows.length > 0
}

export interface EndpointState {
  status: 'enabled' | 'disabled'
  failing_since: Date | null
}

/**
 * A failed attempt starts or continues the endpoint's run of failures. Recording a failure calls
 * this first, so the endpoint's row is locked before the delivery's, the order disabling an
 * endpoint takes (no deadlock between the two).
 */
export async function noteFailure(sql: TxSql, webhookId: string, at: Date): Promise<EndpointState | undefined> {
  const [row] = await sql<EndpointState[]>`
    update webhooks set failing_since = coalesce(failing_since, ${at}) where id = ${webhookId} returning status, failing_since`
  return row
}

/**
 * A success ends the run of failures. The endpoint's row is written (and locked) only when that
 * changes something or last_success_at is a minute old: a busy endpoint's successes must not all
 * queue for one row.
 */
export async function noteSuccess(sql: TxSql, webhookId: string, at: Date): Promise<void> {
  await sql`
    update webhooks set failing_since = null, last_success_at = ${at}
     where id = ${webhookId} and (failing_since is not null or last_success_at is null or last_success_at < ${new Date(at.getTime() - 60_000)})`
}

/** Stops an enabled endpoint; false when it was already stopped (or is gone). */
export async function disableWebhook(
  sql: TxSql,
  webhookId: string,
  reason: DisabledReason,
  message: string,
  at: Date,
): Promise<boolean> {
  const rows = await sql`
    update webhooks set status = 'disabled', disabled_reason = ${reason}, disabled_message = ${message}, disabled_at = ${at}, updated_at = ${at}
     where id = ${webhookId} and status = 'enabled' returning id`
  return rows.length > 0
}

/**
 * Deletes events older than `before` that nothing still waits to deliver (their deliveries and attempts go with them).
 */
export async function sweepEvents(sql: TxSql, before: Date): Promise<number | null> {
  const [lock] = await sql<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(hashtext('atrium:webhook-sweep')) as ok`
  if (!lock?.ok) return null
  const rows = await sql`
    delete from webhook_events e
     where e.created_at < ${before} and e.dispatched_at is not null
       and not exists (select 1 from webhook_deliveries d where d.event_id = e.id and d.status = 'pending')
    returning 1`
  return rows.length
}
