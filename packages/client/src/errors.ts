/**
 * Every error the client throws is an `OpenbookError`. Each carries the HTTP `status` (when an
 * answer came), the body's `error`, `message` and `code`, and the `requestId` the server sent in
 * X-Request-Id, to quote to support. None ever holds the API key.
 */
export class OpenbookError extends Error {
  override readonly name: string = 'OpenbookError'
  /** The HTTP status, or undefined when no answer came (time-out, network, refused locally). */
  readonly status: number | undefined
  /** The error body's `error` (e.g. `Unauthorized`), or a short title of the failure. */
  readonly error: string
  /** The error body's `code` (e.g. `invalid_api_key`), or the client's own (`timeout`, `network_error`). */
  readonly code: string | undefined
  /** The server's X-Request-Id for this answer. */
  readonly requestId: string | undefined
  /** Whether the client retries this failure (it did, as far as its budget allowed). */
  readonly retryable: boolean

  constructor(init: {
    status?: number | undefined
    error: string
    message: string
    code?: string | undefined
    requestId?: string | undefined
    retryable?: boolean
    cause?: unknown
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.status = init.status
    this.error = init.error
    this.code = init.code
    this.requestId = init.requestId
    this.retryable = init.retryable ?? false
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      status: this.status,
      error: this.error,
      message: this.message,
      code: this.code,
      requestId: this.requestId,
    }
  }
}

/** One validation issue of a 400, as the server reports it. */
export interface ValidationIssue {
  readonly code: string
  readonly path: readonly (string | number)[]
  readonly message: string
  readonly [field: string]: unknown
}

/**
 * The client was called wrong, before any request: an option it does not accept (a malformed key,
 * a base URL that is not http or https, a page size out of range, an unknown parameter). A
 * rerun of the same call fails the same way; never retried. (A `TypeError` or `RangeError`
 * before 1.1.)
 */
export class UsageError extends OpenbookError {
  override readonly name: string = 'UsageError'
  constructor(message: string, code = 'invalid_usage') {
    super({ error: 'Usage error', message, code, retryable: false })
  }
}

/** 400 Invalid query parameters; `details` lists the issues. Never retried. */
export class BadRequestError extends OpenbookError {
  override readonly name: string = 'BadRequestError'
  readonly details: readonly ValidationIssue[]
  constructor(init: ConstructorParameters<typeof OpenbookError>[0] & { details?: unknown }) {
    super({ ...init, retryable: false })
    this.details = Array.isArray(init.details) ? (init.details as ValidationIssue[]) : []
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), details: this.details }
  }
}

/**
 * A parameter the server would refuse, refused before any request: `message` and `details` are
 * the words the server would have answered with, `status` the 400 it would have sent. `requestId`
 * is undefined, since no request was made.
 */
export class InvalidParametersError extends BadRequestError {
  override readonly name: string = 'InvalidParametersError'
}

/**
 * 401: the key is missing, malformed, unknown, revoked or expired. Never retried. `code` says
 * which: `missing_api_key`, `invalid_api_key` (no such key), or the two subclasses below.
 */
export class AuthenticationError extends OpenbookError {
  override readonly name: string = 'AuthenticationError'
}

/** 401 `expired_api_key`: the key was valid and has expired; create a new one (rotate). */
export class KeyExpiredError extends AuthenticationError {
  override readonly name: string = 'KeyExpiredError'
}

/** 401 `revoked_api_key`: the key was revoked by the organization; ask its owner why. */
export class KeyRevokedError extends AuthenticationError {
  override readonly name: string = 'KeyRevokedError'
}

/** Any other HTTP error answer below 500 (404, 405, 429, …). Only 429 is retried. */
export class ApiError extends OpenbookError {
  override readonly name: string = 'ApiError'
}

/** 5xx: the server failed; retried with backoff until the budget is spent. */
export class ServerError extends OpenbookError {
  override readonly name: string = 'ServerError'
  /** Seconds from Retry-After, when the server sent it (503). */
  readonly retryAfterSeconds: number | undefined
  constructor(
    init: ConstructorParameters<typeof OpenbookError>[0] & { retryAfterSeconds?: number | undefined },
  ) {
    super({ ...init, retryable: true })
    this.retryAfterSeconds = init.retryAfterSeconds
  }
}

/** No complete answer within `timeoutMs`; retried. */
export class TimeoutError extends OpenbookError {
  override readonly name: string = 'TimeoutError'
}

/** The connection failed (refused, reset, DNS, TLS, a body cut short); retried. */
export class NetworkError extends OpenbookError {
  override readonly name: string = 'NetworkError'
}

/** Auto-pagination could not find where it left off within its bound of re-reads. */
export class PaginationError extends OpenbookError {
  override readonly name: string = 'PaginationError'
}
