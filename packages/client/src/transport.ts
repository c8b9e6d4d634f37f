import {
  ApiError,
  AuthenticationError,
  BadRequestError,
  KeyExpiredError,
  KeyRevokedError,
  NetworkError,
  type OpenbookError,
  ServerError,
  TimeoutError,
} from './errors.js'

/** When and how often a failed request is tried again. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 4); 1 means no retry. */
  readonly maxAttempts?: number
  /** The first backoff's ceiling (default 250 ms); each retry doubles it. */
  readonly baseDelayMs?: number
  /** The largest backoff ceiling (default 8 s). */
  readonly maxDelayMs?: number
  /** No retry starts later than this after the first attempt (default 60 s). */
  readonly maxElapsedMs?: number
}

/**
 * Retries for batch work (a nightly job) rather than interactive calls: no limit on the number of
 * attempts, each request retried for up to 5 minutes (a server restart, a fail-over), with backoff
 * of up to 5 s between attempts. openbook-sync uses these. `retry: BATCH_RETRY`.
 */
export const BATCH_RETRY = {
  maxAttempts: Number.POSITIVE_INFINITY,
  baseDelayMs: 250,
  maxDelayMs: 5_000,
  maxElapsedMs: 300_000,
} as const satisfies Required<RetryOptions>

/** What the client reports about its requests: never the key, never a payload. */
export type ClientEvent =
  | { readonly type: 'request'; readonly url: string; readonly attempt: number }
  | {
      readonly type: 'response'
      readonly url: string
      readonly attempt: number
      readonly status: number
      readonly requestId: string | undefined
      /** The key's expiry (Openbook-Key-Expires), when it has one. */
      readonly keyExpiresAt: Date | undefined
      readonly ms: number
    }
  | {
      readonly type: 'retry'
      readonly url: string
      readonly attempt: number
      readonly delayMs: number
      readonly reason: string
      readonly requestId: string | undefined
    }

export interface PerRequestOptions {
  /** Cancels the request, and any retry, with the signal's reason. */
  readonly signal?: AbortSignal | undefined
  /** Overrides the client's time-out for this request. */
  readonly timeoutMs?: number | undefined
}

/** A list request that may be answered 304: `ifNoneMatch` holds the ETag(s) of the page the caller has. */
export interface ConditionalOptions extends PerRequestOptions {
  readonly ifNoneMatch: string
}

export interface TransportOptions {
  readonly apiKey: string
  readonly baseUrl: string
  readonly timeoutMs: number
  readonly retry: Required<RetryOptions>
  readonly fetch: typeof fetch
  readonly userAgent: string
  readonly onEvent: ((event: ClientEvent) => void) | undefined
  readonly random: () => number
}

export interface JsonAnswer {
  readonly body: unknown
  /** 2xx, or 304 for a conditional request whose page has not changed (then no body). */
  readonly status: number
  readonly requestId: string | undefined
  /** The page's validator (ETag), when the server sent one. */
  readonly etag: string | undefined
  /** The key's expiry, from Openbook-Key-Expires; undefined for a key that does not expire. */
  readonly keyExpiresAt: Date | undefined
  /** The key's organization, from Openbook-Organization (undefined from a server that sends none). */
  readonly organizationId: string | undefined
}

/** The server's Openbook-Key-Expires (an HTTP-date) as a Date; undefined when absent or unreadable. */
export function keyExpiry(header: string | null): Date | undefined {
  if (header === null) return undefined
  const time = Date.parse(header)
  return Number.isNaN(time) ? undefined : new Date(time)
}

/** What the client asks the server to compress with (it answers br, or gzip, or neither). */
export const ACCEPT_ENCODING = 'br, gzip'

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })

function errorBody(body: unknown): { error?: string; message?: string; code?: string; details?: unknown } {
  return typeof body === 'object' && body !== null ? (body as Record<string, never>) : {}
}

/** The error for an HTTP answer that is not 2xx. */
export function httpError(
  status: number,
  body: unknown,
  requestId: string | undefined,
  retryAfter: string | null,
  redact: (text: string) => string = (text) => text,
) {
  const fields = errorBody(body)
  const error = typeof fields.error === 'string' ? redact(fields.error) : `HTTP ${status}`
  const init = {
    status,
    error,
    message: typeof fields.message === 'string' ? redact(fields.message) : error,
    code: typeof fields.code === 'string' ? fields.code : undefined,
    requestId,
  }
  if (status === 400) return new BadRequestError({ ...init, details: fields.details })
  if (status === 401)
    return init.code === 'expired_api_key'
      ? new KeyExpiredError(init)
      : init.code === 'revoked_api_key'
        ? new KeyRevokedError(init)
        : new AuthenticationError(init)
  if (status >= 500) {
    const seconds = retryAfter !== null && /^\d{1,6}$/.test(retryAfter) ? Number(retryAfter) : undefined
    return new ServerError({ ...init, retryAfterSeconds: seconds })
  }
  return new ApiError({ ...init, retryable: status === 429 })
}

/**
 * One GET, with a time-out per attempt and retries of the failures that may pass (5xx, 429,
 * time-outs, connection errors) with full-jitter exponential backoff, within a number of
 * attempts and a total time. The key lives in a private field and only ever goes into the
 * Authorization header.
 */
export class Transport {
  readonly #apiKey: string
  readonly #options: Omit<TransportOptions, 'apiKey'>

  constructor(options: TransportOptions) {
    const { apiKey, ...rest } = options
    this.#apiKey = apiKey
    this.#options = rest
  }

