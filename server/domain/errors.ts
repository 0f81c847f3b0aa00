// The one error catalog. The first six codes are the API specification's; the rest name HTTP
// conditions the specification does not list, so a client can still match on a code, never on text.
export const ERRORS = {
  UNAUTHORIZED: { status: 401, message: 'Missing or invalid authentication' },
  FORBIDDEN: { status: 403, message: 'Insufficient permissions' },
  RESOURCE_NOT_FOUND: { status: 404, message: 'Resource does not exist' },
  VALIDATION_ERROR: { status: 400, message: 'Invalid request parameters' },
  RATE_LIMIT_EXCEEDED: { status: 429, message: 'Too many requests' },
  INTERNAL_ERROR: { status: 500, message: 'Internal server error' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed on this resource' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Unsupported content type' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'Service temporarily unavailable' },
} as const

export type ErrorCode = keyof typeof ERRORS
export type ErrorDetails = Record<string, unknown>

export class AppError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details: ErrorDetails = {},
    /** Extra response headers (Retry-After, Allow). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? ERRORS[code].message)
    this.status = ERRORS[code].status
  }
}

export const notFound = (resource: string, id: string) => new AppError('RESOURCE_NOT_FOUND', `${resource} ${id} does not exist`, { resource, id })

export const invalid = (field: string, message: string) => new AppError('VALIDATION_ERROR', `${field}: ${message}`, { errors: [{ field, message }] })

export const forbidden = (message: string, details: ErrorDetails = {}) => new AppError('FORBIDDEN', message, details)

export const unauthorized = (message: string = ERRORS.UNAUTHORIZED.message) => new AppError('UNAUTHORIZED', message)
