// 'atrium-api-keys': API keys under /api/v1, and how 'atrium-auth' recognises them on every request.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { apiKeyTags } from './keys.js'
import { legacyKeys } from './legacy.js'
import { apiKeysRoutes } from './routes.js'
import { apiKeyAuthenticator, apiKeysService } from './service.js'

export const apiKeysPlugin = fp(
  async (app) => {
    const {
      platform: { db, secrets, log },
      now,
      credentials,
    } = app
    const tags = apiKeyTags(secrets)
    const legacy = legacyKeys(db, log)
    app.addHook('onReady', () => legacy.start())
    app.addHook('onClose', async () => legacy.close())
    app.addAuthenticator(apiKeyAuthenticator({ db, tags, legacy, cache: credentials.cache }))
    await app.register(apiKeysRoutes, { prefix: API_PREFIX, keys: apiKeysService({ db, tags, credentials, now }) })
  },
  { name: 'atrium-api-keys', dependencies: ['atrium-platform', 'atrium-credentials', 'atrium-auth', 'atrium-license'] },
)
