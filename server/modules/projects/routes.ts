import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { byIdSchema, created, deleted, deleteSchema, listSchema, pageOf } from '../../http/route-schemas.js'
import { apiErrors, DateTime, Envelope, IdParams, NonBlankName } from '../../http/schemas.js'
import type { ProjectsService } from './service.js'

const Project = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  description: Type.String(),
  language: Type.String(),
  version: Type.Integer({ description: 'Current version number; every change adds one' }),
  created_at: DateTime(),
  updated_at: DateTime(),
})

const Version = Type.Object({
  id: Type.String({ format: 'uuid', description: 'versionId' }),
  version: Type.Integer(),
  name: Type.String(),
  description: Type.String(),
  language: Type.String(),
  change: Type.Union(
    [Type.Literal('created'), Type.Literal('updated'), Type.Literal('restored'), Type.Literal('files')],
    {
      description:
        'What made this version: created, updated (fields), restored, or files (a change of the project files)',
    },
  ),
  restored_from: Type.Union([Type.Integer(), Type.Null()], { description: 'Version number a restore went back to' }),
  created_at: DateTime(),
})

const Name = NonBlankName(200)
const Description = Type.String({ maxLength: 10_000 })
const Language = Type.String({ maxLength: 64 })

const CreateBody = Type.Object(
  { name: Name, description: Type.Optional(Description), language: Type.Optional(Language) },
  { additionalProperties: false },
)
const PatchBody = Type.Object(
  { name: Type.Optional(Name), description: Type.Optional(Description), language: Type.Optional(Language) },
  { additionalProperties: false, minProperties: 1 },
)
const BackupBody = Type.Object(
  {
    includeHistory: Type.Boolean({ default: false, description: 'Add versions.json with the version history' }),
    includeAgents: Type.Boolean({ default: false, description: 'Add agents.json with the project agents' }),
  },
  { additionalProperties: false },
)
const Backup = Type.Object({
  backupId: Type.String({ format: 'uuid' }),
  downloadUrl: Type.String({ description: 'Time-limited link to the zip' }),
  expiresAt: Type.String({ format: 'date-time' }),
  size: Type.Integer({ description: 'Bytes' }),
  checksum: Type.String({
    pattern: '^sha256:[0-9a-f]{64}$',
    description: 'sha256:<hex> of exactly the bytes downloaded',
  }),
})
const ProjectIdParams = Type.Object({ projectId: Type.String({ format: 'uuid' }) })
const VersionParams = Type.Object({
  projectId: Type.String({ format: 'uuid' }),
  versionId: Type.String({ format: 'uuid' }),
})

const tags = ['projects']
const read: FastifyContextConfig = { permission: 'projects:read' }
const write: FastifyContextConfig = { permission: 'projects:write' }

export const projectsRoutes: FastifyPluginAsyncTypebox<{ projects: ProjectsService }> = async (app, { projects }) => {
  app.get(
    '/projects',
    { config: read, schema: listSchema(tags, 'List projects, newest first', Project, 'FORBIDDEN') },
    async (req) => pageOf(req, await projects.list(actorOf(req).tenantId, req.query)),
  )

  app.post(
    '/projects',
    {
      config: write,
      schema: {
        tags,
        summary: 'Create a project',
        body: CreateBody,
        response: { 201: Envelope(Project), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req, reply) => created(req, reply, await projects.create(actorOf(req), req.body)),
  )

  app.get(
    '/projects/:id',
    { config: read, schema: byIdSchema(tags, 'Get a project', Project, 'FORBIDDEN', 'RESOURCE_NOT_FOUND') },
    async (req) => ok(req, await projects.get(actorOf(req).tenantId, req.params.id)),
  )

  app.patch(
    '/projects/:id',
    {
      config: write,
      schema: {
        tags,
        summary: 'Change some fields of a project (adds a version)',
        params: IdParams,
        body: PatchBody,
        response: { 200: Envelope(Project), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await projects.update(actorOf(req), req.params.id, req.body)),
  )

  app.delete(
    '/projects/:id',
    { config: write, schema: deleteSchema(tags, 'Delete a project and its versions (backups stay in storage)') },
    async (req) => {
      await projects.remove(actorOf(req).tenantId, req.params.id)
      return deleted(req, req.params.id)
    },
  )

  app.get(
    '/projects/:projectId/versions',
    {
      config: read,
      schema: {
        ...listSchema(tags, 'List versions of a project, newest first', Version, 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        params: ProjectIdParams,
      },
    },
    async (req) => pageOf(req, await projects.versions(actorOf(req).tenantId, req.params.projectId, req.query)),
  )

  app.post(
    '/projects/:projectId/versions/:versionId/restore',
    {
      config: write,
      schema: {
        tags,
        summary: 'Restore a project to a version (recorded as a new version)',
        params: VersionParams,
        response: { 200: Envelope(Project), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await projects.restoreVersion(actorOf(req), req.params.projectId, req.params.versionId)),
  )

  app.post(
    '/projects/:projectId/backup',
    {
      // A backup is how a tenant exports its data: it stays open while an expired license makes the API read-only.
      config: { ...read, readOnlyAllowed: true },
      schema: {
        tags,
        summary: 'Back a project up to a zip and get a download link',
        params: ProjectIdParams,
        body: BackupBody,
        response: { 201: Envelope(Backup), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'SERVICE_UNAVAILABLE') },
      },
    },
    async (req, reply) => created(req, reply, await projects.backup(actorOf(req), req.params.projectId, req.body)),
  )
}
