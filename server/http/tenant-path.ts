// Routes that name their tenant in the path (`/platform/tenants/:tenantId/...`): the tenant's own
// credential reaches its own tenant, a platform operator's key any tenant. Their lists have one
// shape: the same parameters, query, errors and page, so they are declared once here.
import type { TSchema, Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import type { Actor } from '../domain/actor.js'
import { tenantPathActor } from './actor.js'
import { listSchema, pageOf } from './route-schemas.js'
import { PageQuery, TenantParams } from './schemas.js'

type App = Parameters<FastifyPluginAsyncTypebox>[0]

/** GET `url`: a page of the tenant's `item`s, newest first, as `list` gives them. */
export function tenantPathList<T extends TSchema>(
  app: App,
  url: string,
  o: {
    config: FastifyContextConfig
    tags: string[]
    summary: string
    item: T
    list: (
      actor: Actor<string | null>,
      tenantId: string,
      query: Static<typeof PageQuery>,
    ) => Promise<{ items: Static<T>[]; nextCursor: string | null }>
  },
): void {
  app.get(
    url,
    {
      config: o.config,
      schema: {
        ...listSchema<TSchema>(o.tags, o.summary, o.item, 'FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        params: TenantParams,
      },
    },
    async (req) => {
      const r = await o.list(tenantPathActor(req), req.params.tenantId, req.query)
      return pageOf(req, r)
    },
  )
}
