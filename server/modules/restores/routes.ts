// /api/v1/platform/tenants/:tenantId/restore: a tenant archive or a project backup uploaded as
// multipart/form-data (the archive in the part named file, {merge, validate} and for a project backup
// {projectId, asNewProject} as JSON in the part named options), streamed into the tenant's store and
// restored on the job runner. Restoring needs the restore permission;
// a platform operator key may restore into any tenant.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import multipart from '@fastify/multipart'
import type { FastifyContextConfig } from 'fastify'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope, TenantParams } from '../../http/schemas.js'
import { streamedBody } from '../../http/validation.js'
import { isUuid } from '../../../common/ids.js'
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
  projectId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description:
      'A project backup: the project it is restored into (options.projectId), or with asNewProject the id of the project it makes; null: chosen when it runs (report.project)',
  }),
  asNewProject: Type.Boolean({ description: 'A project backup: restored as a new project' }),
  size: Type.Integer({ description: 'Bytes uploaded' }),
  report: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
    description:
      'When completed: the archive, for a project backup the project restored into (project: id, into, created), counts per kind (inArchive, restored, conflicts, skipped), files, what was skipped and why, conflicts (docs/portability.md)',
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
    description: 'The archive: the zip of a tenant export, or a project backup (POST /projects/{projectId}/backup)',
  }),
  options: Type.Optional(
    Type.String({
      description:
        'JSON: {"merge": boolean (default false), "validate": boolean (default false)}; for a project backup also "projectId" (a project of the tenant to restore into) or "asNewProject": true (restore as a new project)',
      examples: [
        '{"merge":false,"validate":false}',
        '{"merge":true,"projectId":"0190f1c2-7a3b-7c4d-8e5f-123456789abc"}',
        '{"asNewProject":true}',
      ],
    }),
  ),
})

const OPTIONS = ['merge', 'validate', 'projectId', 'asNewProject'] as const
const NO_DEFAULTS: RestoreOptions = { merge: false, validate: false, projectId: null, asNewProject: false }

function parseOptions(text: string): RestoreOptions {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw invalid(
      'options',
      'must be JSON: {"merge": boolean, "validate": boolean}, and for a project backup "projectId": UUID or "asNewProject": boolean',
    )
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid('options', 'must be a JSON object')
  const o = value as Record<string, unknown>
  for (const k of Object.keys(o))
    if (!(OPTIONS as readonly string[]).includes(k))
      throw invalid(`options.${k}`, `is not an option (${OPTIONS.join(', ')})`)
  for (const k of ['merge', 'validate', 'asNewProject'] as const)
    if (o[k] !== undefined && typeof o[k] !== 'boolean') throw invalid(`options.${k}`, 'must be a boolean')
  if (o.projectId !== undefined && (typeof o.projectId !== 'string' || !isUuid(o.projectId)))
    throw invalid('options.projectId', 'must be the UUID of a project of the tenant')
  if (o.asNewProject === true) {
    if (o.projectId !== undefined)
      throw invalid(
        'options.projectId',
        'names a project to restore into; asNewProject makes a new one: give one of them',
      )
    if (o.merge === true)
      throw invalid(
        'options.merge',
        'merges into a project that exists; asNewProject makes a new one: give one of them',
      )
  }
  return {
    merge: o.merge === true,
    validate: o.validate === true,
    projectId: typeof o.projectId === 'string' ? o.projectId.toLowerCase() : null,
    asNewProject: o.asNewProject === true,
  }
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
        summary:
          'Restore a tenant archive or a project backup into the tenant (a job: poll GET .../restore/{restoreId})',
        description:
          'multipart/form-data: the archive in the part named file, options in the part named options. The archive is a tenant export (metadata.json) or a project backup (manifest.json, format atrium.project-backup, formatVersion 1 or 2; a newer one is refused ARCHIVE_VERSION_UNSUPPORTED). A tenant export: merge=false replaces the tenant’s data of the kinds the archive includes; merge=true adds what is absent and reports conflicts. A project backup restores its one project: into options.projectId (a project of the tenant: 404 RESOURCE_NOT_FOUND when it has none of that id), as a new project with asNewProject=true, or by default into the project it was made of while the tenant has it, else a new project. Into a project that exists, merge=false puts the backup’s fields and files in place of the project’s and merge=true adds only the files at paths it lacks (the others are conflicts); either is recorded as a new version (change restored). A new project gets the backup’s versions (as many as the plan keeps). Agents come back when the backup holds them. projectId and asNewProject given with a tenant export fail the job VALIDATION_ERROR. validate=true only checks and reports. docs/portability.md “Restoring a project backup”.',
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
      const view = await restores.request(tenantPathActor(req), req.params.tenantId, async (put, check) => {
        let options = NO_DEFAULTS
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
              options = await check(parseOptions(String(part.value)))
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
