// Serves the signed links of the local blob store (embedded mode). With S3 the store serves its own
// presigned links and this route does not exist. The signature is the credential: no API key here.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { contentDisposition, type LocalBlobs } from '../../platform/blobs.js'
import { forbidden, notFound } from '../../domain/errors.js'
import { errors } from '../../http/schemas.js'

const TYPES: Record<string, string> = { zip: 'application/zip', json: 'application/json' }

export const downloadsRoutes: FastifyPluginAsyncTypebox<{ blobs: LocalBlobs }> = async (app, { blobs }) => {
  app.get(
    '/blobs/*',
    {
      schema: {
        tags: ['downloads'],
        summary: 'Download through a signed link (embedded blob storage only)',
        querystring: Type.Object({ expires: Type.String(), filename: Type.String(), signature: Type.String() }),
        response: errors('VALIDATION_ERROR', 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
      },
    },
    async (req, reply) => {
      const key = (req.params as { '*': string })['*']
      let checked: ReturnType<LocalBlobs['verifyLink']>
      try {
        checked = blobs.verifyLink(key, req.query)
      } catch {
        throw notFound('download', key)
      }
      if ('refused' in checked)
        throw forbidden(
          checked.refused === 'expired' ? 'This download link has expired' : 'This download link is not valid',
          { reason: checked.refused },
        )
      const info = await stat(checked.path).catch(() => null)
      if (!info?.isFile()) throw notFound('download', key)
      const ext = key.split('.').pop() ?? ''
      reply
        .type(TYPES[ext] ?? 'application/octet-stream')
        .header('content-length', info.size)
        .header('content-disposition', contentDisposition(checked.filename))
        .header('cache-control', 'private, no-store')
      return reply.send(createReadStream(checked.path))
    },
  )
}
