// /api/v1/platform/tenants/:tenantId/export...: a tenant's exports. The tenant's own credentials
// with the export permission reach their own tenant (another tenant's id is 404); a platform
// operator key (svc_admin_) reaches any tenant.
import { Type, type Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { tenantPathActor } from '../../http/actor.js'
import { tenantPathList } from '../../http/tenant-path.js'
import { created } from '../../http/route-schemas.js'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope, oneOf, TenantParams } from '../../http/schemas.js'
import { invalid } from '../../domain/errors.js'
import { FORMATS, INCLUDE_NAMES, INCLUDES } from './format.js'
import { FREQUENCIES, type SchedulesService } from './schedules.js'
import { PROVIDERS, type Destination, type ExportsService } from './service.js'

export const tags = ['export']
/** The export permission, on the tenant's own routes; operator keys for every tenant. */
export const exportAccess: FastifyContextConfig = { permission: 'export', operator: 'also' }

const Format = oneOf(FORMATS)
const Include = Type.Array(oneOf(INCLUDE_NAMES), {
  minItems: 1,
  maxItems: INCLUDE_NAMES.length,
  description: `What to export: any of ${INCLUDES.join(', ')} ("chat history" is taken for chat_history), or all`,
})

/** The fields that name a bucket of the tenant's (destination s3, and every schedule). */
export const DestinationFields = {
  provider: Type.Optional({ ...oneOf(PROVIDERS), default: 's3' }),
  s3Endpoint: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 2000,
      description:
        "The store, as http(s)://host[:port]: S3, R2, GCS (interoperability) or an S3 connector for Azure Blob. Omitted: this site's own object store (the S3 store of the tenant's region), with the bucket and keys given; VALIDATION_ERROR on a site that keeps files in a folder",
    }),
  ),
  s3Region: Type.Optional(
    Type.String({
      maxLength: 64,
      description: "Default us-east-1 (auto for r2); without s3Endpoint, the region the site's store signs with",
    }),
  ),
  s3Bucket: Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.\\-]{1,61}[a-z0-9]$' }),
  s3Prefix: Type.Optional(
    Type.String({
      maxLength: 512,
      description: 'Folder in the bucket for the archives (a / is added); omitted, they go at the top of the bucket',
    }),
  ),
  s3AccessKey: Type.String({ minLength: 1, maxLength: 512, description: 'Write-only: sealed at rest, never returned' }),
  s3SecretKey: Type.String({ minLength: 1, maxLength: 512, description: 'Write-only: sealed at rest, never returned' }),
}

const ExportBody = Type.Object(
  {
    format: Type.Optional({
      ...Format,
      default: 'zip',
      description: 'zip (the archive a restore reads), json (one document) or csv (a zip of one CSV per table)',
    }),
    include: Type.Optional({ ...Include, default: ['all'] }),
    destination: Type.Optional(
      Type.Union([Type.Literal('download'), Type.Literal('s3')], {
        default: 'download',
        description: 'download: a link valid 7 days; s3: a bucket of yours (the s3* fields)',
      }),
    ),
    ...Type.Partial(Type.Object(DestinationFields)).properties,
  },
  { additionalProperties: false },
)

const Problem = Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()])

export const ExportJob = Type.Object({
  exportId: Type.String({ format: 'uuid' }),
  tenantId: Type.String({ format: 'uuid' }),
  kind: Type.Union([Type.Literal('manual'), Type.Literal('scheduled'), Type.Literal('backup')]),
  scheduleId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
  status: Type.Union([
    Type.Literal('pending'),
    Type.Literal('running'),
    Type.Literal('completed'),
    Type.Literal('failed'),
  ]),
  format: Format,
  include: Type.Array(oneOf(INCLUDES)),
  destination: Type.Union([Type.Literal('download'), Type.Literal('s3')]),
  location: Type.Union(
    [
      Type.Object({
        provider: Type.String(),
        endpoint: Type.String(),
        bucket: Type.String(),
        key: Type.Union([Type.String(), Type.Null()]),
      }),
      Type.Null(),
    ],
    {
      description: 'destination s3: the bucket and the key of the archive',
    },
  ),
  downloadUrl: Type.Union([Type.String(), Type.Null()], { description: 'Completed downloads, until expiresAt' }),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  size: Type.Union([Type.Integer(), Type.Null()], { description: 'Bytes of the archive' }),
  checksum: Type.Union([Type.String({ pattern: '^sha256:[0-9a-f]{64}$' }), Type.Null()]),
  error: Problem,
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  completedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

/** The destination fields of a body, checked complete when `needed`. */
export function destinationOf(
  body: Partial<Record<keyof typeof DestinationFields, string>>,
  needed: boolean,
): Destination | undefined {
  if (!needed) return undefined
  const missing = (['s3Bucket', 's3AccessKey', 's3SecretKey'] as const).filter((k) => !body[k])
  if (missing.length)
    throw invalid(`body.${missing[0]}`, 'is required for an s3 destination', {
      errors: missing.map((k) => ({ field: `body.${k}`, message: 'is required' })),
    })
  return body as Destination
}

const ScheduleBody = Type.Object(
  {
    frequency: oneOf(FREQUENCIES),
    format: Type.Optional({ ...Format, default: 'zip' }),
    include: Type.Optional({ ...Include, default: ['all'] }),
    destination: Type.Optional(
      Type.Literal('s3', { default: 's3', description: 'Scheduled exports go to a bucket of yours' }),
    ),
    ...DestinationFields,
  },
  { additionalProperties: false },
)

const Schedule = Type.Object({
  scheduleId: Type.String({ format: 'uuid' }),
  tenantId: Type.String({ format: 'uuid' }),
  frequency: oneOf(FREQUENCIES),
  format: Format,
  include: Type.Array(oneOf(INCLUDES)),
  destination: Type.Literal('s3'),
  provider: Type.String(),
  s3Endpoint: Type.String({ description: "The store the archives go to (this site's own when none was given)" }),
  s3Region: Type.String(),
  s3Bucket: Type.String(),
  s3Prefix: Type.String(),
  nextRunAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When the next export is due (UTC)',
  }),
  createdAt: Type.String({ format: 'date-time' }),
  lastRuns: Type.Array(ExportJob, { description: 'The latest runs, newest first (up to 10)' }),
})
const ScheduleParams = Type.Object({
  tenantId: Type.String({ format: 'uuid' }),
  scheduleId: Type.String({ format: 'uuid' }),
})

