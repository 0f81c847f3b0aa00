// Request validation. Bodies are validated strictly (no type coercion, unknown fields refused) so a
// wrong type is a VALIDATION_ERROR instead of a silently converted value; query strings and path
// parameters arrive as text and are coerced to the declared types.
import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

function make(opts: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, useDefaults: true, strict: false, ...opts })
  addFormats(ajv)
  return ajv
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = make({ coerceTypes: false })
  const coercing = make({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object)
}
