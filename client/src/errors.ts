// The errors the client throws. Every answer of the API outside 2xx becomes an AtriumError carrying
// the envelope's code, message and details (match on `code`, never on the message); a request that
// got no answer at all becomes an AtriumNetworkError, so an application can tell "the server said
// no" from "the server could not be reached".
import type { components } from './openapi.js'

/** Every code of the server's error catalog. */
export type ErrorCode = components['schemas']['ErrorEnvelope']['error']['code']

export class AtriumError extends Error {
  override readonly name = 'AtriumError'
  constructor(
    /** A code of the catalog; UNEXPECTED_RESPONSE when the answer was not the API's envelope (a proxy's error page). */
    readonly code: ErrorCode | 'UNEXPECTED_RESPONSE',
    message: string,
    readonly status: number,
    readonly details: Record<string, unknown> = {},
    /** meta.request_id of the answer: quote it to the operator, who finds the request in the logs. */
    readonly requestId: string | null = null,
  ) {
    super(message)
  }

  /** The session is not valid (401): the client has cleared its tokens; send the user to login. */
  get unauthorized(): boolean {
    return this.status === 401
  }
}

/** No answer: the address is wrong, the server is down, or the connection broke. */
export class AtriumNetworkError extends Error {
  override readonly name = 'AtriumNetworkError'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}

interface Envelope {
  error?: { code?: unknown; message?: unknown; details?: unknown }
  meta?: { request_id?: unknown }
}

/** The AtriumError for a response that is not 2xx (its body is read). */
export async function errorOf(res: Response): Promise<AtriumError> {
  const text = await res.text().catch(() => '')
  let body: Envelope | null = null
  try {
    body = JSON.parse(text) as Envelope
  } catch {
    body = null
  }
  const e = body?.error
  const requestId = typeof body?.meta?.request_id === 'string' ? body.meta.request_id : res.headers.get('x-request-id')
  if (e && typeof e.code === 'string' && typeof e.message === 'string') {
    const details = e.details && typeof e.details === 'object' ? (e.details as Record<string, unknown>) : {}
    return new AtriumError(e.code as ErrorCode, e.message, res.status, details, requestId)
  }
  return new AtriumError(
    'UNEXPECTED_RESPONSE',
    `HTTP ${res.status} ${res.statusText}: ${text.slice(0, 200)}`.trim(),
    res.status,
    {},
    requestId,
  )
}