  /** Whatever text comes from below (the network stack, a proxy's body) loses any copy of the key. */
  readonly #redact = (text: string): string => text.split(this.#apiKey).join('[redacted]')

  get baseUrl(): string {
    return this.#options.baseUrl
  }

  /** The URL of a path under the API, with the query's defined values. */
  url(path: string, query: Record<string, string | undefined>): URL {
    const url = new URL(path, this.#options.baseUrl)
    for (const [name, value] of Object.entries(query))
      if (value !== undefined) url.searchParams.set(name, value)
    return url
  }

  async getJson(
    url: URL,
    options: PerRequestOptions & { readonly ifNoneMatch?: string } = {},
  ): Promise<JsonAnswer> {
    const { retry, onEvent } = this.#options
    const started = Date.now()
    const href = url.href
    for (let attempt = 1; ; attempt++) {
      let failure: OpenbookError
      try {
        onEvent?.({ type: 'request', url: href, attempt })
        const answer = await this.#attempt(url, options)
        const { status, requestId, keyExpiresAt } = answer
        // The answer's fields, never its body (nor its ETag).
        onEvent?.({
          type: 'response',
          url: href,
          attempt,
          status,
          requestId,
          keyExpiresAt,
          ms: Date.now() - started,
        })
        if ((answer.status >= 200 && answer.status < 300) || answer.status === 304) return answer
        failure = httpError(answer.status, answer.body, answer.requestId, answer.retryAfter, this.#redact)
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason
        failure = error as OpenbookError
      }
      if (!failure.retryable || attempt >= retry.maxAttempts) throw failure
      const ceiling = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1))
      let delayMs = Math.round(this.#options.random() * ceiling)
      const retryAfter = failure instanceof ServerError ? failure.retryAfterSeconds : undefined
      if (retryAfter !== undefined) delayMs = Math.max(delayMs, retryAfter * 1000)
      if (Date.now() - started + delayMs > retry.maxElapsedMs) throw failure
      onEvent?.({
        type: 'retry',
        url: href,
        attempt,
        delayMs,
        reason: failure.code ?? failure.error,
        requestId: failure.requestId,
      })
      await sleep(delayMs, options.signal)
    }
  }

  async #attempt(
    url: URL,
    options: PerRequestOptions & { readonly ifNoneMatch?: string },
  ): Promise<JsonAnswer & { retryAfter: string | null; status: number }> {
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs
    const controller = new AbortController()
    const timedOut = new Error('time-out')
    const timer = setTimeout(() => controller.abort(timedOut), timeoutMs)
    const onAbort = () => controller.abort(options.signal?.reason)
    options.signal?.addEventListener('abort', onAbort, { once: true })
    if (options.signal?.aborted) controller.abort(options.signal.reason)
    try {
      const response = await this.#options.fetch(url, {
        method: 'GET',
        headers: {
          accept: 'application/json',
          // A page of JSON travels in about a fifth of its bytes; fetch decodes the answer.
          'accept-encoding': ACCEPT_ENCODING,
          authorization: `Bearer ${this.#apiKey}`,
          'user-agent': this.#options.userAgent,
          ...(options.ifNoneMatch === undefined ? {} : { 'if-none-match': options.ifNoneMatch }),
        },
        signal: controller.signal,
        redirect: 'error',
      })
      const requestId = response.headers.get('x-request-id') ?? undefined
      const etag = response.headers.get('etag') ?? undefined
      const text = await response.text()
      if (response.status === 304 && options.ifNoneMatch !== undefined)
        return {
          body: undefined,
          status: 304,
          requestId,
          etag,
          retryAfter: null,
          keyExpiresAt: keyExpiry(response.headers.get('openbook-key-expires')),
          organizationId: response.headers.get('openbook-organization') ?? undefined,
        }
      let body: unknown
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = undefined
      }
      if (response.ok && (typeof body !== 'object' || body === null))
        throw new NetworkError({
          error: 'Invalid response',
          message: `expected a JSON body from ${url.pathname}, got ${text.length} bytes that are not JSON`,
          code: 'invalid_response',
          requestId,
          retryable: true,
        })
      return {
        body,
        status: response.status,
        requestId,
        etag,
        retryAfter: response.headers.get('retry-after'),
        keyExpiresAt: keyExpiry(response.headers.get('openbook-key-expires')),
        organizationId: response.headers.get('openbook-organization') ?? undefined,
      }
    } catch (error) {
      if (error instanceof NetworkError) throw error
      if (options.signal?.aborted) throw options.signal.reason
      if (controller.signal.aborted && controller.signal.reason === timedOut)
        throw new TimeoutError({
          error: 'Timeout',
          message: `no complete answer from ${url.origin}${url.pathname} within ${timeoutMs} ms`,
          code: 'timeout',
          retryable: true,
        })
      throw new NetworkError({
        error: 'Network error',
        message: `request to ${url.origin}${url.pathname} failed: ${this.#redact(describe(error))}`,
        code: 'network_error',
        retryable: true,
      })
    } finally {
      clearTimeout(timer)
      options.signal?.removeEventListener('abort', onAbort)
    }
  }
}

/** The connection failure's own words (undici puts them in `cause`), without the request. */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause
  const code = typeof cause?.code === 'string' ? cause.code : undefined
  const message = typeof cause?.message === 'string' ? cause.message : (error as Error)?.message
  return [code, message].filter(Boolean).join(' ') || 'unknown error'
}
