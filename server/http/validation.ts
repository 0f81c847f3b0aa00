// Request validation. Bodies are validated strictly (no type coercion, unknown fields refused) so a
// wrong type is a VALIDATION_ERROR instead of a silently converted value; query strings and path
// parameters arrive as text and are coerced to the declared types.
import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify'
import fp from 'fastify-plugin'
import { UUID_RE } from '../../common/ids.js'
import { invalid } from '../domain/errors.js'
import type { CompileOnUse } from './compile-on-use.js'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

function make(opts: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, useDefaults: true, strict: false, ...opts })
  addFormats(ajv)
  // ajv-formats also accepts "urn:uuid:..." and other spellings PostgreSQL's uuid type refuses.
  ajv.addFormat('uuid', UUID_RE)
  return ajv
}

/**
 * Marks a body schema that documents a request read as a stream (a multipart upload): the OpenAPI
 * document shows it, and the route reads and checks the parts itself as they arrive.
 */
export const streamedBody = <T extends object>(schema: T): T => ({ ...schema, [STREAMED]: true })
const STREAMED = 'x-atrium-streamed'

export function validatorCompiler(schemas: CompileOnUse): FastifySchemaCompiler<unknown> {
  const strict = make({ coerceTypes: false })
  const coercing = make({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => {
    if (httpPart === 'body' && (schema as Record<string, unknown>)[STREAMED] === true) return () => true
    const validate = schemas.lazily(() => (httpPart === 'body' ? strict : coercing).compile(schema as object))
    const properties = (schema as { properties?: Record<string, { format?: string } | undefined> }).properties ?? {}
    const ids = httpPart === 'params' || httpPart === 'querystring' ? Object.keys(properties).filter((k) => properties[k]?.format === 'uuid') : []
    if (!ids.length) return validate
    // A UUID is the same in either case (RFC 9562); handlers get the lowercase the API answers
    // with, so an id sent in capitals compares, and derives keys and encryption contexts, alike.
    const canonical = Object.assign(
      (data: unknown) => {
        const valid = validate(data)
        canonical.errors = validate.errors
        if (valid && data && typeof data === 'object') {
          const parts = data as Record<string, unknown>
          for (const k of ids) if (typeof parts[k] === 'string') parts[k] = parts[k].toLowerCase()
        }
        return valid
      },
      { errors: validate.errors },
    )
    return canonical
  }
}

// Text PostgreSQL cannot store: NUL, which JSON allows (\u0000), and a surrogate without its pair
// (\ud800 alone), which JSON also allows but is not Unicode: text columns would silently store
// U+FFFD and jsonb refuses it outright.
const UNPAIRED_RE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL (\\u0000) characters'
  if (UNPAIRED_RE.test(s)) return 'must not contain unpaired surrogates (\\ud800-\\udfff): it is not Unicode text'
  return null
}

/**
 * The first string or key in a body holding text PostgreSQL cannot store, with its path and why;
 * null when there is none. Walks with its own stack, not the call stack, so no value is too deep.
 */
export function findUnstorableText(value: unknown, path = 'body'): { field: string; message: string } | null {
  const todo: { value: unknown; path: string; key?: string }[] = [{ value, path }]
  for (let item = todo.pop(); item; item = todo.pop()) {
    const { value: v, path: at, key } = item
    const problem = (key === undefined ? null : textProblem(key)) ?? (typeof v === 'string' ? textProblem(v) : null)
    if (problem) return { field: at, message: problem }
    if (Array.isArray(v)) {
      // pushed in reverse so they come off in order: the first one in the text is the one named
      for (let i = v.length - 1; i >= 0; i--) todo.push({ value: v[i], path: `${at}.${i}` })
    } else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      // (a raw body, such as a file upload, is bytes: no text in it is stored as text)
      const entries = Object.entries(v)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i]!
        todo.push({ value: child, path: `${at}.${k}`, key: k })
      }
    }
  }
  return null
}

/**
 * How deeply a JSON body may nest arrays and objects (the outermost one is level 1). Real bodies
 * nest a few levels; the limit keeps every recursive walk of a body (validation, JSON.stringify,
 * PostgreSQL's jsonb) far from its stack limit.
 */
export const MAX_JSON_DEPTH = 64

/**
 * Whether JSON text nests arrays and objects more than `max` levels deep: one pass over the text,
 * skipping strings, so it is decided before anything builds or walks the nested value. Malformed
 * text gets some answer; the parser refuses it anyway.
 */
export function jsonTooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // a string: jump to its closing quote, past escaped characters
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i)
        if (s === 0x5c) i++
        else if (s === 0x22) break
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return false
}

type JsonParser = (req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => void

/**
 * Fastify's JSON parser (with its prototype-poisoning protection), except that an empty body is no
 * body (many clients send Content-Type: application/json on every request, even bodiless ones) and
 * a body nested more than MAX_JSON_DEPTH levels is a VALIDATION_ERROR before it is parsed.
 */
export function jsonBodyParser(defaultParser: JsonParser): JsonParser {
  return (req, body, done) => {
    if (body.trim() === '') return done(null, undefined)
    if (jsonTooDeep(body)) return done(invalid('body', `must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`))
    return defaultParser(req, body, done)
  }
}

/** 'atrium-validation': route schemas through validatorCompiler, JSON bodies through jsonBodyParser. */
export const validationPlugin = fp(
  async (app) => {
    app.setValidatorCompiler(validatorCompiler(app.schemas))
    app.removeContentTypeParser('application/json')
    app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser(app.getDefaultJsonParser('error', 'error')))
    // A POST without a body is an empty object: optional flags default, required fields are named.
    // Text the database cannot store (NUL, unpaired surrogates) is refused here, before it can reach
    // the database and fail there.
    app.addHook('preValidation', (request, _reply, done) => {
      if (request.body === undefined && request.routeOptions.schema?.body) request.body = {}
      // The query string and path parameters reach SQL as text too (a file list's prefix, say).
      const bad = findUnstorableText(request.body) ?? findUnstorableText(request.query, 'querystring') ?? findUnstorableText(request.params, 'params')
      done(bad ? invalid(bad.field, bad.message) : undefined)
    })
  },
  { name: 'atrium-validation', dependencies: ['atrium-envelope'] },
)
