// 'atrium-gdpr': the GDPR export of the caller's personal data, POST /api/v1/gdpr/export.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { gdprRoutes } from './routes.js'
import type { GdprService } from './service.js'

export const gdprPlugin = fp(
  async (app, { gdpr }: { gdpr: GdprService }) => {
    await app.register(gdprRoutes, { prefix: API_PREFIX, gdpr })
  },
  { name: 'atrium-gdpr', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
