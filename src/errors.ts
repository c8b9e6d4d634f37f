import type { z } from 'zod'

/** One error the API returns: its status, the body's `error`, and what a client does about it. */
export interface ErrorEntry {
  readonly status: number
  readonly title: string
  readonly meaning: string
}

/**
 * The closed set of errors the API returns, by the `code` of their body. The union of codes, the
 * statuses, the bodies' titles, the OpenAPI document's `ErrorCode` and the table of
 * docs/integrators/errors.md (`npm run docs`) are all read from here. Every error body has the
 * same shape: { error, message, code, details? }.
 */
export const ERROR_CATALOGUE = {
  invalid_query: {
    status: 400,
    title: 'Invalid query parameters',
    meaning:
      'a query parameter is invalid or unknown (`details` lists each issue). Fix the request; never retry it unchanged.',
  },
  bad_request: {
    status: 400,
    title: 'Bad Request',
    meaning: 'the request itself is malformed (Host header, path encoding). Fix the request.',
  },
  missing_api_key: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'no `Authorization: Bearer <key>` header, or one not of that form.',
  },
  invalid_api_key: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'no key matches the one presented. Check the key.',
  },
  expired_api_key: {
    status: 401,
    title: 'Unauthorized',
    meaning:
      'the key was valid and has expired. Create a new key; the `Openbook-Key-Expires` header on earlier answers gave the date.',
  },
  revoked_api_key: {
    status: 401,
    title: 'Unauthorized',
    meaning: "the key was revoked by the organization. Ask the organization's owner or admin for a new key.",
  },
  not_found: { status: 404, title: 'Not Found', meaning: 'no such path.' },
  method_not_allowed: {
    status: 405,
    title: 'Method Not Allowed',
    meaning: 'the API is read-only; only GET and HEAD are answered (`Allow` lists them).',
  },
  payload_too_large: { status: 413, title: 'Payload Too Large', meaning: 'a GET carries no body.' },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported Media Type',
    meaning: 'a request body of a type the server does not read.',
  },
  header_too_large: {
    status: 431,
    title: 'Request Header Fields Too Large',
    meaning: 'the request line and headers exceed 16 KiB.',
  },
  internal_error: {
    status: 500,
    title: 'Internal server error',
    meaning: 'an unexpected failure; retry with backoff and quote the X-Request-Id if it persists.',
  },
  service_unavailable: {
    status: 503,
    title: 'Service Unavailable',
    meaning: 'the data store is briefly unavailable; retry the same request after `Retry-After` seconds.',
  },
  overloaded: {
    status: 503,
    title: 'Service Unavailable',
    meaning:
      'the server has more requests than it can take just now; retry the same request after `Retry-After` seconds, with backoff.',
  },
} as const satisfies Readonly<Record<string, ErrorEntry>>

export type ApiErrorCode = keyof typeof ERROR_CATALOGUE

export interface ErrorBody {
  readonly error: string
  readonly message?: string
  readonly code?: string
  readonly details?: unknown
}

export const statusOf = (code: ApiErrorCode): number => ERROR_CATALOGUE[code].status

/** The codes of one status, in the catalogue's order. */
export const codesOf = (status: number): ApiErrorCode[] =>
  (Object.keys(ERROR_CATALOGUE) as ApiErrorCode[]).filter((code) => statusOf(code) === status)

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
    const body = { error: ERROR_CATALOGUE[this.code].title, message: this.message, code: this.code }
    return this.details === undefined ? body : { ...body, details: this.details }
  }
}

/** The API reads no request body; a GET may carry at most this many bytes, which are ignored. */
export const BODY_LIMIT = 1024
export const PAYLOAD_TOO_LARGE_MESSAGE = `A GET request carries no body (at most ${BODY_LIMIT} bytes, ignored)`

export const MISSING_KEY_MESSAGE = 'API key required in Authorization header'
export const INVALID_KEY_MESSAGE = 'Invalid or expired API key'
/** The 503 message for PostgreSQL's passing conditions (a lock, a restart, no free connection). */
export const STORE_BUSY_MESSAGE = 'The data store is busy or restarting; retry after the Retry-After delay'
/** The 503 message for a database that refuses new sessions until its operator acts (its disk is full). */
export const STORE_UNAVAILABLE_MESSAGE =
  'The data store cannot take requests just now; retry after the Retry-After delay'
/** The 503 message of a request that found no free connection to the data store in time (overload). */
export const OVERLOADED_MESSAGE =
  'The server has more requests than it can take just now; retry after the Retry-After delay'
/** Retry-After for overload: a little longer than for a restart, as every client retrying at once adds to it. */
export const OVERLOADED_RETRY_SECONDS = 2
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
/** The methods every path of the API answers: GET, and HEAD. */
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

export const overloaded = () =>
  new ApiError('overloaded', OVERLOADED_MESSAGE, undefined, {
    'retry-after': String(OVERLOADED_RETRY_SECONDS),
  })

/**
 * A temporary refusal: the client may retry the same request after `retryAfterSeconds` (a whole
 * number of seconds, at least 1, as `Retry-After` carries it). The message is sent as it is.
 */
export const serviceUnavailable = (message: string, retryAfterSeconds: number) => {
  const seconds = Number.isFinite(retryAfterSeconds) ? Math.max(1, Math.ceil(retryAfterSeconds)) : 1
  return new ApiError('service_unavailable', message, undefined, { 'retry-after': String(seconds) })
}
