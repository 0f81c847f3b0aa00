// 'atrium-api-keys': API keys under /api/v1, and how 'atrium-auth' recognises them on every request.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { Authenticator } from '../../domain/principal.js'
import { apiKeysRoutes } from './routes.js'
import type { ApiKeysService } from './service.js'

export const apiKeysPlugin = fp(
  async (app, o: { apiKeys: ApiKeysService; apiKeyAuth: Authenticator }) => {
    app.addAuthenticator(o.apiKeyAuth)
    await app.register(apiKeysRoutes, { prefix: API_PREFIX, keys: o.apiKeys })
  },
  { name: 'atrium-api-keys', dependencies: ['atrium-platform', 'atrium-credentials', 'atrium-auth', 'atrium-license'] },
)
