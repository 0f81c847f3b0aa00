// The specification's envelope on every JSON response: {data, meta} on success (ok, page), and
// {error, meta} on failure (the error handler), with meta.request_id and meta.timestamp. Also the
// 404 and 405 answers for unknown routes.
import { randomUUID } from 'node:crypto'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import FindMyWay from 'find-my-way'
import { AppError, ERRORS, type ErrorCode } from './errors.js'

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/

/** Honours a sane incoming X-Request-Id so a request can be traced across systems. */
export function genReqId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID()
}

export const meta = (request: FastifyRequest) => ({ request_id: request.id, timestamp: new Date().toISOString() })

/** A success envelope. Handlers return it explicitly, so the route's response schema types it. */
export const ok = <T>(request: FastifyRequest, data: T) => ({ data, meta: meta(request) })

/** A page of a list, with the cursor of the next page (null at the end). */
export const page = <T>(request: FastifyRequest, data: T[], nextCursor: string | null) => ({
  data,
  meta: { ...meta(request), nextCursor },
})

export interface RouteEntry { method: string; url: string; hidden: boolean }

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered, for 405 answers and for checking the OpenAPI document is complete. */
    routeTable: RouteEntry[]
  }
}

const STATUS_CODES: Record<number, ErrorCode> = Object.fromEntries(
  (Object.entries(ERRORS) as [ErrorCode, { status: number }][]).map(([code, e]) => [e.status, code]),
)

function toAppError(err: FastifyError): AppError {
  if (err instanceof AppError) return err
  if (err.validation) {
    const where = err.validationContext ?? 'request'
    const errors = err.validation.map((v) => {
      const missing = v.keyword === 'required' ? `/${String((v.params as { missingProperty?: string }).missingProperty)}` : ''
      const extra = v.keyword === 'additionalProperties' ? `/${String((v.params as { additionalProperty?: string }).additionalProperty)}` : ''
      const field = `${where}${v.instancePath}${missing}${extra}`.replace(/\//g, '.')
      const message = v.keyword === 'additionalProperties' ? 'is not a known field' : (v.message ?? 'is invalid')
      return { field, message }
    })
    const first = errors[0]
    return new AppError('VALIDATION_ERROR', first ? `${first.field} ${first.message}` : 'Invalid request', { errors })
  }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Fastify's own client errors (malformed JSON, empty body, too large, wrong media type).
    const code = STATUS_CODES[status] ?? 'VALIDATION_ERROR'
    return new AppError(code, err.message || ERRORS[code].message, err.code ? { reason: err.code } : {})
  }
  return new AppError('INTERNAL_ERROR')
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: AppError) {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v)
  return reply
    .code(err.status)
    .type('application/json; charset=utf-8')
    .send({ error: { code: err.code, message: err.message, details: err.details }, meta: meta(request) })
}

export function installEnvelope(app: FastifyInstance) {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })

  app.setErrorHandler((err: FastifyError, request, reply) => {
    const appErr = toAppError(err)
    if (appErr.status >= 500) request.log.error({ err }, 'request failed')
    else request.log.info({ code: appErr.code, reason: err.code }, appErr.message)
    return sendError(request, reply, appErr)
  })

  // Every registered route also goes into a second router, so an unknown URL can be told apart
  // from a known URL with the wrong method (405 with Allow).
  const known = FindMyWay({ ignoreTrailingSlash: false })
  app.decorate('routeTable', [] as RouteEntry[])
  app.addHook('onRoute', (route) => {
    for (const m of [route.method].flat()) {
      known.on(m as 'GET', route.url, () => {})
      app.routeTable.push({ method: m, url: route.url, hidden: Boolean((route.schema as { hide?: boolean } | undefined)?.hide) })
    }
  })

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/'
    const allowed = (['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter((m) => known.find(m, path))
    if (allowed.length) {
      return sendError(request, reply, new AppError('METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}`, { method: request.method, allowed }, { allow: allowed.join(', ') }))
    }
    return sendError(request, reply, new AppError('RESOURCE_NOT_FOUND', `No route ${request.method} ${path}`, { method: request.method, path }))
  })
}
