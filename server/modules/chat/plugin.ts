// 'atrium-chat': chat sessions, their messages and their streams under /api/v1; replies generate
// on the job runner (queue 'chat.reply'). The chat-history export (export-*.ts) is a part of its own.
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import { chatExportRoutes } from './export-routes.js'
import { chatExportService } from './export-service.js'
import { replyGenerator, REPLY_QUEUE } from './replies.js'
import { chatRoutes } from './routes.js'
import { chatService } from './service.js'

export interface ChatOptions {
  /** Replies generated at once on one replica (default AGENT_RUNS_PER_REPLICA: both mostly wait on the model). */
  chatReplyConcurrency?: number
  /** Messages per page the chat export reads (default EXPORT_PAGE_ROWS; tests make it small). */
  chatExportPageRows?: number
}

export const chatPlugin = fp(
  async (app, o: ChatOptions) => {
    const {
      platform: { db, cache, config },
      llm,
      llmSettings,
    } = app
    const connection = (tenantId: string) => llmSettings.connection(tenantId)
    app.jobs.define<{ sessionId: string; replyId: string }>({
      name: REPLY_QUEUE,
      handler: replyGenerator({ db, cache, llm, connection }),
      concurrency: o.chatReplyConcurrency ?? config.AGENT_RUNS_PER_REPLICA,
      leaseMs: 15_000,
      maxAttempts: 2,
    })
    await app.register(chatRoutes, { prefix: API_PREFIX, chat: chatService({ db, llm, connection }), cache })
    await app.register(chatExportRoutes, { prefix: API_PREFIX, chatExport: chatExportService({ db, now: app.now, ...(o.chatExportPageRows ? { pageRows: o.chatExportPageRows } : {}) }) })
  },
  { name: 'atrium-chat', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license', 'atrium-llm', 'atrium-tenants'] },
)
