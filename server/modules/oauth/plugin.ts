// 'atrium-oauth': sign-in through OpenID Connect providers, at the root; a signed-in user's session
// starts through the sign-in service.
import fp from 'fastify-plugin'
import type { Platform } from '../../platform/index.js'
import type { AuthService } from '../auth/service.js'
import { oauthRoutes } from './routes.js'

export const oauthPlugin = fp(
  async (app, o: { platform: Pick<Platform, 'config' | 'db' | 'log'>; now: () => number; signIn: AuthService }) => {
    const { config, db, log } = o.platform
    await app.register(oauthRoutes, { db, config, auth: o.signIn, log, now: o.now })
  },
  { name: 'atrium-oauth', dependencies: ['atrium-platform', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'] },
)
