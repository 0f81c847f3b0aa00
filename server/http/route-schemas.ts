// The route shapes many modules share, declared once: a page of a list, an answer in the envelope,
// one resource by its id, a deletion, with the replies that go with them (and a 201, a session
// started). A route keeps its own words (path, permission, summary, item, errors, handler); these
// give the parts that are the same everywhere.
import { Type, type TSchema } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ErrorCode } from '../domain/errors.js'
import { ok, page } from './envelope.js'
import { apiErrors, Envelope, IdParams, PageEnvelope, PageQuery } from './schemas.js'

/** GET a page of `item`s (?limit, ?cursor): the page, or one of `codes` (or an error any /api/v1 route gives). */
export const listSchema = <T extends TSchema>(tags: string[], summary: string, item: T, ...codes: ErrorCode[]) => ({
  tags,
  summary,
  querystring: PageQuery,
  response: { 200: PageEnvelope(item), ...apiErrors(...codes) },
})

/** A route answering 200 with `data` in the envelope, or with one of `codes` (or an error any /api/v1 route gives). */
export const okSchema = <T extends TSchema>(tags: string[], summary: string, data: T, ...codes: ErrorCode[]) => ({
  tags,
  summary,
  response: { 200: Envelope(data), ...apiErrors(...codes) },
})

/** An okSchema route on one resource, named by its `:id`. */
export const byIdSchema = <T extends TSchema>(tags: string[], summary: string, data: T, ...codes: ErrorCode[]) => ({
  ...okSchema(tags, summary, data, ...codes),
  params: IdParams,
})

/** DELETE a resource named by its `:id`: `{ id, deleted: true }` (see `deleted`), or FORBIDDEN or RESOURCE_NOT_FOUND. */
export const deleteSchema = (tags: string[], summary: string) =>
  byIdSchema(
    tags,
    summary,
    Type.Object({ id: Type.String({ format: 'uuid' }), deleted: Type.Literal(true) }),
    'FORBIDDEN',
    'RESOURCE_NOT_FOUND',
  )

/** What a service's list gives: a page of rows and the cursor of the next page (null at the end). */
interface Listed<R> {
  items: R[]
  nextCursor: string | null
}

/** The page of what a service's list gave, each row shown by `view` (as it is without one). */
export function pageOf<R>(request: FastifyRequest, r: Listed<R>): ReturnType<typeof page<R>>
export function pageOf<R, V>(request: FastifyRequest, r: Listed<R>, view: (row: R) => V): ReturnType<typeof page<V>>
export function pageOf<R>(request: FastifyRequest, r: Listed<R>, view?: (row: R) => unknown) {
  return page(request, view ? r.items.map(view) : r.items, r.nextCursor)
}

/** The answer of a deleteSchema route. */
export const deleted = (request: FastifyRequest, id: string) => ok(request, { id, deleted: true as const })

/** A 201 answer: `data` in the envelope. */
export function created<T>(request: FastifyRequest, reply: FastifyReply, data: T) {
  reply.code(201)
  return ok(request, data)
}

/** The answer of a route that started a session (SessionStarted), once its cookie is set. */
export const sessionStarted = <U, T>(r: { session: { token: string; expiresAt: Date }; user: U; tenant: T }) => ({
  token: r.session.token,
  tokenType: 'session' as const,
  expiresAt: r.session.expiresAt.toISOString(),
  user: r.user,
  tenant: r.tenant,
})
