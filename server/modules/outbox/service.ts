// Events announce changes to webhooks. emitEvent writes the event to the outbox in the caller's
// transaction: a change that rolls back announces nothing, and one that commits is announced even
// if the process dies the moment after (the webhook worker on any replica picks it up).
import { newId } from '../../../common/ids.js'
import type { TxSql } from '../../platform/db.js'
import { insertEvent } from './store.js'

/** The channel whose NOTIFY wakes delivery workers when an event commits. */
export { EVENTS_CHANNEL } from './store.js'

/** The event kinds of the specification ("Events"). */
export const EVENT_TYPES = [
  'project.created',
  'project.updated',
  'project.deleted',
  'agent.started',
  'agent.completed',
  'agent.failed',
  'tenant.created',
  'user.created',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

/** Sent only by "send a test event", to the one endpoint it is asked for. */
export const TEST_EVENT_TYPE = 'webhook.test'

/**
 * Announces `type` for `tenantId`, in the transaction `sql` belongs to. Every event kind goes
 * through here (agents call it with agent.started, agent.completed and agent.failed).
 */
export async function emitEvent(
  sql: TxSql,
  e: { tenantId: string; type: EventType; data: Record<string, unknown> },
): Promise<void> {
  await insertEvent(sql, { id: newId(), tenantId: e.tenantId, type: e.type, data: e.data })
}

/** Timestamps as ISO 8601 UTC, so a payload reads the same as the API's answers. */
export function eventData<T extends object>(row: T): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) out[k] = v instanceof Date ? v.toISOString() : v
  return out
}
