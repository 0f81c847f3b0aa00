// /api/v1/platform/tenants/:tenantId/restore: a tenant archive uploaded as multipart/form-data (the
// archive in the part named file, {merge, validate} as JSON in the part named options), streamed
// into the tenant's store and restored on the job runner. Restoring needs the restore permission;
// a platform operator key may restore into any tenant.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import multipart from '@fastify/multipart'
import type { FastifyContextConfig } from 'fastify'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope, TenantParams } from '../../http/schemas.js'
import { streamedBody } from '../../http/validation.js'
import { AppError, invalid } from '../../domain/errors.js'
import { tenantPathActor } from '../../http/actor.js'
import { tenantPathList } from '../../http/tenant-path.js'
import type { RestoreOptions, RestoresService } from './service.js'

const tags = ['export']
const access: FastifyContextConfig = { permission: 'restore', operator: 'also' }
const OPTIONS_BYTES = 4096

const Problem = Type.Union([
  Type.Object({
    code: Type.String(),
    message: Type.String(),
    details: Type.Optional(Type.Object({}, { additionalProperties: true })),
  }),
  Type.Null(),
])
const RestoreJob = Type.Object({
  restoreId: Type.String({ format: 'uuid' }),
  tenantId: Type.String({ format: 'uuid' }),
  status: Type.Union([Type.Literal('processing'), Type.Literal('completed'), Type.Literal('failed')]),
  merge: Type.Boolean(),
  validate: Type.Boolean(),
  size: Type.Integer({ description: 'Bytes uploaded' }),
  report: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
    description:
      'When completed: the archive, counts per kind (inArchive, restored, conflicts, skipped), files, what was skipped and why, conflicts (docs/portability.md)',
  }),
  error: Problem,
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  completedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

// The form as the OpenAPI document shows it; the parts are read as a stream, not validated as a body.
const RestoreForm = Type.Object({
  file: Type.Unsafe<unknown>({
    type: 'string',
    format: 'binary',
    description: 'The archive: the zip of a tenant export',
  }),
  options: Type.Optional(
    Type.String({
      description: 'JSON: {"merge": boolean (default false), "validate": boolean (default false)}',
      examples: ['{"merge":false,"validate":false}'],
    }),
  ),
})

function parseOptions(text: string): RestoreOptions {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw invalid('options', 'must be JSON: {"merge": boolean, "validate": boolean}')
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid('options', 'must be a JSON object')
  const o = value as Record<string, unknown>
  for (const k of Object.keys(o))
    if (k !== 'merge' && k !== 'validate') throw invalid(`options.${k}`, 'is not an option (merge, validate)')
  for (const k of ['merge', 'validate'] as const)
    if (o[k] !== undefined && typeof o[k] !== 'boolean') throw invalid(`options.${k}`, 'must be a boolean')
  return { merge: o.merge === true, validate: o.validate === true }
}

export const restoresRoutes: FastifyPluginAsyncTypebox<{ restores: RestoresService; maxUploadBytes: number }> = async (
  app,
  { restores, maxUploadBytes },
) => {
  // In this scope only: the form's parts are streamed, one file of at most the upload limit.
  await app.register(multipart, {
    limits: { fileSize: maxUploadBytes, files: 1, fields: 1, fieldSize: OPTIONS_BYTES, parts: 2 },
  })

  app.post(
    '/platform/tenants/:tenantId/restore',
    {
      config: access,
      schema: {
        tags,
        summary: 'Restore a tenant archive into the tenant (a job: poll GET .../restore/{restoreId})',
        description:
          'multipart/form-data: the archive in the part named file, options in the part named options. merge=false replaces the tenant’s data of the kinds the archive includes; merge=true adds what is absent and reports conflicts; validate=true only checks and reports.',
        consumes: ['multipart/form-data'],
        params: TenantParams,
        body: streamedBody(RestoreForm),
        response: {
          202: Envelope(RestoreJob),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE'),
        },
      },
    },
    async (req, reply) => {
      if (!req.isMultipart())
        throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Send the archive as multipart/form-data (parts file and options)')
      const view = await restores.request(tenantPathActor(req), req.params.tenantId, async (put) => {
        let options: RestoreOptions = { merge: false, validate: false }
        let sawFile = false
        try {
          for await (const part of req.parts()) {
            if (part.type === 'file') {
              if (part.fieldname !== 'file')
                throw invalid(part.fieldname, 'is not a part of this form: send the archive as file')
              sawFile = true
              await put(part.file)
            } else if (part.fieldname === 'options') {
              if (part.valueTruncated) throw invalid('options', `must be at most ${OPTIONS_BYTES} bytes`)
              options = parseOptions(String(part.value))
            } else throw invalid(part.fieldname, 'is not a part of this form (file, options)')
          }
        } catch (err) {
          if (err instanceof AppError) throw err
          const code = (err as { code?: string }).code
          if (code === 'FST_REQ_FILE_TOO_LARGE')
            throw new AppError(
              'PAYLOAD_TOO_LARGE',
              `The archive is larger than ${maxUploadBytes} bytes (RESTORE_MAX_UPLOAD_BYTES)`,
              { limit: maxUploadBytes },
            )
          if (code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT')
            throw invalid('body', 'the form holds one file part and one options part at most')
          // What is left is the form's own (busboy's "Unexpected end of form", a malformed part).
          throw invalid('body', 'the multipart form cannot be read to its end', { reason: code ?? 'malformed' })
        }
        if (!sawFile) throw invalid('file', 'is required: the archive, in a part named file')
        return options
      })
      reply.code(202)
      return ok(req, view)
    },
  )

  tenantPathList(app, '/platform/tenants/:tenantId/restore', {
    config: access,
    tags,
    summary: "The tenant's restores, newest first",
    item: RestoreJob,
    list: (a, t, q) => restores.list(a, t, q),
  })

  app.get(
    '/platform/tenants/:tenantId/restore/:restoreId',
    {
      config: access,
      schema: {
        tags,
        summary: 'A restore job: processing, then completed (report) or failed (error: code, message, details)',
        params: Type.Object({ tenantId: Type.String({ format: 'uuid' }), restoreId: Type.String({ format: 'uuid' }) }),
        response: { 200: Envelope(RestoreJob), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await restores.get(tenantPathActor(req), req.params.tenantId, req.params.restoreId)),
  )
}
