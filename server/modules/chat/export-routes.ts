// POST /api/v1/chat/export: the tenant's chat history in a range of days, as a JSON document in the
// response envelope, sent as an attachment while it is read from the database (export-service.ts).
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig, FastifyReply } from 'fastify'
import type { Readable } from 'node:stream'
import { actorOf } from '../../http/actor.js'
import { meta } from '../../http/envelope.js'
import { apiErrors, Envelope } from '../../http/schemas.js'
import { contentDisposition } from '../../platform/blobs.js'
import { MAX_PERIOD_DAYS } from '../../domain/days.js'
import { EXPORT_FORMAT_VERSION, type ChatExportService } from './export-service.js'
import { Message, Session } from './routes.js'

const Day = (description: string) => Type.String({ format: 'date', description })
const ExportBody = Type.Object(
  {
    dateRange: Type.Object(
      {
        start: Day('First day (UTC), included, as YYYY-MM-DD'),
        end: Day(`Last day (UTC), included, as YYYY-MM-DD; not before start, at most ${MAX_PERIOD_DAYS} days from it`),
      },
      { additionalProperties: false },
    ),
    format: Type.Optional(Type.Literal('json', { default: 'json', description: 'The only format: one JSON document' })),
    includeMetadata: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          "Also each session's agentId, projectId, updatedAt and messageCount (all its messages, in the range or not), and each message's status, error, usage and completedAt",
      }),
    ),
  },
  { additionalProperties: false },
)

const ExportedMessage = Type.Composite([
  Type.Pick(Message, ['id', 'role', 'content', 'createdAt']),
  Type.Partial(Type.Pick(Message, ['status', 'error', 'usage', 'completedAt'])),
])
const ExportedSession = Type.Composite([
  Type.Pick(Session, ['id', 'title', 'createdAt']),
  Type.Partial(Type.Pick(Session, ['agentId', 'projectId', 'updatedAt', 'messageCount'])),
  Type.Object({
    messages: Type.Array(ExportedMessage, { description: "The session's messages created in the range, oldest first" }),
  }),
])
const ExportDocument = Type.Object({
  format: Type.Literal(EXPORT_FORMAT_VERSION, { description: "The document format's version" }),
  tenantId: Type.String({ format: 'uuid' }),
  exportedAt: Type.String({ format: 'date-time' }),
  dateRange: Type.Object({ start: Type.String({ format: 'date' }), end: Type.String({ format: 'date' }) }),
  sessions: Type.Array(ExportedSession, {
    description: 'The sessions with at least one message in the range, by id (the order they were created in)',
  }),
  counts: Type.Object({ sessions: Type.Integer(), messages: Type.Integer() }),
})

/** Sends a JSON document as a download, from a stream (the reply's hooks, headers and logs as any). */
const attachment = (reply: FastifyReply, doc: { filename: string; stream: Readable }) =>
  reply
    .type('application/json; charset=utf-8')
    .header('content-disposition', contentDisposition(doc.filename))
    .header('cache-control', 'private, no-store')
    .send(doc.stream)

// Chat history is read (chat:read) and leaves the service (export: what every export needs). It
// changes nothing, so it stays open while an expired license makes the API read-only.
const config: FastifyContextConfig = { permission: ['chat:read', 'export'], readOnlyAllowed: true }

export const chatExportRoutes: FastifyPluginAsyncTypebox<{ chatExport: ChatExportService }> = async (
  app,
  { chatExport },
) => {
  app.post(
    '/chat/export',
    {
      config,
      schema: {
        tags: ['chat'],
        summary: "Export the tenant's chat history in a range of days",
        description: `The sessions with messages created in dateRange (UTC days, both included, at most ${MAX_PERIOD_DAYS}), each with those messages, as one JSON document. Needs chat:read and export. Audited as chat.exported once it began sending (a refusal or a failure before the first byte is only the error answer).`,
        body: ExportBody,
        produces: ['application/json'],
        response: {
          200: {
            ...Envelope(ExportDocument),
            description:
              "The document as the envelope's data, in application/json as an attachment (chat_export_{tenantId}_{start}_{end}.json), streamed as it is read; meta comes last. A fault after the first bytes closes the connection before the envelope ends (its JSON is then incomplete)",
          },
          ...apiErrors('FORBIDDEN'),
        },
      },
    },
    async (req, reply) => attachment(reply, await chatExport.open(actorOf(req), req.body, req.log, meta(req))),
  )
}
