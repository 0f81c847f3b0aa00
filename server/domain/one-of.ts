// A schema of one of a list's names, for the routes (http/schemas.ts) and for services that check
// with a route's schema what arrives another way (tenants/settings.ts: a restore's LLM settings).
import { Type, type TLiteral, type TUnion } from '@sinclair/typebox'

/**
 * One of a list's names: a union of its literals. Typed as one literal of all the names, which
 * infers the same: the type provider infers nothing from a union built from an array.
 */
export const oneOf = <T extends string>(names: readonly T[]) =>
  Type.Union(names.map((n) => Type.Literal(n))) as unknown as TUnion<[TLiteral<T>]>
