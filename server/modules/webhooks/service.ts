// Webhook endpoints: registered by a tenant (its own events) or by a platform operator (every
// tenant's). The URL is judged by the outbound policy when registered and again, by the worker,
// at every connection; the secret is sealed because signing needs it in the clear.
import type { Actor } from '../../domain/actor.js'
import { AppError, forbidden, invalid, notFound } from '../../domain/errors.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import { outboundUrl } from '../../domain/outbound-url.js'
import { PLAN_TERMS, type Plan } from '../../domain/plans.js'
import { planOf } from '../../domain/principal.js'
import { newId } from '../../../common/ids.js'
import type { Db, TxSql } from '../../platform/db.js'
import { outboundHostAllowed, type CompiledPolicy } from '../../platform/outbound.js'
import type { SecretContext, Secrets } from '../../platform/secrets.js'
import { dateClock, type Clock } from '../../clock.js'
import { auditBy } from '../audit/service.js'
import { EVENT_TYPES, TEST_EVENT_TYPE, type EventType } from '../outbox/service.js'
import { generateSecret, secretProblem } from './signing.js'
import * as store from './store.js'
import type { DeliveryRow, DeliveryStatus, Owner, WebhookRow } from './store.js'

/** How long the previous secret keeps signing after a rotation, unless asked otherwise. */
export const DEFAULT_OVERLAP_SECONDS = 24 * 3600
export const MAX_OVERLAP_SECONDS = 7 * 24 * 3600
export const MAX_URL_LENGTH = 2048

/** Events a tenant's own endpoint can hear: a tenant exists before any of its endpoints. */
export const TENANT_EVENT_TYPES = EVENT_TYPES.filter((e) => e !== 'tenant.created')

export interface CreateInput {
  url: string
  events: EventType[]
  secret: string
  description?: string
}
export interface PatchInput {
  url?: string
  events?: EventType[]
  description?: string
  enabled?: boolean
}

export const secretContext = (owner: Owner, webhookId: string, field: 'secret' | 'previous_secret'): SecretContext => ({
  tenantId: owner ?? 'platform',
  table: 'webhooks',
  rowId: webhookId,
  field,
})

