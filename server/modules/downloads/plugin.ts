// 'atrium-downloads': the signed links of the local blob store, verified with its own key (the
// platform store directly, not a tenant's); S3 storage serves its own links.
import fp from 'fastify-plugin'
import type { LocalBlobs } from '../../platform/blobs.js'
import { downloadsRoutes } from './routes.js'

export const downloadsPlugin = fp(
  async (app) => {
    const { blobs } = app.platform
    if (blobs.kind === 'local') await app.register(downloadsRoutes, { blobs: blobs as LocalBlobs })
  },
  { name: 'atrium-downloads', dependencies: ['atrium-platform'] },
)
