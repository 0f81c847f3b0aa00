// The page an invitation's acceptUrl opens: the invitee chooses a password there. Static HTML and
// a script from our own origin (see http/pages.ts); the token stays in the address's fragment.
import type { FastifyPluginAsync } from 'fastify'
import { PAGE_ROUTE, readAsset, sendPage } from '../../http/pages.js'

const HTML = readAsset(import.meta.url, 'accept.html')
const SCRIPT = readAsset(import.meta.url, 'accept.js')

export const invitationPageRoutes: FastifyPluginAsync = async (app) => {
  app.get(
    '/invitations/accept',
    {
      config: PAGE_ROUTE,
      schema: { hide: true, summary: 'Invitation page (HTML)' },
    },
    async (_req, reply) => sendPage(reply, 'html', HTML),
  )

  app.get(
    '/invitations/accept.js',
    {
      config: PAGE_ROUTE,
      schema: { hide: true, summary: 'Script of the invitation page' },
    },
    async (_req, reply) => sendPage(reply, 'js', SCRIPT),
  )
}
