// 'atrium-regions': the regions, a tenant's regional preferences, feature checks and routing
// information under /api/v1. Where a tenant's objects go is the storage seam's (platform/storage.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { regionsRoutes } from './routes.js'
import type { RegionsService } from './service.js'

export const regionsPlugin = fp(
  async (app, { regions }: { regions: RegionsService }) => {
    await app.register(regionsRoutes, { prefix: API_PREFIX, regions })
  },
  { name: 'atrium-regions', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
