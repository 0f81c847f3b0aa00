// 'atrium-chat': chat sessions, their messages and their streams under /api/v1; replies generate
// on the job runner (queue 'chat.reply', server/jobs.ts). The chat-history export (export-*.ts) is a part of its own.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { Platform } from '../../platform/index.js'
import { chatExportRoutes } from './export-routes.js'
import type { ChatExportService } from './export-service.js'
import { chatRoutes } from './routes.js'
import type { ChatService } from './service.js'

export const chatPlugin = fp(
  async (app, o: { chat: ChatService; chatExport: ChatExportService; platform: Pick<Platform, 'cache'> }) => {
    await app.register(chatRoutes, { prefix: API_PREFIX, chat: o.chat, cache: o.platform.cache })
    await app.register(chatExportRoutes, { prefix: API_PREFIX, chatExport: o.chatExport })
  },
  { name: 'atrium-chat', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
