// 'atrium-chat': chat sessions and their messages under /api/v1.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { chatRoutes } from './routes.js'
import { chatService } from './service.js'

export const chatPlugin = fp(
  async (app) => {
    await app.register(chatRoutes, { prefix: API_PREFIX, chat: chatService({ db: app.platform.db }) })
  },
  { name: 'atrium-chat', dependencies: ['atrium-platform', 'atrium-auth', 'atrium-license'] },
)
