// The specification's envelope on every JSON response: {data, meta} on success (ok, page), and
// {error, meta} on failure (the error handler), with meta.request_id and meta.timestamp. Also the
// 404 and 405 answers for unknown routes.
import { randomUUID } from 'node:crypto'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import FindMyWay from 'find-my-way'
import { Counter } from 'prom-client'
import { unavailableDependency } from '../platform/db.js'
import { named } from '../platform/metrics.js'
import { AppError, ERRORS, type ErrorCode } from '../domain/errors.js'
import { ErrorBody } from './schemas.js'

const DEPENDENCIES = ['database', 'storage', 'other'] as const

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

export interface RouteEntry {
  method: string
  url: string
  hidden: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered, for 405 answers and for checking the OpenAPI document is complete. */
    routeTable: RouteEntry[]
  }
}

// The first code of a status is its generic one (413 is PAYLOAD_TOO_LARGE, not QUOTA_EXCEEDED).
const STATUS_CODES: Record<number, ErrorCode> = Object.fromEntries(
  (Object.entries(ERRORS) as [ErrorCode, { status: number }][]).reverse().map(([code, e]) => [e.status, code]),
)

function toAppError(err: FastifyError): AppError {
  if (err instanceof AppError) return err
  if (err.validation) {
    const where = err.validationContext ?? 'request'
    const errors = err.validation.map((v) => {
      const missing =
        v.keyword === 'required' ? `/${String((v.params as { missingProperty?: string }).missingProperty)}` : ''
      const extra =
        v.keyword === 'additionalProperties'
          ? `/${String((v.params as { additionalProperty?: string }).additionalProperty)}`
          : ''
      const field = `${where}${v.instancePath}${missing}${extra}`.replace(/\//g, '.')
      const message = v.keyword === 'additionalProperties' ? 'is not a known field' : (v.message ?? 'is invalid')
      return { field, message }
    })
    const first = errors[0]
    return new AppError('VALIDATION_ERROR', first ? `${first.field} ${first.message}` : 'Invalid request', { errors })
  }
  const unavailable = unavailableDependency(err)
  if (unavailable) {
    if (unavailable === 'database')
      return new AppError(
        'SERVICE_UNAVAILABLE',
        'The database is unavailable; retry shortly',
        { dependency: 'database' },
        { 'retry-after': '1' },
      )
    if (unavailable === 'schema')
      return new AppError(
        'SERVICE_UNAVAILABLE',
        "The database is not migrated to this release's schema yet; retry once the migrations have run",
        { dependency: 'database', reason: 'schema' },
        { 'retry-after': '5' },
      )
    return new AppError(
      'SERVICE_UNAVAILABLE',
      'A service the server depends on is unavailable; retry shortly',
      {},
      { 'retry-after': '1' },
    )
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

/**
 * Fastify's frameworkErrors: a URL it cannot decode (FST_ERR_BAD_URL) or a path parameter over its
 * length limit (FST_ERR_MAX_PARAM_LENGTH) is answered before any hook runs, so in Fastify's own
 * format unless answered here.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  reply.header('x-request-id', request.id)
  return sendError(request, reply, toAppError(err))
}

/**
 * Fastify's clientErrorHandler: a request Node's parser refused (headers over its 16 KiB limit, a
 * malformed request line or header, a client too slow to send one) never becomes a request, so the
 * envelope is written to the socket here, which is then closed (Node will not read further from it).
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket) {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) return
  // The refused bytes came after a request still being answered (such as bytes after a request
  // that asked to close the connection): a second answer would corrupt that one, which closes the
  // connection as asked, or the keep-alive timeout does.
  if (err.code === 'HPE_CLOSED_CONNECTION' || (socket as Socket & { _httpMessage?: unknown })._httpMessage) return
  // An answer to HEAD has no body; the method is known when the refused bytes begin the request.
  const head = Buffer.isBuffer(err.rawPacket) && err.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD '
  const message =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'Request headers are too large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'The request was not received in time'
        : 'Malformed HTTP request'
  const requestId = randomUUID()
  const body = JSON.stringify({
    error: { code: 'VALIDATION_ERROR', message, details: err.code ? { reason: err.code } : {} },
    meta: { request_id: requestId, timestamp: new Date().toISOString() },
  })
  socket.end(
    `HTTP/1.1 ${ERRORS.VALIDATION_ERROR.status} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
  )
}

/**
 * 'atrium-envelope': the request id on every response, every error in the envelope, 404 and 405
 * for unknown routes, and the error envelope's schema that routes refer to.
 */
export const envelopePlugin = fp(
  async (app) => {
    app.addSchema(ErrorBody)
    // Hooks on every request take a callback rather than returning a promise: one promise and its
    // microtasks less per hook and request.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id)
      done()
    })

    // 503s by what failed, for the storage and database alerts: a fixed set of labels, whatever a
    // detail says.
    const unavailable = new Counter({
      ...named('atrium_dependency_errors_total', app.hasDecorator('registry') ? app.registry : undefined),
      help: 'Requests answered 503 because a dependency failed, by dependency (database, storage, other)',
      labelNames: ['dependency'] as const,
    })
    for (const dependency of DEPENDENCIES) unavailable.inc({ dependency }, 0)

    app.setErrorHandler((err: FastifyError, request, reply) => {
      const appErr = toAppError(err)
      // (/readyz's own 503 is its answer, not a failure: its gauges report it.)
      if (appErr.code === 'SERVICE_UNAVAILABLE' && !('checks' in appErr.details)) {
        const named = appErr.details.dependency
        unavailable.inc({ dependency: DEPENDENCIES.find((d) => d === named) ?? 'other' })
      }
      // An outage is logged once per request without its stack: it is not a bug here. A deadlock may
      // be one: logged whole.
      const code = (err as { code?: string }).code
      if (appErr.code === 'SERVICE_UNAVAILABLE' && appErr !== err && code !== '40P01')
        request.log.warn({ err: { code, message: err.message }, dependency: appErr.details.dependency }, appErr.message)
      else if (appErr.status >= 500) request.log.error({ err }, 'request failed')
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
        app.routeTable.push({
          method: m,
          url: route.url,
          hidden: Boolean((route.schema as { hide?: boolean } | undefined)?.hide),
        })
      }
    })

    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0] ?? '/'
      const allowed = (['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter((m) => known.find(m, path))
      if (allowed.length) {
        return sendError(
          request,
          reply,
          new AppError(
            'METHOD_NOT_ALLOWED',
            `${request.method} is not allowed on ${path}`,
            { method: request.method, allowed },
            { allow: allowed.join(', ') },
          ),
        )
      }
      return sendError(
        request,
        reply,
        new AppError('RESOURCE_NOT_FOUND', `No route ${request.method} ${path}`, { method: request.method, path }),
      )
    })
  },
  { name: 'atrium-envelope' },
)
