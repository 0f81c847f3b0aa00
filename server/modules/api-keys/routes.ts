// API key management for a tenant's admins (docs/identity.md): create (the secret shown once), list
// and get (prefix and last four only), revoke. All need keys:manage.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { byIdSchema, created, listSchema, pageOf } from '../../http/route-schemas.js'
import { ALL, PERMISSIONS } from '../../domain/permissions.js'
import { apiErrors, Envelope, IdParams, NonBlankName } from '../../http/schemas.js'
import type { ApiKeysService } from './service.js'
import type { KeyView } from './store.js'

const tags = ['api-keys']
const manage: FastifyContextConfig = { permission: 'keys:manage' }

const PERMISSION_NAMES = [ALL, ...PERMISSIONS]
const Permission = Type.String({
  enum: PERMISSION_NAMES,
  description: `${PERMISSION_NAMES.join(', ')}; * is every permission`,
})
const KeyTypeOut = Type.Union([Type.Literal('sdk'), Type.Literal('ci')])
const Timestamp = Type.String({ format: 'date-time' })
const MaybeTimestamp = Type.Union([Timestamp, Type.Null()])

const ApiKey = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  type: KeyTypeOut,
  prefix: Type.String({ description: 'The first characters of the key (svc_<type>_ and four more)' }),
  lastFour: Type.String({ description: 'The last four characters of the key' }),
  permissions: Type.Array(Type.String()),
  createdAt: Timestamp,
  expiresAt: MaybeTimestamp,
  revokedAt: MaybeTimestamp,
  lastUsedAt: Type.Union([Timestamp, Type.Null()], {
    description: 'When the key last authenticated, to within about a minute',
  }),
  createdBy: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description:
      'The user on whose behalf the key was made (a key made by a key inherits its user); null for keys made with the admin CLI',
  }),
})
const CreatedKey = Type.Object({
  id: Type.String({ format: 'uuid' }),
  key: Type.String({ description: 'The secret: shown in this response only, never again' }),
  name: Type.String(),
  type: KeyTypeOut,
  prefix: Type.String(),
  lastFour: Type.String(),
  permissions: Type.Array(Type.String()),
  expiresAt: MaybeTimestamp,
  createdAt: Timestamp,
})

const CreateBody = Type.Object(
  {
    name: NonBlankName(100),
    // An enum rather than a union of literals: one clear error instead of one per literal.
    type: Type.String({
      enum: ['sdk', 'ci'],
      description: 'sdk (client libraries) or ci (automation); operator (admin) keys come from the admin CLI only',
    }),
    permissions: Type.Array(Permission, {
      minItems: 1,
      maxItems: PERMISSION_NAMES.length,
      description: 'Each must be one the caller holds',
    }),
    expiresAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'A future time; omit both expiry fields for a key that does not expire',
      }),
    ),
    expiresInDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650, description: 'Instead of expiresAt' })),
  },
  { additionalProperties: false },
)

const iso = (d: Date | null) => d?.toISOString() ?? null
const present = (k: KeyView) => ({
  id: k.id,
  name: k.name,
  type: k.type as 'sdk' | 'ci',
  prefix: k.prefix,
  lastFour: k.last_four,
  permissions: k.permissions,
  createdAt: k.created_at.toISOString(),
  expiresAt: iso(k.expires_at),
  revokedAt: iso(k.revoked_at),
  lastUsedAt: iso(k.last_used_at),
  createdBy: k.user_id,
})

const AUTHORITY =
  'A credential acts only within its own permissions: FORBIDDEN (details.reason exceeds_own_permissions, details.missing) otherwise.'

export const apiKeysRoutes: FastifyPluginAsyncTypebox<{ keys: ApiKeysService }> = async (app, { keys }) => {
  app.post(
    '/api-keys',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Create an API key (the secret is shown once)',
        description: `The key is stored as a SHA-256 hash only: keep the returned key, it cannot be shown again. ${AUTHORITY} An expiry in the past, both expiry fields, or type admin is a VALIDATION_ERROR.`,
        body: CreateBody,
        response: { 201: Envelope(CreatedKey), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req, reply) => {
      const { key, view } = await keys.create(actorOf(req), req.body)
      const v = present(view)
      return created(req, reply, {
        id: v.id,
        key,
        name: v.name,
        type: v.type,
        prefix: v.prefix,
        lastFour: v.lastFour,
        permissions: v.permissions,
        expiresAt: v.expiresAt,
        createdAt: v.createdAt,
      })
    },
  )

  app.get(
    '/api-keys',
    {
      config: manage,
      schema: listSchema(
        tags,
        "List the tenant's API keys, newest first (revoked and expired ones included)",
        ApiKey,
        'FORBIDDEN',
      ),
    },
    async (req) => pageOf(req, await keys.list(actorOf(req).tenantId, req.query), present),
  )

  app.get(
    '/api-keys/:id',
    {
      config: manage,
      schema: byIdSchema(tags, 'Get an API key (never its secret)', ApiKey, 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
    },
    async (req) => ok(req, present(await keys.get(actorOf(req).tenantId, req.params.id))),
  )

  app.delete(
    '/api-keys/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Revoke an API key',
        description: `The key stops working at once, on every replica. Revoking a key that is already revoked answers 200 with the key unchanged (a retry is safe). A key may revoke itself. ${AUTHORITY} A key of another tenant is RESOURCE_NOT_FOUND.`,
        params: IdParams,
        response: { 200: Envelope(ApiKey), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, present(await keys.revoke(actorOf(req), req.params.id))),
  )
}
