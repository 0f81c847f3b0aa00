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
  CONFLICT: { status: 409, message: 'The resource is not in a state that allows this' },
  PRECONDITION_FAILED: { status: 412, message: 'The resource changed since it was read' },
  QUOTA_EXCEEDED: { status: 413, message: 'The plan does not allow more' },
  FEATURE_DISABLED: { status: 403, message: 'This feature is turned off on this deployment' },
  RUN_LIMIT_EXCEEDED: { status: 429, message: 'Too many agent runs in progress' },
  // The model provider (platform/llm.ts): what a tenant's admin can act on, never the provider's raw answer.
  LLM_NOT_CONFIGURED: { status: 409, message: "The tenant's LLM settings are incomplete" },
  LLM_KEY_REJECTED: { status: 502, message: 'The model provider rejected the API key' },
  LLM_MODEL_NOT_FOUND: { status: 502, message: 'The model provider does not know the model' },
  LLM_CONTEXT_TOO_LONG: { status: 400, message: "The conversation is longer than the model's context" },
  LLM_RATE_LIMITED: { status: 429, message: 'The model provider is rate limiting this deployment' },
  LLM_UNREACHABLE: { status: 502, message: 'The model provider could not be reached' },
  LLM_OUTBOUND_REFUSED: { status: 502, message: 'The outbound policy does not allow connecting to the model provider' },
  LLM_PROVIDER_ERROR: { status: 502, message: 'The model provider failed' },
  LLM_TIMEOUT: { status: 504, message: 'The model provider did not answer in time' },
  LLM_RESPONSE_TOO_LARGE: { status: 502, message: "The model's answer is larger than this server takes" },
  // Why an agent run ended failed (run.error.code); never a response status of their own.
  AGENT_STEP_LIMIT: { status: 422, message: 'The run used all of its steps' },
  AGENT_TOKEN_LIMIT: { status: 422, message: 'The run used all of its tokens' },
  AGENT_TIME_LIMIT: { status: 422, message: 'The run ran out of time' },
  AGENT_TOOL_CALL_LIMIT: { status: 422, message: 'A step asked for more tool calls than a step may make' },
  AGENT_MEMORY_LIMIT: { status: 422, message: 'The run holds more data than a run may' },
  RUN_INTERRUPTED: { status: 503, message: 'The run was interrupted and could not be resumed' },
  // Why an export or a restore ended failed (error.code of the job); never a response status of their own.
  JOB_INTERRUPTED: { status: 503, message: 'The work was interrupted and could not be finished' },
  EXPORT_DESTINATION_FAILED: {
    status: 502,
    message: 'The export destination refused the archive or could not be reached',
  },
  EXPORT_TOO_LARGE: {
    status: 413,
    message:
      'The export cannot be written within the limits a restore takes: a record, a list or the archive is too large',
  },
  ARCHIVE_CORRUPT: {
    status: 400,
    message: 'The archive is damaged: not a zip, truncated, or an entry fails its checksum',
  },
  ARCHIVE_UNSAFE_PATH: { status: 400, message: 'An entry of the archive names a path outside the archive' },
  ARCHIVE_SYMLINK: { status: 400, message: 'The archive holds a symbolic link' },
  ARCHIVE_DUPLICATE_ENTRY: { status: 400, message: 'The archive holds two entries of the same name' },
  ARCHIVE_TOO_MANY_ENTRIES: { status: 413, message: 'The archive holds more entries than a restore takes' },
  ARCHIVE_TOO_LARGE: { status: 413, message: 'The archive unpacks to more bytes than a restore takes' },
  ARCHIVE_COMPRESSION_RATIO: {
    status: 400,
    message: 'An entry of the archive expands far beyond its compressed size (a zip bomb)',
  },
  ARCHIVE_VERSION_UNSUPPORTED: {
    status: 400,
    message: 'The archive was written by a newer Atrium, or is neither a tenant export nor a project backup',
  },
  ARCHIVE_UNKNOWN_ENTRY: {
    status: 400,
    message: 'The archive holds an entry its format (a tenant export or a project backup) does not have',
  },
  ARCHIVE_INVALID_DATA: { status: 400, message: 'A record of the archive is not valid' },
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

export const notFound = (resource: string, id: string) =>
  new AppError('RESOURCE_NOT_FOUND', `${resource} ${id} does not exist`, { resource, id })

/** VALIDATION_ERROR naming the field; `more` adds to the details (the rule broken and its limit, say). */
export const invalid = (field: string, message: string, more: ErrorDetails = {}) =>
  new AppError('VALIDATION_ERROR', `${field}: ${message}`, { errors: [{ field, message }], ...more })

export const forbidden = (message: string, details: ErrorDetails = {}) => new AppError('FORBIDDEN', message, details)

export const unauthorized = (message: string = ERRORS.UNAUTHORIZED.message) => new AppError('UNAUTHORIZED', message)
