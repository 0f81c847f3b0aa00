// Webhook endpoints, their secrets, test events and deliveries. The same routes serve a tenant's
// endpoints (/api/v1/webhooks, permissions webhooks:read and webhooks:manage) and a platform
// operator's (/api/v1/platform/webhooks, svc_admin_ keys), which hear every tenant's events.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig, FastifyRequest } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { ok, page } from '../../http/envelope.js'
import { byIdSchema, created, deleted, deleteSchema, listSchema, pageOf } from '../../http/route-schemas.js'
import { apiErrors, Envelope, IdParams, PageEnvelope, PageQuery } from '../../http/schemas.js'
import { EVENT_TYPES, TEST_EVENT_TYPE, type EventType } from '../outbox/service.js'
import {
  DEFAULT_OVERLAP_SECONDS,
  MAX_OVERLAP_SECONDS,
  MAX_URL_LENGTH,
  TENANT_EVENT_TYPES,
  type WebhooksService,
} from './service.js'
import { MAX_SECRET_LENGTH, MIN_SECRET_LENGTH, SECRET_PATTERN, SECRET_PREFIX } from './signing.js'
import type { AttemptRow, DeliveryRow, WebhookRow } from './store.js'

const Timestamp = Type.String({ format: 'date-time' })
const MaybeTimestamp = Type.Union([Timestamp, Type.Null()])

