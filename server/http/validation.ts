// Request validation. Bodies are validated strictly (no type coercion, unknown fields refused) so a
// wrong type is a VALIDATION_ERROR instead of a silently converted value; query strings and path
// parameters arrive as text and are coerced to the declared types.
import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify'
import { invalid } from './errors.js'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

// ajv-formats also accepts "urn:uuid:..." and other spellings PostgreSQL's uuid type refuses.
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function make(opts: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, useDefaults: true, strict: false, ...opts })
  addFormats(ajv)
  ajv.addFormat('uuid', UUID_RE)
  return ajv
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = make({ coerceTypes: false })
  const coercing = make({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object)
}

/**
 * The path of the first string holding a NUL character, which JSON allows (\u0000) but PostgreSQL
 * text cannot store; null when there is none.
 */
export function findNul(value: unknown, path = 'body'): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNul(value[i], `${path}.${i}`)
      if (found) return found
    }
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const found = findNul(v, `${path}.${k}`) ?? (k.includes('\u0000') ? `${path}.${k}` : null)
      if (found) return found
    }
  }
  return null
}

type JsonParser = (req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => void

/**
 * Fastify's JSON parser (with its prototype-poisoning protection), except that an empty body is no
 * body: many clients send Content-Type: application/json on every request, even bodiless ones.
 */
export function emptyTolerantJson(defaultParser: JsonParser): JsonParser {
  return (req, body, done) => (body.trim() === '' ? done(null, undefined) : defaultParser(req, body, done))
}

/**
 * A URL the server will call: parsed, http(s) only (https only unless `allowHttp`), no credentials
 * in it (a URL is shown and logged; secrets belong in sealed fields). VALIDATION_ERROR on `field`.
 */
export function outboundUrl(field: string, value: string, o: { allowHttp: boolean; httpRefused?: string; credentials: string }): URL {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    throw invalid(field, 'is not a URL')
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && o.allowHttp)) throw invalid(field, o.allowHttp ? 'must be an http or https URL' : o.httpRefused ?? 'must be an https URL')
  if (url.username || url.password) throw invalid(field, `must not contain credentials: ${o.credentials}`)
  return url
}
