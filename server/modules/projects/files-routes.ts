// Project files over HTTP: /api/v1/projects/:projectId/files, and /files/<path> for one file. The
// upload body is the file's bytes whatever their type, so this scope parses every body as a raw
// Buffer, up to the largest file any plan allows (the tenant's own plan is checked by the service).
import { Transform } from 'node:stream'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { actorOf } from '../../http/actor.js'
import { ok, page } from '../../http/envelope.js'
import { apiErrors, Envelope, PageEnvelope, PageQuery } from '../../http/schemas.js'
import { AppError, invalid } from '../../domain/errors.js'
import { MAX_FILE_BYTES } from '../../domain/plans.js'
import type { Db } from '../../platform/db.js'
import type { FileMeta, ProjectFilesService } from './files-service.js'

const Etag = Type.String({
  pattern: '^[0-9a-f]{64}$',
  description: 'SHA-256 of the bytes, in hex (the ETag header carries it quoted)',
})
const FileItem = Type.Object({
  path: Type.String(),
  size: Type.Integer({ description: 'Bytes' }),
  etag: Etag,
  contentType: Type.String(),
  updatedAt: Type.String({ format: 'date-time' }),
  version: Type.Integer({ description: 'The project version that last wrote this path' }),
})
const Written = Type.Object({
  path: Type.String(),
  size: Type.Integer(),
  etag: Etag,
  contentType: Type.String(),
  version: Type.Integer({ description: 'The project version this change made' }),
})

const ProjectIdParams = Type.Object({ projectId: Type.String({ format: 'uuid' }) })
const FileParams = Type.Object({
  projectId: Type.String({ format: 'uuid' }),
  '*': Type.String({
    description: 'The file path, relative, segments separated by /; percent-encode what a URL cannot carry',
  }),
})
const ListQuery = Type.Composite(
  [
    PageQuery,
    Type.Object({
      prefix: Type.Optional(Type.String({ maxLength: 1024, description: 'Only paths that start with this text' })),
    }),
  ],
  {
    additionalProperties: false,
  },
)
const Bytes = Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: "The file's bytes" })
// No `type`: the body reaches validation as a Buffer, which any JSON type would refuse.
const UploadBytes = Type.Unsafe<Buffer>({
  format: 'binary',
  description: "The file's bytes, under any Content-Type (application/octet-stream when none)",
})
const Conditional = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      description:
        'PUT, DELETE: "<etag>" (the change happens only while the file has it) or * (only while it exists); else 412',
    }),
  ),
  'if-none-match': Type.Optional(
    Type.String({
      description: 'GET: "<etag>" answers 304 while the file has it; PUT: * creates only, 412 when the file exists',
    }),
  ),
})

const tags = ['projects']
const read: FastifyContextConfig = { permission: 'projects:read' }
const write: FastifyContextConfig = { permission: 'projects:write' }

const present = (f: FileMeta) => ({ ...f, updatedAt: f.updatedAt.toISOString() })
const quoted = (etag: string) => `"${etag}"`

/** An If-Match value: one strong entity tag, or *. (A list or a weak tag is refused, never misread.) */
function ifMatchOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const v = header.trim()
  if (v === '*') return '*'
  const m = /^"([0-9a-f]{64})"$/.exec(v)
  if (m) return m[1]
  // Not an etag this API gives: it can never match the file's.
  if (/^"[^"]*"$/.test(v)) return '"unmatchable"'
  throw invalid('headers.if-match', 'must be one quoted entity tag or *')
}