export const exportsRoutes: FastifyPluginAsyncTypebox<{
  exports: ExportsService
  schedules: SchedulesService
}> = async (app, { exports, schedules }) => {
  app.post(
    '/platform/tenants/:tenantId/export/schedule',
    {
      config: exportAccess,
      schema: {
        tags,
        summary: 'Export the tenant every day, week or month into a bucket of its own',
        description:
          'The destination is checked first (a probe object written and deleted: VALIDATION_ERROR with details.check write or delete and the store’s error code). Without s3Endpoint the archives go to this site’s own object store (the bucket and keys given); s3Endpoint in the answer says which store. The keys are write-only. Each slot runs once across all replicas.',
        params: TenantParams,
        body: ScheduleBody,
        response: { 201: Envelope(Schedule), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      const b = req.body
      const view = await schedules.create(tenantPathActor(req), req.params.tenantId, {
        frequency: b.frequency,
        ...(b.format ? { format: b.format } : {}),
        ...(b.include ? { include: b.include } : {}),
        destination: destinationOf(b, true)!,
      })
      return created(req, reply, view)
    },
  )

  tenantPathList(app, '/platform/tenants/:tenantId/export/schedule', {
    config: exportAccess,
    tags,
    summary: "The tenant's export schedules, newest first",
    item: Schedule,
    list: (a, t, q) => schedules.list(a, t, q),
  })

  app.get(
    '/platform/tenants/:tenantId/export/schedule/:scheduleId',
    {
      config: exportAccess,
      schema: {
        tags,
        summary: 'An export schedule with its latest runs',
        params: ScheduleParams,
        response: { 200: Envelope(Schedule), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await schedules.get(tenantPathActor(req), req.params.tenantId, req.params.scheduleId)),
  )

  app.delete(
    '/platform/tenants/:tenantId/export/schedule/:scheduleId',
    {
      config: exportAccess,
      schema: {
        tags,
        summary: 'Delete an export schedule (its past runs stay listed)',
        params: ScheduleParams,
        response: { 204: Type.Null(), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      await schedules.remove(tenantPathActor(req), req.params.tenantId, req.params.scheduleId)
      reply.code(204)
    },
  )

  app.post(
    '/platform/tenants/:tenantId/export',
    {
      config: exportAccess,
      schema: {
        tags,
        summary: "Export the tenant's data (a job: poll GET .../export/{exportId})",
        description:
          'The free plan has 1 manual export a month (QUOTA_EXCEEDED). An s3 destination is checked first: a probe object written and deleted; without s3Endpoint it is a bucket of this site’s own object store.',
        params: TenantParams,
        body: ExportBody,
        response: { 202: Envelope(ExportJob), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'QUOTA_EXCEEDED') },
      },
    },
    async (req, reply) => {
      const b = req.body as Static<typeof ExportBody>
      const s3 = destinationOf(b, b.destination === 's3')
      const view = await exports.request(tenantPathActor(req), req.params.tenantId, {
        ...(b.format ? { format: b.format } : {}),
        ...(b.include ? { include: b.include } : {}),
        ...(b.destination ? { destination: b.destination } : {}),
        ...(s3 ? { s3 } : {}),
      })
      reply.code(202)
      return ok(req, view)
    },
  )

  tenantPathList(app, '/platform/tenants/:tenantId/export', {
    config: exportAccess,
    tags,
    summary: "The tenant's exports, newest first (manual, scheduled and automatic backups)",
    item: ExportJob,
    list: (a, t, q) => exports.list(a, t, q),
  })

  app.get(
    '/platform/tenants/:tenantId/export/:exportId',
    {
      config: exportAccess,
      schema: {
        tags,
        summary:
          'An export job: pending, running, completed (downloadUrl, expiresAt, size, checksum) or failed (error)',
        params: Type.Object({ tenantId: Type.String({ format: 'uuid' }), exportId: Type.String({ format: 'uuid' }) }),
        response: { 200: Envelope(ExportJob), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await exports.get(tenantPathActor(req), req.params.tenantId, req.params.exportId)),
  )
}
