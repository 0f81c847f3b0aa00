// 'atrium-tracing': with TRACING_OTLP_ENDPOINT set, a server span per request, named by its method
// and route template (GET /api/v1/projects/:id), never by its URL, which holds ids and signed
// links' tokens. The span is the active one while the request's hooks and handler run, so the
// queries, Redis commands and model calls they make are its children. The request's log lines
// carry its trace id (trace_id), and the span carries the request id (atrium.request_id: the
// X-Request-Id header and every envelope's meta.request_id), so an operator goes from either to
// the other. Off, the plugin adds no hook.
import { context, SpanKind, trace, type Context, type Span } from '@opentelemetry/api'
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
} from '@opentelemetry/semantic-conventions'
import type { FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Logger } from 'pino'
import { failSpan } from '../platform/tracing.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's span and the context it is active in (tracing on, sampled), until the span ends. */
    traced: { span: Span; context: Context } | null
  }
}

/** Where a request's span says which request it was. */
export const ATTR_REQUEST_ID = 'atrium.request_id'

// Any other method is named _OTHER, as the semantic conventions say: a client chooses it.
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

export const tracingPlugin = fp(
  async (app) => {
    const { tracing } = app.platform
    if (!tracing.enabled) return
    app.decorateRequest('traced', null)

    app.addHook('onRequest', (request, reply, done) => {
      const method = METHODS.has(request.method) ? request.method : '_OTHER'
      const route = request.routeOptions.url
      const parent = tracing.extract(request.headers)
      const span = tracing.tracer.startSpan(
        route ? `${method} ${route}` : method,
        {
          kind: SpanKind.SERVER,
          attributes: {
            [ATTR_HTTP_REQUEST_METHOD]: method,
            ...(route ? { [ATTR_HTTP_ROUTE]: route } : {}),
            [ATTR_REQUEST_ID]: request.id,
          },
        },
        parent,
      )
      // Not sampled: nothing under it is recorded either, so it is left there (entering a context
      // costs every promise made in it).
      if (!span.isRecording()) return done()
      const active = trace.setSpan(parent, span)
      request.traced = { span, context: active }
      // The connection closed: a response under way (a stream the client left) ends with its
      // status; one never begun (the client gone before the answer) as aborted. Neither
      // onResponse nor onRequestAbort runs when a client leaves after sending its whole body.
      reply.raw.once('close', () => end(request, reply.raw.headersSent ? reply.statusCode : null))
      ;(request.log as Logger).setBindings({ trace_id: span.spanContext().traceId })
      // The hooks after this one, and the handler when there is no body, run from here.
      context.with(active, done)
    })
    // A body is read on the socket's events, outside the request's context: the rest of the
    // request (validation, the credential check, the handler) runs in it again from here.
    app.addHook('preValidation', (request, _reply, done) => {
      if (request.traced) context.with(request.traced.context, done)
      else done()
    })

    const end = (request: FastifyRequest, status: number | null) => {
      const span = request.traced?.span
      if (!span) return
      request.traced = null
      if (status === null) failSpan(span, 'aborted')
      else {
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
        if (status >= 500) failSpan(span, String(status))
      }
      span.end()
    }
    app.addHook('onResponse', (request, reply, done) => {
      end(request, reply.statusCode)
      done()
    })
    app.addHook('onRequestAbort', (request, done) => {
      end(request, null)
      done()
    })
  },
  { name: 'atrium-tracing', dependencies: ['atrium-platform'] },
)