export function webhooksService(deps: {
  db: Db
  secrets: Secrets
  /** The outbound policy (OUTBOUND_ALLOWED_NETWORKS, AIR_GAPPED), compiled. */
  policy: CompiledPolicy
  /** WEBHOOK_ALLOW_HTTP */
  allowHttp: boolean
  now?: Clock
  /** Tells this replica's worker that a delivery is due now (a test event, a retry). */
  onDue?: () => void
}) {
  const { db, secrets, policy } = deps
  const now = dateClock(deps.now)
  const inScope = <T>(owner: Owner, fn: (sql: TxSql) => Promise<T>) =>
    owner === null ? db.system(fn) : db.tenant(owner, fn)
  const due = () => deps.onDue?.()

  const found = <T>(what: string, id: string, rows: readonly T[]): T => {
    if (!rows[0]) throw notFound(what, id)
    return rows[0]
  }
  const load = async (sql: TxSql, owner: Owner, id: string, lock = false) =>
    found('webhook', id, await store.selectWebhook(sql, owner, id, { lock }))

  const record = (sql: TxSql, a: Actor<Owner>, action: string, webhookId: string, details: Record<string, unknown>) =>
    a.tenantId === null
      ? Promise.resolve() // the platform's endpoints belong to no tenant's audit log
      : auditBy(sql, { ...a, tenantId: a.tenantId }, { action, target: { type: 'webhook', id: webhookId }, details })

  /** The URL as stored, or VALIDATION_ERROR saying why the server would not call it. */
  async function checkUrl(value: string): Promise<string> {
    const text = value.trim()
    const url = outboundUrl('url', text, {
      allowHttp: deps.allowHttp,
      httpRefused: 'must be an https URL (http is accepted only when the deployment sets WEBHOOK_ALLOW_HTTP=true)',
      credentials: 'receivers authenticate deliveries by their signature',
    })
    if (url.hash) throw invalid('url', 'must not contain a #fragment (it is never sent)')
    if (text.length > MAX_URL_LENGTH) throw invalid('url', `must be at most ${MAX_URL_LENGTH} characters`)
    await outboundHostAllowed('url', url, policy) // and again at every delivery
    return text
  }

  function checkEvents(owner: Owner, events: readonly EventType[]): EventType[] {
    const unique = [...new Set(events)]
    if (owner !== null && unique.includes('tenant.created')) {
      throw invalid(
        'events',
        'tenant.created is announced to platform endpoints (/api/v1/platform/webhooks): a tenant exists before its own endpoints',
      )
    }
    return unique
  }

  function checkSecret(field: string, secret: string) {
    const problem = secretProblem(secret)
    if (problem) throw invalid(field, problem)
  }

  /**
   * FORBIDDEN when the tenant already has as many endpoints as its plan allows. Counted under a
   * lock held to the end of the registration's transaction: two at once cannot both take the last place.
   */
  async function checkRoom(sql: TxSql, tenantId: string, plan: Plan) {
    const limit = PLAN_TERMS[plan].limits.webhookEndpoints
    const count = await store.countWebhooksForCreation(sql, tenantId)
    if (count >= limit) {
      throw forbidden(
        `The ${plan} plan allows ${limit} webhook endpoint${limit === 1 ? '' : 's'} and this tenant has ${count}: delete one, or move to a larger plan`,
        {
          reason: 'plan_limit',
          limit,
          plan,
        },
      )
    }
  }

  return {
    async create(a: Actor<Owner>, input: CreateInput): Promise<WebhookRow> {
      const url = await checkUrl(input.url)
      const events = checkEvents(a.tenantId, input.events)
      checkSecret('secret', input.secret)
      const id = newId()
      return inScope(a.tenantId, async (sql) => {
        // The platform's own endpoints are the operator's to size; a tenant's take its plan's share.
        if (a.tenantId !== null) await checkRoom(sql, a.tenantId, planOf(a.principal))
        const row = await store.insertWebhook(sql, {
          id,
          owner: a.tenantId,
          url,
          events,
          description: input.description?.trim() ?? '',
          secretSealed: secrets.encrypt(input.secret, secretContext(a.tenantId, id, 'secret')),
        })
        await record(sql, a, 'webhook.created', id, { url, events })
        return row
      })
    },

    async list(owner: Owner, page: { limit: number; cursor?: string }) {
      const before = decodeIdCursor(page.cursor)
      const rows = await inScope(owner, (sql) => store.listWebhooks(sql, owner, page.limit + 1, before))
      return toPage(rows, page.limit, (w) => w.id)
    },

    get: (owner: Owner, id: string) => inScope(owner, (sql) => load(sql, owner, id)),

    async update(a: Actor<Owner>, id: string, patch: PatchInput): Promise<WebhookRow> {
      const url = patch.url === undefined ? undefined : await checkUrl(patch.url)
      const events = patch.events === undefined ? undefined : checkEvents(a.tenantId, patch.events)
      return inScope(a.tenantId, async (sql) => {
        const current = await load(sql, a.tenantId, id, true)
        const at = now()
        const enabled = patch.enabled ?? current.status === 'enabled'
        const reenabled = enabled && current.status === 'disabled'
        const change: store.WebhookChange = {
          url: url ?? current.url,
          description: patch.description?.trim() ?? current.description,
          events: events ?? current.events,
          status: enabled ? 'enabled' : 'disabled',
          // Enabling starts afresh: the old run of failures no longer counts towards disabling it.
          disabledReason: enabled ? null : (current.disabled_reason ?? 'manual'),
          disabledMessage: enabled ? null : (current.disabled_message ?? 'Disabled by a person'),
          disabledAt: enabled ? null : (current.disabled_at ?? at),
          failingSince: reenabled ? null : current.failing_since,
        }
        const changed = [
          change.url !== current.url && 'url',
          change.description !== current.description && 'description',
          (change.events.length !== current.events.length || change.events.some((e, i) => e !== current.events[i])) &&
            'events',
          change.status !== current.status && 'enabled',
        ].filter((f): f is string => Boolean(f))
        if (!changed.length) return current
        const row = await store.updateWebhook(sql, a.tenantId, id, change, at)
        if (change.status === 'disabled' && current.status === 'enabled') await store.failPendingDeliveries(sql, id, at)
        await record(sql, a, 'webhook.updated', id, {
          fields: changed,
          ...(changed.includes('enabled') ? { enabled } : {}),
        })
        return row
      })
    },

    remove: (a: Actor<Owner>, id: string) =>
      inScope(a.tenantId, async (sql) => {
        found('webhook', id, await store.deleteWebhook(sql, a.tenantId, id))
        await record(sql, a, 'webhook.deleted', id, {})
      }),

    /**
     * A new secret (the one given, or a generated one returned once). The previous secret keeps
     * signing beside it for `overlapSeconds`, so receivers can switch without missing a delivery.
     */
    async rotateSecret(
      a: Actor<Owner>,
      id: string,
      input: { secret?: string; overlapSeconds?: number },
    ): Promise<{ webhook: WebhookRow; secret: string | null }> {
      if (input.secret !== undefined) checkSecret('secret', input.secret)
      const secret = input.secret ?? generateSecret()
      const overlap = input.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS
      const webhook = await inScope(a.tenantId, async (sql) => {
        const current = await load(sql, a.tenantId, id, true)
        const at = now()
        const previous =
          overlap > 0 ? secrets.decrypt(current.secret_sealed, secretContext(a.tenantId, id, 'secret')) : null
        const row = await store.rotateSecret(sql, a.tenantId, id, {
          secretSealed: secrets.encrypt(secret, secretContext(a.tenantId, id, 'secret')),
          previousSealed:
            previous === null ? null : secrets.encrypt(previous, secretContext(a.tenantId, id, 'previous_secret')),
          previousExpiresAt: previous === null ? null : new Date(at.getTime() + overlap * 1000),
          at,
        })
        await record(sql, a, 'webhook.secret_rotated', id, {
          overlapSeconds: overlap,
          generated: input.secret === undefined,
        })
        return row
      })
      return { webhook, secret: input.secret === undefined ? secret : null }
    },

    /** A webhook.test event to this endpoint alone, signed and retried like any other. */
    async sendTest(a: Actor<Owner>, id: string): Promise<DeliveryRow> {
      const delivery = await inScope(a.tenantId, async (sql) => {
        const w = await load(sql, a.tenantId, id)
        if (w.status !== 'enabled') {
          throw new AppError('VALIDATION_ERROR', 'The endpoint is disabled: enable it before sending a test event', {
            errors: [{ field: 'id', message: 'is disabled' }],
            reason: 'webhook_disabled',
          })
        }
        const eventId = newId()
        const deliveryId = newId()
        await store.insertDirectEvent(sql, {
          eventId,
          deliveryId,
          owner: a.tenantId,
          webhookId: id,
          type: TEST_EVENT_TYPE,
          at: now(),
          data: {
            webhookId: id,
            message: 'A test event sent from Atrium. Verify its signature as you would any other.',
          },
        })
        return found('delivery', deliveryId, await store.selectDelivery(sql, a.tenantId, id, deliveryId))
      })
      due()
      return delivery
    },

    /** Deliveries to an endpoint, newest first, each with its attempts. */
    async deliveries(owner: Owner, webhookId: string, q: { limit: number; cursor?: string; status?: DeliveryStatus }) {
      const before = decodeIdCursor(q.cursor)
      const { rows, attempts } = await inScope(owner, async (sql) => {
        await load(sql, owner, webhookId)
        const rows = await store.listDeliveries(sql, owner, webhookId, {
          limit: q.limit + 1,
          before,
          ...(q.status ? { status: q.status } : {}),
        })
        return {
          rows,
          attempts: rows.length
            ? await store.selectAttempts(
                sql,
                rows.slice(0, q.limit).map((d) => d.id),
              )
            : [],
        }
      })
      return { ...toPage(rows, q.limit, (d) => d.id), attempts }
    },

    delivery: (owner: Owner, webhookId: string, id: string) =>
      inScope(owner, async (sql) => {
        await load(sql, owner, webhookId)
        const delivery = found('delivery', id, await store.selectDelivery(sql, owner, webhookId, id))
        return { delivery, attempts: await store.selectAttempts(sql, [id]) }
      }),

    /** One more attempt, now, of a delivery that succeeded or gave up; same event, same webhook-id. */
    async retryDelivery(a: Actor<Owner>, webhookId: string, id: string) {
      const r = await inScope(a.tenantId, async (sql) => {
        const w = await load(sql, a.tenantId, webhookId)
        const delivery = found('delivery', id, await store.selectDelivery(sql, a.tenantId, webhookId, id))
        if (w.status !== 'enabled') {
          throw new AppError('VALIDATION_ERROR', 'The endpoint is disabled: enable it before retrying a delivery', {
            errors: [{ field: 'webhookId', message: 'is disabled' }],
            reason: 'webhook_disabled',
          })
        }
        if (delivery.status === 'pending') {
          throw new AppError(
            'VALIDATION_ERROR',
            'The delivery is still being tried; it can be retried once it has succeeded or failed',
            {
              errors: [{ field: 'deliveryId', message: 'is pending' }],
              reason: 'delivery_pending',
            },
          )
        }
        await store.requeueDelivery(sql, a.tenantId, webhookId, id, now())
        await record(sql, a, 'webhook.delivery_retried', webhookId, { deliveryId: id, eventId: delivery.event_id })
        return {
          delivery: found('delivery', id, await store.selectDelivery(sql, a.tenantId, webhookId, id)),
          attempts: await store.selectAttempts(sql, [id]),
        }
      })
      due()
      return r
    },
  }
}

export type WebhooksService = ReturnType<typeof webhooksService>
