// The approval page authUrl points at: static HTML and a script from our own origin (see
// http/pages.ts for the headers). The script reads loginId and state from the address.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { PAGE_ROUTE, readAsset, sendPage } from '../../http/pages.js'

const HTML = readAsset(import.meta.url, 'approve.html')
const SCRIPT = readAsset(import.meta.url, 'approve.js')

// A broken link still gets the page, which explains what went wrong, rather than a JSON error.
const PageQuery = Type.Object({
  loginId: Type.Optional(Type.String({ maxLength: 200 })),
  state: Type.Optional(Type.String({ maxLength: 200 })),
})

export const approvalPageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/cli/auth/approve',
    {
      config: PAGE_ROUTE,
      schema: { hide: true, summary: 'CLI login approval page (HTML)', querystring: PageQuery },
    },
    async (_req, reply) => sendPage(reply, 'html', HTML),
  )

  app.get(
    '/cli/auth/approve.js',
    {
      config: PAGE_ROUTE,
      schema: { hide: true, summary: 'Script of the CLI login approval page' },
    },
    async (_req, reply) => sendPage(reply, 'js', SCRIPT),
  )
}
