// 'atrium-oauth': sign-in through OpenID Connect providers, at the root; a signed-in user's session
// starts through 'atrium-sign-in'.
import fp from 'fastify-plugin'
import { oauthRoutes } from './routes.js'

export const oauthPlugin = fp(
  async (app) => {
    const {
      platform: { config, db, log },
      now,
      signIn: auth,
    } = app
    await app.register(oauthRoutes, { db, config, auth, log, now })
  },
  { name: 'atrium-oauth', dependencies: ['atrium-platform', 'atrium-sign-in', 'atrium-pages', '@fastify/cookie'] },
)
