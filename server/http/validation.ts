// Request validation. Bodies are validated strictly (no type coercion, unknown fields refused) so a
// wrong type is a VALIDATION_ERROR instead of a silently converted value; query strings and path
// parameters arrive as text and are coerced to the declared types.
import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify'
import fp from 'fastify-plugin'
import { UUID_RE } from '../../common/ids.js'
import { invalid } from '../domain/errors.js'
import { findUnstorableText, jsonTooDeep, MAX_JSON_DEPTH } from '../domain/text.js'
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
    const ids =
      httpPart === 'params' || httpPart === 'querystring'
        ? Object.keys(properties).filter((k) => properties[k]?.format === 'uuid')
        : []
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

type JsonParser = (req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => void

/**
 * Fastify's JSON parser (with its prototype-poisoning protection), except that an empty body is no
 * body (many clients send Content-Type: application/json on every request, even bodiless ones) and
 * a body nested more than MAX_JSON_DEPTH levels is a VALIDATION_ERROR before it is parsed.
 */
export function jsonBodyParser(defaultParser: JsonParser): JsonParser {
  return (req, body, done) => {
    if (body.trim() === '') return done(null, undefined)
    if (jsonTooDeep(body))
      return done(invalid('body', `must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`))
    return defaultParser(req, body, done)
  }
}

/** 'atrium-validation': route schemas through validatorCompiler, JSON bodies through jsonBodyParser. */
export const validationPlugin = fp(
  async (app) => {
    app.setValidatorCompiler(validatorCompiler(app.schemas))
    app.removeContentTypeParser('application/json')
    app.addContentTypeParser(
      'application/json',
      { parseAs: 'string' },
      jsonBodyParser(app.getDefaultJsonParser('error', 'error')),
    )
    // A POST without a body is an empty object: optional flags default, required fields are named.
    // Text the database cannot store (NUL, unpaired surrogates) is refused here, before it can reach
    // the database and fail there.
    app.addHook('preValidation', (request, _reply, done) => {
      if (request.body === undefined && request.routeOptions.schema?.body) request.body = {}
      // The query string reaches SQL as text too (a file list's prefix, say). (Path parameters are
      // ids, checked by format, or a file path, checked by its own rules.)
      const bad = findUnstorableText(request.body) ?? findUnstorableText(request.query, 'querystring')
      done(bad ? invalid(bad.field, bad.message) : undefined)
    })
  },
  { name: 'atrium-validation', dependencies: ['atrium-envelope'] },
)
