import type { z } from 'zod'

/**
 * The closed set of errors the API returns. Every error body has the same
 * shape: { error, message, code, details? }.
 */
export type ApiErrorCode =
  | 'invalid_query'
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'expired_api_key'
  | 'revoked_api_key'
  | 'not_found'
  | 'method_not_allowed'
  | 'bad_request'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'header_too_large'
  | 'internal_error'
  | 'service_unavailable'

export interface ErrorBody {
  readonly error: string
  readonly message?: string
  readonly code?: string
  readonly details?: unknown
}

export function statusOf(code: ApiErrorCode): number {
  switch (code) {
    case 'invalid_query':
    case 'bad_request':
      return 400
    case 'missing_api_key':
    case 'invalid_api_key':
    case 'expired_api_key':
    case 'revoked_api_key':
      return 401
    case 'not_found':
      return 404
    case 'method_not_allowed':
      return 405
    case 'payload_too_large':
      return 413
    case 'unsupported_media_type':
      return 415
    case 'header_too_large':
      return 431
    case 'internal_error':
      return 500
    case 'service_unavailable':
      return 503
  }
}

function titleOf(code: ApiErrorCode): string {
  switch (code) {
    case 'invalid_query':
      return 'Invalid query parameters'
    case 'missing_api_key':
    case 'invalid_api_key':
    case 'expired_api_key':
    case 'revoked_api_key':
      return 'Unauthorized'
    case 'not_found':
      return 'Not Found'
    case 'method_not_allowed':
      return 'Method Not Allowed'
    case 'bad_request':
      return 'Bad Request'
    case 'payload_too_large':
      return 'Payload Too Large'
    case 'unsupported_media_type':
      return 'Unsupported Media Type'
    case 'header_too_large':
      return 'Request Header Fields Too Large'
    case 'internal_error':
      return 'Internal server error'
    case 'service_unavailable':
      return 'Service Unavailable'
  }
}

export class ApiError extends Error {
  readonly code: ApiErrorCode
  readonly details: unknown
  /** Extra response headers, such as `Allow` or `WWW-Authenticate`. */
  readonly headers: Readonly<Record<string, string>>

  constructor(code: ApiErrorCode, message: string, details?: unknown, headers: Record<string, string> = {}) {
    super(message)
    this.code = code
    this.details = details
    this.headers = headers
  }

  get statusCode(): number {
    return statusOf(this.code)
  }

  toBody(): ErrorBody {
    const body = { error: titleOf(this.code), message: this.message, code: this.code }
    return this.details === undefined ? body : { ...body, details: this.details }
  }
}

export const MISSING_KEY_MESSAGE = 'API key required in Authorization header'
export const INVALID_KEY_MESSAGE = 'Invalid or expired API key'
/** The 503 message for PostgreSQL's passing conditions (a lock, a restart, no free connection). */
export const STORE_BUSY_MESSAGE = 'The data store is busy or restarting; retry after the Retry-After delay'
/** The 503 message for a database that refuses new sessions until its operator acts (its disk is full). */
export const STORE_UNAVAILABLE_MESSAGE =
  'The data store cannot take requests just now; retry after the Retry-After delay'
/** Retry-After for a database that is out of disk: freeing space takes an operator, not a second. */
export const STORE_UNAVAILABLE_RETRY_SECONDS = 10

export const missingApiKey = () =>
  new ApiError('missing_api_key', MISSING_KEY_MESSAGE, undefined, {
    'www-authenticate': 'Bearer realm="openbook"',
  })
/**
 * A key of the right format that does not work: `invalid_api_key` for one no key matches,
 * `expired_api_key` or `revoked_api_key` for a key that matched and is no longer active. The
 * message is the contract's for all three; the code tells an integrator whether to rotate (expired)
 * or to ask why (revoked), and is told only to whoever holds that key's full secret.
 */
export const invalidApiKey = (
  code: 'invalid_api_key' | 'expired_api_key' | 'revoked_api_key' = 'invalid_api_key',
) =>
  new ApiError(code, INVALID_KEY_MESSAGE, undefined, {
    'www-authenticate': 'Bearer realm="openbook", error="invalid_token"',
  })

/**
 * The response header that gives an expiring key's expiry (an HTTP-date, as `Expires` and RFC 8594's
 * `Sunset` carry theirs) on every response to a request the key was accepted for.
 */
export const KEY_EXPIRES_HEADER = 'openbook-key-expires'
/** The methods every path of the API answers: GET, and HEAD (Fastify serves it from each GET route). */
export const ALLOWED_METHODS = 'GET, HEAD'

export const methodNotAllowed = (method: string) =>
  new ApiError('method_not_allowed', `Method ${method} is not allowed; this API is read-only`, undefined, {
    allow: ALLOWED_METHODS,
  })

/** A query that does not parse: every issue, `path: message`, joined; the issues as details. */
export function invalidQuery(error: z.ZodError): ApiError {
  const message = error.issues
    .map((issue) => `${issue.path.join('.') || 'query'}: ${issue.message}`)
    .join('; ')
  return new ApiError('invalid_query', message, error.issues)
}

export const internalError = (requestId: string) =>
  new ApiError('internal_error', `Internal server error (request id ${requestId})`)

/**
 * A temporary refusal: the client may retry the same request after `retryAfterSeconds` (a whole
 * number of seconds, at least 1, as `Retry-After` carries it). The message is sent as it is.
 */
export const serviceUnavailable = (message: string, retryAfterSeconds: number) => {
  const seconds = Number.isFinite(retryAfterSeconds) ? Math.max(1, Math.ceil(retryAfterSeconds)) : 1
  return new ApiError('service_unavailable', message, undefined, { 'retry-after': String(seconds) })
}
