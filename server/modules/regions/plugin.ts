// 'atrium-regions': the regions, a tenant's regional preferences, feature checks and routing
// information under /api/v1. Where a tenant's objects go is the storage seam's (platform/storage.ts).
import fp from 'fastify-plugin'
import { VERSION } from '../../../common/version.js'
import { API_PREFIX } from '../../http/auth.js'
import { regionsRoutes } from './routes.js'
import { regionsService } from './service.js'

export const regionsPlugin = fp(
  async (app) => {
    const { db, storage, config, secrets } = app.platform
    const database = config.DATABASE_URL ? new URL(config.DATABASE_URL) : null
    const stores: Record<string, { kind: 's3' | 'local'; endpoint: string | null; bucket: string | null }> = {
      [config.DEFAULT_REGION]: config.R2_ENDPOINT ? { kind: 's3', endpoint: config.R2_ENDPOINT, bucket: config.R2_BUCKET } : { kind: 'local', endpoint: null, bucket: null },
    }
    for (const [code, r] of Object.entries(config.REGION_STORES)) stores[code] = { kind: 's3', endpoint: r.endpoint, bucket: r.bucket }
    const regions = regionsService({
      db,
      storage,
      secrets,
      policy: app.outbound,
      defaultRegion: config.DEFAULT_REGION,
      regionStores: Object.keys(config.REGION_STORES),
      airGapped: config.AIR_GAPPED,
      webSearch: Boolean(config.WEB_SEARCH_URL),
      where: {
        stores,
        database: database ? { kind: 'postgres', host: database.host, name: database.pathname.slice(1) || null } : { kind: 'embedded', host: null, name: null },
      },
      version: VERSION,
      now: app.now,
    })
    await app.register(regionsRoutes, { prefix: API_PREFIX, regions })
  },
  { name: 'atrium-regions', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
