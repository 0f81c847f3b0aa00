import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { AppError } from '../../domain/errors.js'
import { actorOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope, IdParams, NonBlankName } from '../../http/schemas.js'
import { byIdSchema, created, deleted, deleteSchema, listSchema, pageOf } from '../../http/route-schemas.js'
import { followEvents, lastEventId, sseRoute } from '../../http/sse.js'
import type { Cache } from '../../platform/cache.js'
import { sessionChannel } from './replies.js'
import { messageView, sessionView, type ChatService } from './service.js'

const Title = NonBlankName(200)
export const Session = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  agentId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description: 'The agent whose system prompt replies use; null when none (or it was deleted)',
  }),
  projectId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
  messageCount: Type.Integer(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
})
export const Message = Type.Object({
  id: Type.String({ format: 'uuid' }),
  sessionId: Type.String({ format: 'uuid' }),
  role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
  content: Type.String(),
  status: Type.Union([Type.Literal('generating'), Type.Literal('completed'), Type.Literal('failed')]),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  usage: Type.Union([Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer() }), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
  completedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

const CreateBody = Type.Object(
  {
    title: Type.Optional(Title),
    agentId: Type.Optional(Type.Union([Type.String({ format: 'uuid' }), Type.Null()])),
    projectId: Type.Optional(Type.Union([Type.String({ format: 'uuid' }), Type.Null()])),
  },
  { additionalProperties: false },
)
const PatchBody = Type.Object({ title: Title }, { additionalProperties: false })
const PostBody = Type.Object(
  {
    content: Type.String({
      minLength: 1,
      maxLength: 100_000,
      description: "The user's message; the plan bounds its length",
    }),
    sessionId: Type.Optional(
      Type.String({
        format: 'uuid',
        description: "The session, as the specification's message names it; when given, the path's id",
      }),
    ),
    projectId: Type.Optional(
      Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
        description:
          "A project of the tenant. A session without a project is bound to it; a session bound to another is refused. null or absent: the session's project as it is",
      }),
    ),
  },
  { additionalProperties: false },
)
const Posted = Type.Object({
  message: Message,
  replyId: Type.String({
    format: 'uuid',
    description:
      'The assistant reply now being generated: follow it on the stream, or read it from the messages once completed',
  }),
})

const tags = ['chat']
const read: FastifyContextConfig = { permission: 'chat:read' }
const write: FastifyContextConfig = { permission: 'chat:write' }

export const chatRoutes: FastifyPluginAsyncTypebox<{ chat: ChatService; cache: Cache }> = async (
  app,
  { chat, cache },
) => {
  app.post(
    '/chat/sessions',
    {
      config: write,
      schema: {
        tags,
        summary: 'Start a chat session',
        body: CreateBody,
        response: { 201: Envelope(Session), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'QUOTA_EXCEEDED') },
      },
    },
    async (req, reply) => created(req, reply, sessionView(await chat.create(actorOf(req), req.body ?? {}))),
  )

  app.get(
    '/chat/sessions',
    { config: read, schema: listSchema(tags, 'List chat sessions, newest first', Session, 'FORBIDDEN') },
    async (req) => pageOf(req, await chat.list(actorOf(req).tenantId, req.query), sessionView),
  )

  app.get(
    '/chat/sessions/:id',
    { config: read, schema: byIdSchema(tags, 'Get a chat session', Session, 'FORBIDDEN', 'RESOURCE_NOT_FOUND') },
    async (req) => ok(req, sessionView(await chat.get(actorOf(req).tenantId, req.params.id))),
  )

  app.patch(
    '/chat/sessions/:id',
    {
      config: write,
      schema: {
        tags,
        summary: 'Rename a chat session',
        params: IdParams,
        body: PatchBody,
        response: { 200: Envelope(Session), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, sessionView(await chat.retitle(actorOf(req).tenantId, req.params.id, req.body.title))),
  )

  app.delete(
    '/chat/sessions/:id',
    { config: write, schema: deleteSchema(tags, 'Delete a chat session and its messages') },
    async (req) => {
      await chat.remove(actorOf(req).tenantId, req.params.id)
      return deleted(req, req.params.id)
    },
  )

  app.get(
    '/chat/sessions/:id/messages',
    {
      config: read,
      schema: {
        ...listSchema(tags, "A session's messages, oldest first", Message, 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        description: 'A page ends early, with a nextCursor, once its messages reach 4 MiB of text.',
        params: IdParams,
      },
    },
    async (req) => pageOf(req, await chat.messages(actorOf(req).tenantId, req.params.id, req.query), messageView),
  )

  app.post(
    '/chat/sessions/:id/messages',
    {
      config: write,
      schema: {
        tags,
        summary: 'Send a message; the reply generates in the background (one at a time per session)',
        description:
          "The body may also carry the specification's sessionId (it must be the path's id) and projectId (a session without a project is bound to it; one bound to another project refuses it).",
        params: IdParams,
        body: PostBody,
        response: {
          201: Envelope(Posted),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'CONFLICT', 'PAYLOAD_TOO_LARGE', 'LLM_NOT_CONFIGURED'),
        },
      },
    },
    async (req, reply) => {
      const r = await chat.post(actorOf(req), req.params.id, req.body)
      return created(req, reply, { message: messageView(r.message), replyId: r.replyId })
    },
  )

  app.get(
    '/chat/sessions/:id/stream',
    {
      config: read,
      schema: {
        tags,
        summary: "Follow a session's replies (Server-Sent Events; resumable with Last-Event-ID)",
        description:
          'Events: message.delta {messageId, delta}, message.completed {message}, error {messageId, code, message}. Each has an id (its number in the session); a reconnect with Last-Event-ID gets exactly the events after it. The stream stays open for the next replies (it ends when the session is deleted); a comment is sent every 15 s.',
        params: IdParams,
        ...sseRoute,
      },
    },
    async (req, reply) => {
      const { tenantId } = actorOf(req)
      const sessionId = req.params.id
      let following = false
      return followEvents(req, reply, {
        cache,
        channel: sessionChannel(sessionId),
        after: lastEventId(req, req.query.lastEventId),
        read: async (after) => {
          try {
            const events = (await chat.events(tenantId, sessionId, after)).map((e) => ({
              id: e.seq,
              event: e.type,
              data: e.data,
            }))
            following = true
            return { events, ended: false }
          } catch (err) {
            // Deleted while followed: the stream ends (a reconnect is then 404) rather than polling for a session that
            // is gone.
            if (following && err instanceof AppError && err.code === 'RESOURCE_NOT_FOUND')
              return { events: [], ended: true }
            throw err
          }
        },
        onError: (err) => req.log.warn({ err }, 'chat stream could not read its events; trying again'),
      })
    },
  )
}