export const filesRoutes: FastifyPluginAsyncTypebox<{ files: ProjectFilesService; db: Db }> = async (
  app,
  { files, db },
) => {
  // Every upload is the file's own bytes: no parser of this scope interprets them.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_FILE_BYTES }, (_req, body, done) =>
    done(null, body),
  )
  // An upload is read only as far as the tenant's plan allows one file (bodyLimit above is the
  // largest plan's): a declared length over it is refused unread, a longer body when it gets there.
  app.addHook('preParsing', async (req, _reply, payload) => {
    if (req.method !== 'PUT' || !req.principal) return payload
    const limit = files.fileLimit(actorOf(req))
    const tooLarge = (size?: number) =>
      new AppError('PAYLOAD_TOO_LARGE', `A file may hold at most ${limit} bytes on this plan`, {
        limit,
        ...(size === undefined ? {} : { size }),
      })
    const declared = Number(req.headers['content-length'])
    if (declared > limit) throw tooLarge(declared)
    let size = 0
    return payload.pipe(
      new Transform({
        transform(chunk: Buffer, _enc, done) {
          size += chunk.length
          done(size > limit ? tooLarge() : null, chunk)
        },
      }),
    )
  })

  app.get(
    '/projects/:projectId/files',
    {
      config: read,
      schema: {
        tags,
        summary: 'List the files of a project, in path order',
        params: ProjectIdParams,
        querystring: ListQuery,
        response: { 200: PageEnvelope(FileItem), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => {
      const r = await files.list(actorOf(req).tenantId, req.params.projectId, req.query)
      return page(req, r.data.map(present), r.nextCursor)
    },
  )

  app.get(
    '/projects/:projectId/files/*',
    {
      config: read,
      schema: {
        tags,
        summary: "Download a file's bytes (ETag, Content-Type as stored; If-None-Match gives 304)",
        params: FileParams,
        headers: Conditional,
        response: {
          200: Bytes,
          304: Type.Null({ description: 'The file still has the entity tag given in If-None-Match' }),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'SERVICE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      const { tenantId } = actorOf(req)
      const given = req.headers['if-none-match']
      if (given !== undefined) {
        const meta = await files.stat(tenantId, req.params.projectId, req.params['*'])
        const tags = given.split(',').map((t) => t.trim().replace(/^W\//, ''))
        if (tags.includes('*') || tags.includes(quoted(meta.etag)))
          return reply.code(304).header('etag', quoted(meta.etag)).type(meta.contentType).send(null)
      }
      const { meta, body } = await files.read(tenantId, req.params.projectId, req.params['*'])
      return reply
        .header('etag', quoted(meta.etag))
        .header('x-content-type-options', 'nosniff')
        .type(meta.contentType)
        .send(body)
    },
  )

  app.put(
    '/projects/:projectId/files/*',
    {
      config: write,
      bodyLimit: MAX_FILE_BYTES,
      schema: {
        tags,
        summary: 'Create or replace a file (a new project version); the body is the bytes, of any content type',
        description: `The body is stored as it is, with its Content-Type (application/octet-stream when none). The plan limits a file's size (PAYLOAD_TOO_LARGE) and all of a project's files (QUOTA_EXCEEDED).`,
        params: FileParams,
        headers: Conditional,
        body: { content: { 'application/octet-stream': { schema: UploadBytes } } } as unknown as undefined,
        response: {
          200: Envelope(Written),
          201: Envelope(Written),
          ...apiErrors(
            'FORBIDDEN',
            'RESOURCE_NOT_FOUND',
            'PRECONDITION_FAILED',
            'PAYLOAD_TOO_LARGE',
            'QUOTA_EXCEEDED',
            'SERVICE_UNAVAILABLE',
          ),
        },
      },
    },
    async (req, reply) => {
      const a = actorOf(req)
      const path = files.normalizePath(req.params['*'])
      const ifMatch = ifMatchOf(req.headers['if-match'])
      const ifNoneMatch = req.headers['if-none-match']?.trim()
      if (ifNoneMatch !== undefined && ifNoneMatch !== '*')
        throw invalid('headers.if-none-match', 'must be * on an upload')
      // Both: the file would have to exist and not exist.
      if (ifMatch !== undefined && ifNoneMatch !== undefined)
        throw new AppError('PRECONDITION_FAILED', 'If-Match and If-None-Match: * cannot both hold', { path })
      const condition = ifMatch !== undefined ? ifMatch : ifNoneMatch !== undefined ? null : undefined
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0) // no body: an empty file
      const r = await files.put(a, req.params.projectId, path, body, req.headers['content-type'], condition)
      const f = r.files[0]!
      reply.code(r.created.includes(path) ? 201 : 200).header('etag', quoted(f.etag))
      return ok(req, { path: f.path, size: f.size, etag: f.etag, contentType: f.contentType, version: r.version })
    },
  )

  app.delete(
    '/projects/:projectId/files/*',
    {
      config: write,
      schema: {
        tags,
        summary: 'Delete a file (a new project version)',
        params: FileParams,
        headers: Conditional,
        response: {
          204: Type.Null({ description: 'Deleted' }),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'PRECONDITION_FAILED'),
        },
      },
    },
    async (req, reply) => {
      const a = actorOf(req)
      const path = files.normalizePath(req.params['*'])
      const ifMatch = ifMatchOf(req.headers['if-match'])
      await db.tenant(a.tenantId, (sql) =>
        files.apply(
          sql,
          a,
          req.params.projectId,
          [{ path, delete: true }],
          ifMatch === undefined ? {} : { ifMatch: { [path]: ifMatch } },
        ),
      )
      return reply.code(204).send(null)
    },
  )
}
