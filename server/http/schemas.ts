// Shared TypeBox schemas: the envelope every JSON response wears, errors, ids, pagination, and the
// plan and role names (from the domain's lists, so a new one is documented and accepted at once).
import { Type, type TSchema } from '@sinclair/typebox'
import { oneOf } from '../domain/one-of.js'
import { ERRORS, type ErrorCode } from '../domain/errors.js'
import { ROLES } from '../domain/permissions.js'
import { PLANS } from '../domain/plans.js'

export const Meta = Type.Object({
  request_id: Type.String({ description: 'Identifier of the request (echoes X-Request-Id when the client sent one)' }),
  timestamp: Type.String({ format: 'date-time', description: 'ISO 8601 UTC time of the response' }),
})

/** The tenant a `/platform/tenants/:tenantId/...` route acts on. */
export const TenantParams = Type.Object({ tenantId: Type.String({ format: 'uuid' }) })

export const PageMeta = Type.Object({
  request_id: Type.String(),
  timestamp: Type.String({ format: 'date-time' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as ?cursor= for the next page; null at the end',
  }),
})

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.Union(Object.keys(ERRORS).map((c) => Type.Literal(c))),
      message: Type.String(),
      details: Type.Object({}, { additionalProperties: true }),
    }),
    meta: Meta,
  },
  { $id: 'ErrorEnvelope', description: 'Error envelope' },
)

/**
 * A timestamp in a response: ISO 8601 UTC in the document and on the wire. A handler may give the
 * database's Date as it is: the response serializer (fast-json-stringify, format date-time) writes
 * it, so no copy of the row is made to turn its dates into strings first.
 */
export const DateTime = (o: { description?: string } = {}) =>
  Type.Unsafe<Date | string>(Type.String({ format: 'date-time', ...o }))

export const Envelope = <T extends TSchema>(data: T) => Type.Object({ data, meta: Meta })
export const PageEnvelope = <T extends TSchema>(item: T) => Type.Object({ data: Type.Array(item), meta: PageMeta })

/** Error responses a route can give, for the OpenAPI document (an unexpected fault is always possible). */
export function errors(...codes: ErrorCode[]): Record<number, unknown> {
  const out: Record<number, unknown> = {}
  for (const c of [...codes, 'INTERNAL_ERROR'] as ErrorCode[]) out[ERRORS[c].status] = Type.Ref('ErrorEnvelope')
  return out
}

/** The errors every /api/v1 route can give, plus the route's own. */
export const apiErrors = (...codes: ErrorCode[]) =>
  errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'RATE_LIMIT_EXCEEDED', ...codes)

/** A name someone types: not blank, at most `maxLength` characters (the service trims surrounding spaces). */
export const NonBlankName = (maxLength: number) =>
  Type.String({ minLength: 1, maxLength, pattern: '\\S', description: 'Not blank; surrounding spaces are trimmed' })

export const IdParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'Resource identifier' }) })

export const PageQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Items per page (1 to 200)' }),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'meta.nextCursor of the previous page' })),
  },
  { additionalProperties: false },
)

export { oneOf }

export const PlanName = oneOf(PLANS)
export const RoleName = oneOf(ROLES)

/** The signed-in person, as the routes that start or describe a session show them. */
export const User = Type.Object({
  id: Type.String({ format: 'uuid' }),
  email: Type.String(),
  name: Type.String(),
  role: RoleName,
})
export const Tenant = Type.Object({ id: Type.String({ format: 'uuid' }), name: Type.String(), plan: PlanName })

/** A session started (password, OpenID Connect, an accepted invitation): its token and who it is for. */
export const SessionStarted = Type.Object({
  token: Type.String(),
  tokenType: Type.Literal('session'),
  expiresAt: Type.String({ format: 'date-time' }),
  user: User,
  tenant: Tenant,
})
