// The browser's session: the session token in an HttpOnly cookie (never readable by scripts),
// SameSite=Lax, Secure when the request came over TLS. A request that authenticates by this cookie
// and changes state must come from our own origin: that, the cookie's SameSite and JSON-only bodies
// (which a cross-site form cannot send without a CORS preflight we never grant) stop CSRF.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { forbidden, unauthorized } from '../domain/errors.js'

export const SESSION_COOKIE = 'atrium_session'

const secure = (request: FastifyRequest) => request.protocol === 'https'

export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, token: string, expiresAt: Date): void {
  reply.setCookie(SESSION_COOKIE, token, {
    httpOnly: true,
    secure: secure(request),
    sameSite: 'lax',
    path: '/',
    expires: expiresAt,
  })
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, { httpOnly: true, secure: secure(request), sameSite: 'lax', path: '/' })
}

/** Refuses a state-changing request that a page of another origin made the browser send. */
export function assertSameOrigin(request: FastifyRequest, publicUrl: string): void {
  const allowed = new Set([new URL(publicUrl).origin, `${request.protocol}://${request.host}`])
  const origin = request.headers.origin
  const site = request.headers['sec-fetch-site']
  if (origin !== undefined && !allowed.has(origin))
    throw forbidden('Cross-origin request refused', { reason: 'csrf', origin })
  if (site !== undefined && site !== 'same-origin' && site !== 'none')
    throw forbidden('Cross-site request refused', { reason: 'csrf', site })
}

/**
 * The session token of a request: the one in the body when given (API clients), else the cookie
 * (browsers), which is accepted only from our own origin.
 */
export function sessionTokenOf(request: FastifyRequest, bodyToken: string | undefined, publicUrl: string): string {
  if (bodyToken !== undefined) return bodyToken
  const cookie = request.cookies?.[SESSION_COOKIE]
  if (!cookie) throw unauthorized('Send the session token as token, or sign in so the browser holds the session cookie')
  assertSameOrigin(request, publicUrl)
  return cookie
}
