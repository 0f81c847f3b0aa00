// POST /api/v1/gdpr/export: the caller's personal data as one JSON document (service.ts).
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { actorOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { apiErrors, Envelope } from '../../http/schemas.js'
import type { GdprService } from './service.js'

const Body = Type.Object(
  {
    format: Type.Optional(Type.Literal('json', { default: 'json', description: 'The only format: one JSON document' })),
  },
  { additionalProperties: false },
)
const Open = (description: string) => Type.Array(Type.Object({}, { additionalProperties: true }), { description })

const GdprExport = Type.Object({
  format: Type.Literal('atrium.gdpr-export'),
  formatVersion: Type.Integer(),
  generatedAt: Type.String({ format: 'date-time' }),
  subject: Type.Object({ userId: Type.String({ format: 'uuid' }), email: Type.String() }),
  personalData: Type.Object(
    {
      user: Type.Object({}, { additionalProperties: true }),
      memberships: Open('The tenant the person belongs to, with their role'),
      sessions: Open('Sign-in sessions: method, address, browser, times'),
      apiKeys: Open(
        'Keys the person made: name, type, prefix, last four characters, permissions, times (never the secret)',
      ),
    },
    { description: 'What Atrium holds about the person' },
  ),
  processingHistory: Open(
    'Audit entries of what the person did (themselves or through their keys) and of what was done to their account',
  ),
  consentRecords: Open('Invitations accepted and command-line logins approved in the browser'),
  dataSharingLog: Open(
    'What went to whom: agent runs to the model provider, events naming the person to webhook receivers',
  ),
})

export const gdprRoutes: FastifyPluginAsyncTypebox<{ gdpr: GdprService }> = async (app, { gdpr }) => {
  app.post(
    '/gdpr/export',
    {
      schema: {
        tags: ['export'],
        summary: 'Your personal data: personal data, processing history, consent records and the data sharing log',
        description:
          'Of the person whose credential calls (a signed-in user, or a key the user made); a key nobody made is FORBIDDEN.',
        body: Body,
        response: { 200: Envelope(GdprExport), ...apiErrors('FORBIDDEN') },
      },
    },
    async (req) => ok(req, await gdpr.export(actorOf(req))),
  )
}
