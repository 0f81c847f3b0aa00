// 'atrium-credentials': one credential cache per app (domain/credentials.ts), listening to the
// invalidations every replica publishes (platform/credentials.ts) until the app closes.
import fp from 'fastify-plugin'
import type { Credentials } from '../domain/credentials.js'
import { openCredentials } from '../platform/credentials.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Principals this replica trusts, and the message that drops them everywhere. */
    credentials: Credentials
  }
}

export const credentialsPlugin = fp(
  async (app) => {
    const credentials = await openCredentials(app.platform.cache, app.platform.log)
    app.decorate('credentials', credentials)
    app.addHook('onClose', () => credentials.close())
  },
  { name: 'atrium-credentials', dependencies: ['atrium-platform'] },
)
