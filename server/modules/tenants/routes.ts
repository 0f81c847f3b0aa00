// The authenticated tenant (docs/identity.md, "Tenant and LLM settings"): its record with the gates of its plan, and
// its LLM settings. Every route acts on the tenant of the credential; there is no tenant in the path.
import { Type, type TSchema } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { meta, ok } from '../../http/envelope.js'
import { forbidden } from '../../domain/errors.js'
import { okSchema } from '../../http/route-schemas.js'
import { apiErrors, Envelope, PlanName } from '../../http/schemas.js'
import { PLAN_TERMS, PLANS, type PlanLimits } from '../../domain/plans.js'
import { MAX_PERIOD_DAYS } from '../../domain/days.js'
import type { TenantsService } from './service.js'
import { LlmPatch, MaxTokens, Provider, Temperature, type LlmSettingsService } from './settings.js'
import type { TenantRow } from './store.js'

const tags = ['tenant']

// The limits object follows domain/plans.ts: each gate's schema is taken from the values it has
// across plans, so a gate added there is documented and returned without a change here.
function gateSchema(key: string): TSchema {
  const values = PLANS.map((p) => (PLAN_TERMS[p].limits as unknown as Record<string, unknown>)[key])
  const kinds: TSchema[] = []
  if (values.some((v) => typeof v === 'number'))
    kinds.push(values.every((v) => typeof v !== 'number' || Number.isInteger(v)) ? Type.Integer() : Type.Number())
  if (values.some((v) => typeof v === 'boolean')) kinds.push(Type.Boolean())
  if (values.some((v) => typeof v === 'string')) kinds.push(Type.String())
  if (values.some((v) => v === null)) kinds.push(Type.Null())
  if (!kinds.length) return Type.Unknown() // a structured gate: passed through as it is
  return kinds.length === 1 ? kinds[0]! : Type.Union(kinds)
}
const Limits = Type.Object(Object.fromEntries(Object.keys(PLAN_TERMS.free.limits).map((k) => [k, gateSchema(k)])), {
  description: "The gates of the tenant's plan (null: unlimited)",
})

const Tenant = Type.Object({
  id: Type.String({ format: 'uuid' }),
  tenantId: Type.String({ format: 'uuid', description: 'The same as id, under the name the specification uses' }),
  name: Type.String(),
  plan: PlanName,
  status: Type.Union([Type.Literal('active'), Type.Literal('suspended')]),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  limits: Limits,
})
const presentTenant = (t: TenantRow & { limits: PlanLimits }) => ({
  id: t.id,
  tenantId: t.id,
  name: t.name,
  plan: t.plan,
  status: t.status,
  createdAt: t.created_at.toISOString(),
  updatedAt: t.updated_at.toISOString(),
  limits: t.limits as unknown as Record<string, unknown>,
})

const LlmSettings = Type.Object({
  provider: Provider,
  baseUrl: Type.Union([Type.String(), Type.Null()], { description: 'null: the provider default' }),
  model: Type.Union([Type.String(), Type.Null()]),
  defaults: Type.Object({
    temperature: Type.Union([Temperature, Type.Null()], { description: 'null: the model default' }),
    maxTokens: Type.Union([MaxTokens, Type.Null()], { description: 'null: the model default' }),
  }),
  apiKey: Type.Object(
    {
      configured: Type.Boolean(),
      lastFour: Type.Union([Type.String(), Type.Null()], {
        description: 'Last four characters of the key; null when none is set or the key is shorter than 12 characters',
      }),
    },
    { description: 'The key itself is write-only and never returned' },
  ),
  updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'null: never changed' }),
  updatedBy: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description: 'User who made the last change (for an API key: the user it belongs to, if any)',
  }),
})
const DAY_PATTERN = '^\\d{4}-\\d{2}-\\d{2}$'
const UsageQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({ pattern: DAY_PATTERN, description: 'First day (UTC), included; default: 29 days before to' }),
    ),
    to: Type.Optional(
      Type.String({
        pattern: DAY_PATTERN,
        description: `Last day (UTC), included; default: today. At most ${MAX_PERIOD_DAYS} days from from`,
      }),
    ),
  },
  { additionalProperties: false },
)
const Count = Type.Integer({ minimum: 0 })
const UsageRow = Type.Object({
  day: Type.String({ format: 'date' }),
  provider: Type.String(),
  model: Type.String(),
  requests: Count,
  inputTokens: Count,
  outputTokens: Count,
})
const UsageEnvelope = Type.Object({
  data: Type.Array(UsageRow, {
    description: 'One row per day, provider and model with at least one successful model call; oldest day first',
  }),
  meta: Type.Object({
    request_id: Type.String(),
    timestamp: Type.String({ format: 'date-time' }),
    from: Type.String({ format: 'date' }),
    to: Type.String({ format: 'date' }),
    totals: Type.Object({ requests: Count, inputTokens: Count, outputTokens: Count }),
  }),
})

/** Platform operator keys belong to no tenant; routes that need no permission refuse them here. */
function ownTenant(req: FastifyRequest) {
  if (req.principal && !req.principal.tenantId)
    throw forbidden('Platform operator keys act on /api/v1/platform routes only')
  return actorOf(req)
}

export const tenantRoutes: FastifyPluginAsyncTypebox<{ tenants: TenantsService; llm: LlmSettingsService }> = async (
  app,
  { tenants, llm },
) => {
  app.get(
    '/tenant',
    { schema: okSchema(tags, 'The tenant of the credential, with the limits of its plan', Tenant, 'FORBIDDEN') },
    async (req) => ok(req, presentTenant(await tenants.get(ownTenant(req).tenantId))),
  )

  app.patch(
    '/tenant',
    {
      config: { permission: 'settings:write' },
      schema: {
        tags,
        summary: 'Rename the tenant',
        body: Type.Object(
          {
            name: Type.String({
              minLength: 1,
              maxLength: 200,
              pattern: '\\S',
              description: 'Surrounding spaces are trimmed',
            }),
          },
          { additionalProperties: false },
        ),
        response: { 200: Envelope(Tenant), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req) => ok(req, presentTenant(await tenants.rename(actorOf(req), req.body.name))),
  )

  app.get(
    '/tenant/usage',
    {
      config: { permission: 'settings:read' },
      schema: {
        tags,
        summary: "The tenant's model usage per day, provider and model",
        description: `Successful model calls and their tokens, counted per UTC day. Default period: the last 30 days; at most ${MAX_PERIOD_DAYS} days.`,
        querystring: UsageQuery,
        response: { 200: UsageEnvelope, ...apiErrors('FORBIDDEN', 'VALIDATION_ERROR') },
      },
    },
    async (req) => {
      const u = await tenants.usage(actorOf(req).tenantId, req.query)
      return { data: u.data, meta: { ...meta(req), from: u.from, to: u.to, totals: u.totals } }
    },
  )

  app.get(
    '/tenant/settings/llm',
    {
      config: { permission: 'settings:read' },
      schema: okSchema(
        tags,
        'LLM settings (the API key only as configured and its last four)',
        LlmSettings,
        'FORBIDDEN',
      ),
    },
    async (req) => ok(req, await llm.get(actorOf(req).tenantId)),
  )

  app.patch(
    '/tenant/settings/llm',
    {
      config: { permission: 'settings:write' },
      schema: {
        tags,
        summary: 'Change some LLM settings',
        description:
          'Only the fields sent change; null resets a field to its default. apiKey is write-only: it is stored encrypted and never returned.',
        body: LlmPatch,
        response: { 200: Envelope(LlmSettings), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req) => ok(req, await llm.update(actorOf(req), req.body)),
  )
}
