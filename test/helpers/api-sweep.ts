// Calls every operation of a running server's OpenAPI document once, with the identifiers a test
// made and request bodies built from the operation's own schema (its required fields, each given
// the first value its schema accepts; a URL field (by format or name) gets `url`, so that anything that calls out is
// asked to). Deletions go last, so that the others find what they name. Streams are read up to
// their headers. For proofs that hold across the whole API (test/air-gap.test.ts), not for
// checking any one route's answers.
import { randomUUID } from 'node:crypto'

type Schema = {
  type?: string | string[]
  format?: string
  enum?: unknown[]
  const?: unknown
  anyOf?: Schema[]
  oneOf?: Schema[]
  allOf?: Schema[]
  properties?: Record<string, Schema>
  required?: string[]
  items?: Schema
  minItems?: number
  minLength?: number
  minimum?: number
  default?: unknown
  examples?: unknown[]
  $ref?: string
}
interface Operation {
  security?: unknown[]
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema }[]
  requestBody?: { content?: Record<string, { schema?: Schema }> }
}
export interface OpenApi {
  paths: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, Schema> }
}

export interface SweepOptions {
  /** Headers for an operation (its credentials). */
  headers(method: string, path: string): Record<string, string>
  /** The value of a path parameter; a random UUID when undefined. */
  param(path: string, name: string): string | undefined
  /** What a URL-valued field is given. */
  url: string
  /** Per operation, a body to send instead of the one built from the schema. */
  body?(method: string, path: string): unknown
  /** Operations not called (with the reason kept by the caller). */
  skip?(method: string, path: string): boolean
}

export interface Swept {
  method: string
  path: string
  status: number
  code?: string
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete']

/** A value the schema accepts, as simple as can be. */
export function sample(schema: Schema | undefined, doc: OpenApi, url: string, depth = 0, name = ''): unknown {
  if (!schema || depth > 8) return null
  if (/url$/i.test(name) && (schema.type === 'string' || schema.anyOf || schema.oneOf)) return url
  if (schema.$ref) return sample(doc.components?.schemas?.[schema.$ref.split('/').pop()!], doc, url, depth + 1)
  if (schema.const !== undefined) return schema.const
  if (schema.enum?.length) return schema.enum[0]
  if (schema.examples?.length) return schema.examples[0]
  const alternatives = schema.anyOf ?? schema.oneOf
  if (alternatives?.length) return sample(alternatives.find((a) => a.type !== 'null') ?? alternatives[0], doc, url, depth + 1)
  if (schema.allOf?.length) return Object.assign({}, ...schema.allOf.map((s) => sample(s, doc, url, depth + 1)))
  const type = Array.isArray(schema.type) ? schema.type.find((x) => x !== 'null') : schema.type
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {}
      for (const field of schema.required ?? []) out[field] = sample(schema.properties?.[field], doc, url, depth + 1, field)
      return out
    }
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items, doc, url, depth + 1))
    case 'integer':
    case 'number':
      return schema.minimum ?? 1
    case 'boolean':
      return false
    case 'string':
      switch (schema.format) {
        case 'uri':
        case 'url':
          return url
        case 'email':
          return `sweep-${randomUUID().slice(0, 8)}@example.com`
        case 'uuid':
          return randomUUID()
        case 'date-time':
          return new Date().toISOString()
        case 'date':
          return new Date().toISOString().slice(0, 10)
      }
      return typeof schema.default === 'string' ? schema.default : 'sweep'.padEnd(schema.minLength ?? 1, 'x')
    default:
      return null
  }
}

/** Every operation of `doc`, called once against `base`; what each answered. */
export async function sweep(base: string, doc: OpenApi, o: SweepOptions): Promise<Swept[]> {
  const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([m]) => METHODS.includes(m))
      .map(([m, op]) => ({ method: m.toUpperCase(), path, op })),
  )
  operations.sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'))
  const results: Swept[] = []
  for (const { method, path, op } of operations) {
    if (o.skip?.(method, path)) continue
    const concrete = path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURI(o.param(path, name) ?? randomUUID()))
    const query = new URLSearchParams()
    for (const p of op.parameters ?? []) if (p.in === 'query' && p.required) query.set(p.name, String(sample(p.schema, doc, o.url)))
    const schema = op.requestBody?.content?.['application/json']?.schema
    const custom = o.body?.(method, path)
    const body = custom !== undefined ? custom : schema ? sample(schema, doc, o.url) : undefined
    const headers: Record<string, string> = { ...o.headers(method, path), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }
    const res = await fetch(`${base}${concrete}${query.size ? `?${query}` : ''}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(30_000),
    })
    let code: string | undefined
    if (/event-stream/.test(res.headers.get('content-type') ?? '')) await res.body?.cancel()
    else code = ((await res.json().catch(() => null)) as { error?: { code?: string } } | null)?.error?.code
    results.push({ method, path, status: res.status, ...(code ? { code } : {}) })
  }
  return results
}
