// 'atrium-oauth': sign-in through OpenID Connect providers, at the root; a signed-in user's session
// starts through the sign-in service. The providers and the service are built by services.ts.
import fp from 'fastify-plugin'
import type { Platform } from '../../platform/index.js'
import { oauthRoutes } from './routes.js'
import type { OAuthService } from './service.js'

export const oauthPlugin = fp(
  async (app, o: { platform: Pick<Platform, 'config'>; oauth: OAuthService }) => {
    await app.register(oauthRoutes, { oauth: o.oauth, publicUrl: o.platform.config.PUBLIC_URL })
  },
  { name: 'atrium-oauth', dependencies: ['atrium-platform', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'] },
)