const Webhook = Type.Object({
  id: Type.String({ format: 'uuid' }),
  url: Type.String(),
  description: Type.String(),
  events: Type.Array(Type.String()),
  status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
  disabled: Type.Union([
    Type.Object({
      reason: Type.Union([Type.Literal('gone'), Type.Literal('failing'), Type.Literal('manual')], {
        description:
          'gone: the endpoint answered 410; failing: every attempt failed for 5 days; manual: disabled through the API',
      }),
      message: Type.String(),
      at: Timestamp,
    }),
    Type.Null(),
  ]),
  failingSince: Type.Union([Timestamp, Type.Null()], {
    description: 'Start of the current run of failed attempts; 5 days of it disable the endpoint',
  }),
  lastSuccessAt: MaybeTimestamp,
  secret: Type.Object(
    {
      rotatedAt: MaybeTimestamp,
      previousValidUntil: Type.Union([Timestamp, Type.Null()], {
        description: 'Until then deliveries are signed with the previous secret too',
      }),
    },
    { description: 'The secret itself is never returned' },
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
})

const Attempt = Type.Object({
  attempt: Type.Integer({ description: '1 for the first' }),
  startedAt: Timestamp,
  durationMs: Type.Integer(),
  statusCode: Type.Union([Type.Integer(), Type.Null()], {
    description: 'null when no answer came (refused, timeout, network)',
  }),
  error: Type.Union([Type.String(), Type.Null()]),
  responseExcerpt: Type.String({ description: 'The first 1024 bytes of the response body' }),
  outcome: Type.Union([Type.Literal('succeeded'), Type.Literal('retrying'), Type.Literal('failed')]),
  nextAttemptAt: MaybeTimestamp,
})

const Delivery = Type.Object({
  id: Type.String({ format: 'uuid' }),
  eventId: Type.String({ format: 'uuid', description: 'Also the webhook-id header, the same on every attempt' }),
  eventType: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
  attemptCount: Type.Integer(),
  nextAttemptAt: MaybeTimestamp,
  lastStatusCode: Type.Union([Type.Integer(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
  completedAt: MaybeTimestamp,
  attempts: Type.Array(Attempt),
})

const iso = (d: Date | null) => d?.toISOString() ?? null

const present = (w: WebhookRow) => ({
  id: w.id,
  url: w.url,
  description: w.description,
  events: w.events,
  status: w.status,
  disabled:
    w.status === 'disabled' && w.disabled_reason
      ? { reason: w.disabled_reason, message: w.disabled_message ?? '', at: iso(w.disabled_at)! }
      : null,
  failingSince: iso(w.failing_since),
  lastSuccessAt: iso(w.last_success_at),
  secret: {
    rotatedAt: iso(w.secret_rotated_at),
    previousValidUntil:
      w.previous_secret_expires_at && w.previous_secret_expires_at > new Date()
        ? iso(w.previous_secret_expires_at)
        : null,
  },
  createdAt: w.created_at.toISOString(),
  updatedAt: w.updated_at.toISOString(),
})

const presentAttempt = (a: AttemptRow) => ({
  attempt: a.attempt,
  startedAt: a.started_at.toISOString(),
  durationMs: a.duration_ms,
  statusCode: a.status_code,
  error: a.error,
  responseExcerpt: a.response_excerpt,
  outcome: a.outcome,
  nextAttemptAt: iso(a.next_attempt_at),
})

const presentDelivery = (d: DeliveryRow, attempts: readonly AttemptRow[]) => ({
  id: d.id,
  eventId: d.event_id,
  eventType: d.event_type,
  status: d.status,
  attemptCount: d.attempts,
  // While an attempt is in flight the stored time is its lease; the next attempt is not known yet.
  nextAttemptAt: d.status === 'pending' ? iso(d.next_attempt_at) : null,
  lastStatusCode: d.last_status_code,
  lastError: d.last_error,
  createdAt: d.created_at.toISOString(),
  completedAt: iso(d.completed_at),
  attempts: attempts.filter((a) => a.delivery_id === d.id).map(presentAttempt),
})

const Url = Type.String({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description: 'https (http only when WEBHOOK_ALLOW_HTTP=true); judged by the outbound policy',
})
const Secret = Type.String({
  minLength: MIN_SECRET_LENGTH,
  maxLength: MAX_SECRET_LENGTH,
  pattern: SECRET_PATTERN,
  description: `At least ${MIN_SECRET_LENGTH} printable ASCII characters, no spaces. A ${SECRET_PREFIX}<base64> secret (Standard Webhooks form) signs with the decoded bytes; any other with its own bytes`,
})
const Description = Type.String({ maxLength: 500 })
const EventList = (kinds: readonly string[]) =>
  Type.Array(Type.String({ enum: [...kinds] }), {
    minItems: 1,
    maxItems: kinds.length * 2,
    description: `Any of ${kinds.join(', ')}`,
  })

const DeliveryParams = Type.Object({ id: Type.String({ format: 'uuid' }), deliveryId: Type.String({ format: 'uuid' }) })
const DeliveriesQuery = Type.Object(
  { ...PageQuery.properties, status: Type.Optional(Type.String({ enum: ['pending', 'succeeded', 'failed'] })) },
  { additionalProperties: false },
)

export interface WebhookRoutesOptions {
  webhooks: WebhooksService
  /** tenant: the caller's tenant's endpoints; platform: the operator's, for svc_admin_ keys. */
  scope: 'tenant' | 'platform'
}

export const webhooksRoutes: FastifyPluginAsyncTypebox<WebhookRoutesOptions> = async (app, { webhooks, scope }) => {
  const platform = scope === 'platform'
  const base = platform ? '/platform/webhooks' : '/webhooks'
  const tags = [platform ? 'platform' : 'webhooks']
  const read: FastifyContextConfig = platform ? { operator: true } : { permission: 'webhooks:read' }
  const manage: FastifyContextConfig = platform ? { operator: true } : { permission: 'webhooks:manage' }
  const kinds = platform ? EVENT_TYPES : TENANT_EVENT_TYPES
  const whose = platform ? 'platform endpoint (hears every tenant)' : 'endpoint'

  // A tenant's endpoints belong to the caller's tenant; the platform's to no tenant (null).
  const actor = (req: FastifyRequest) => actorOf(req, { platform })
  const owner = (req: FastifyRequest) => actor(req).tenantId

  app.post(
    base,
    {
      config: manage,
      schema: {
        tags,
        summary: `Register a webhook ${whose}`,
        body: Type.Object(
          { url: Url, events: EventList(kinds), secret: Secret, description: Type.Optional(Description) },
          { additionalProperties: false },
        ),
        response: { 201: Envelope(Webhook), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req, reply) => {
      const events = req.body.events as EventType[]
      return created(req, reply, present(await webhooks.create(actor(req), { ...req.body, events })))
    },
  )

  app.get(
    base,
    {
      config: read,
      schema: listSchema(
        tags,
        `List webhook ${platform ? 'platform endpoints' : 'endpoints'}, newest first`,
        Webhook,
        'FORBIDDEN',
      ),
    },
    async (req) => pageOf(req, await webhooks.list(owner(req), req.query), present),
  )

  app.get(
    `${base}/:id`,
    { config: read, schema: byIdSchema(tags, `Get a webhook ${whose}`, Webhook, 'FORBIDDEN', 'RESOURCE_NOT_FOUND') },
    async (req) => ok(req, present(await webhooks.get(owner(req), req.params.id))),
  )

  app.patch(
    `${base}/:id`,
    {
      config: manage,
      schema: {
        tags,
        summary: `Change a webhook ${whose}; enabled: true turns a disabled one back on`,
        params: IdParams,
        body: Type.Object(
          {
            url: Type.Optional(Url),
            events: Type.Optional(EventList(kinds)),
            description: Type.Optional(Description),
            enabled: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: Envelope(Webhook), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => {
      const { events, ...rest } = req.body
      return ok(
        req,
        present(
          await webhooks.update(actor(req), req.params.id, {
            ...rest,
            ...(events ? { events: events as EventType[] } : {}),
          }),
        ),
      )
    },
  )

  app.delete(
    `${base}/:id`,
    { config: manage, schema: deleteSchema(tags, `Delete a webhook ${whose} and its delivery history`) },
    async (req) => {
      await webhooks.remove(actor(req), req.params.id)
      return deleted(req, req.params.id)
    },
  )

  app.post(
    `${base}/:id/rotate-secret`,
    {
      config: manage,
      schema: {
        tags,
        summary: 'Replace the signing secret; the previous one keeps signing during the overlap',
        params: IdParams,
        body: Type.Object(
          {
            secret: Type.Optional(Secret),
            overlapSeconds: Type.Integer({
              minimum: 0,
              maximum: MAX_OVERLAP_SECONDS,
              default: DEFAULT_OVERLAP_SECONDS,
              description: 'How long deliveries carry a signature under the previous secret as well (0: stop at once)',
            }),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Envelope(
            Type.Object({
              webhook: Webhook,
              secret: Type.Union([Type.String(), Type.Null()], {
                description: 'The generated secret, shown this once; null when you sent one',
              }),
            }),
          ),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        },
      },
    },
    async (req) => {
      const r = await webhooks.rotateSecret(actor(req), req.params.id, req.body)
      return ok(req, { webhook: present(r.webhook), secret: r.secret })
    },
  )

  app.post(
    `${base}/:id/test`,
    {
      config: manage,
      schema: {
        tags,
        summary: `Send a ${TEST_EVENT_TYPE} event to this endpoint only`,
        params: IdParams,
        response: { 202: Envelope(Delivery), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      reply.code(202)
      return ok(req, presentDelivery(await webhooks.sendTest(actor(req), req.params.id), []))
    },
  )

  app.get(
    `${base}/:id/deliveries`,
    {
      config: read,
      schema: {
        tags,
        summary: 'List deliveries to this endpoint, newest first, with every attempt',
        params: IdParams,
        querystring: DeliveriesQuery,
        response: { 200: PageEnvelope(Delivery), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => {
      const q = req.query
      const r = await webhooks.deliveries(owner(req), req.params.id, {
        limit: q.limit,
        ...(q.cursor ? { cursor: q.cursor } : {}),
        ...(q.status ? { status: q.status as DeliveryRow['status'] } : {}),
      })
      return page(
        req,
        r.items.map((d) => presentDelivery(d, r.attempts)),
        r.nextCursor,
      )
    },
  )

  app.get(
    `${base}/:id/deliveries/:deliveryId`,
    {
      config: read,
      schema: {
        tags,
        summary: 'Get a delivery with every attempt',
        params: DeliveryParams,
        response: { 200: Envelope(Delivery), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => {
      const r = await webhooks.delivery(owner(req), req.params.id, req.params.deliveryId)
      return ok(req, presentDelivery(r.delivery, r.attempts))
    },
  )

  app.post(
    `${base}/:id/deliveries/:deliveryId/retry`,
    {
      config: manage,
      schema: {
        tags,
        summary: 'Attempt a finished delivery once more, now (same event, same webhook-id)',
        params: DeliveryParams,
        response: { 202: Envelope(Delivery), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      reply.code(202)
      const r = await webhooks.retryDelivery(actor(req), req.params.id, req.params.deliveryId)
      return ok(req, presentDelivery(r.delivery, r.attempts))
    },
  )
}
