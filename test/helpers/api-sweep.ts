// Calls every operation of a running server's OpenAPI document once, with the identifiers a test
// made and request bodies built from the operation's own schema (its required fields, each given
// the first value its schema accepts; a URL field, by format or name, gets `url`, so that anything
// that calls out is asked to). Deletions go last, so that the others find what they name. Streams
// are read up to their headers. For proofs that hold across the whole API (test/air-gap.test.ts),
// not for checking any one route's answers.
import { randomUUID } from 'node:crypto'
import { derefIn, operationsOf, type Schema } from './openapi.js'

export interface SweepOptions {
  /** Headers for an operation (its credentials). */
  headers(method: string, path: string): Record<string, string>
  /** The value of a path parameter; a random UUID when undefined. */
  param(path: string, name: string): string | undefined
  /** What a URL-valued field is given. */
  url: string
}

export interface Swept {
  method: string
  path: string
  status: number
  code?: string
  /** The router found no route for the request as sent (a path the sweep filled in wrongly), so no handler ran. */
  unrouted: boolean
}

/** A value the schema accepts, as simple as can be; `name` is the field's. */
export function sample(
  schema: Schema | undefined,
  deref: (s: Schema) => Schema,
  url: string,
  name = '',
  depth = 0,
): unknown {
  if (!schema || depth > 8) return null
  const s = deref(schema)
  const next = (sub: Schema | undefined, field = name) => sample(sub, deref, url, field, depth + 1)
  if (s.const !== undefined) return s.const
  if (s.enum?.length) return s.enum[0]
  if (s.examples?.length) return s.examples[0]
  const alternatives = (s.anyOf ?? s.oneOf) as Schema[] | undefined
  if (alternatives?.length) return next(alternatives.find((a) => a.type !== 'null') ?? alternatives[0])
  if (s.allOf?.length) return Object.assign({}, ...(s.allOf as Schema[]).map((x) => next(x)))
  const type = Array.isArray(s.type) ? s.type.find((x: string) => x !== 'null') : s.type
  switch (type) {
    case 'object':
      return Object.fromEntries(
        ((s.required ?? []) as string[]).map((field) => [field, next(s.properties?.[field], field)]),
      )
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => next(s.items))
    case 'integer':
    case 'number':
      return s.minimum ?? 1
    case 'boolean':
      return false
    case 'string':
      if (s.format === 'uri' || s.format === 'url' || /url$/i.test(name)) return url
      if (s.format === 'email') return `sweep-${randomUUID().slice(0, 8)}@example.com`
      if (s.format === 'uuid') return randomUUID()
      if (s.format === 'date-time') return new Date().toISOString()
      if (s.format === 'date') return new Date().toISOString().slice(0, 10)
      return typeof s.default === 'string' ? s.default : 'sweep'.padEnd(s.minLength ?? 1, 'x')
    default:
      return null
  }
}

/** Every operation of `doc`, called once against `base`; what each answered. */
export async function sweep(base: string, doc: Schema, o: SweepOptions): Promise<Swept[]> {
  const deref = derefIn(doc)
  const operations = operationsOf(doc).sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'))
  const results: Swept[] = []
  for (const { method, path, query: params, body: schema } of operations) {
    const concrete = path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURI(o.param(path, name) ?? randomUUID()))
    const query = new URLSearchParams()
    for (const p of params) if (p.required) query.set(p.name, String(sample(p.schema, deref, o.url, p.name)))
    const body = schema ? sample(schema, deref, o.url) : undefined
    const res = await fetch(`${base}${concrete}${query.size ? `?${query}` : ''}`, {
      method,
      headers: { ...o.headers(method, path), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(30_000),
    })
    let error: { code?: string; details?: { path?: string } } | undefined
    if (/event-stream/.test(res.headers.get('content-type') ?? '')) await res.body?.cancel()
    else error = ((await res.json().catch(() => null)) as { error?: typeof error } | null)?.error
    const unrouted =
      error?.code === 'METHOD_NOT_ALLOWED' ||
      (error?.code === 'RESOURCE_NOT_FOUND' && error.details?.path === new URL(concrete, base).pathname)
    results.push({ method, path, status: res.status, ...(error?.code ? { code: error.code } : {}), unrouted })
  }
  return results
}
