// 'atrium-request-log': one log line per request, written once it is answered (in place of
// Fastify's two), and a warning when requests come through a proxy the server does not trust.
import fp from 'fastify-plugin'
import { redactUrl } from '../logger.js'

export const requestLogPlugin = fp(
  async (app) => {
    const { config, log } = app.platform
    app.addHook('onResponse', (request, reply, done) => {
      if (log.isLevelEnabled('info'))
        request.log.info(
          {
            method: request.method,
            url: redactUrl(request.url),
            status: reply.statusCode,
            ms: Math.round(reply.elapsedTime),
          },
          'request',
        )
      done()
    })
    if (config.TRUSTED_PROXIES.length) return
    // Limits by address see the proxy's address when the proxy is not trusted: every client behind
    // it shares them. Said once per process, on the first request that shows a proxy on its way.
    let warned = false
    app.addHook('onRequest', (request, _reply, done) => {
      if (!warned && request.headers['x-forwarded-for'] !== undefined) {
        warned = true
        log.warn(
          { proxy: request.socket.remoteAddress },
          "requests arrive through a proxy (X-Forwarded-For) but TRUSTED_PROXIES is empty: limits by address see the proxy's address, so all clients behind it share them; set TRUSTED_PROXIES to its address (docs/operations.md)",
        )
      }
      done()
    })
  },
  { name: 'atrium-request-log', dependencies: ['atrium-platform'] },
)
