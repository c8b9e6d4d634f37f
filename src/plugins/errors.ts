import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import {
  ApiError,
  type ApiErrorCode,
  internalError,
  methodNotAllowed,
  overloaded,
  STORE_BUSY_MESSAGE,
  STORE_UNAVAILABLE_MESSAGE,
  STORE_UNAVAILABLE_RETRY_SECONDS,
  serviceUnavailable,
} from '../errors.js'
import { PoolExhaustedError, StoreBusyError } from '../store/busy.js'
import { isDiskFull } from '../store/open-failure.js'
import { isStoreUnreachable } from '../store/postgres/postgres.js'

/** Renders an error in the API's shape. Never cached: an error says nothing lasting about the resource. */
export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply
    .code(error.statusCode)
    .headers(error.headers)
    .header('content-type', 'application/json; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(error.toBody())
}

/** Fastify's own client errors (body, content type) in the API's error shape. */
function fromFramework(error: FastifyError): ApiError | undefined {
  const status = error.statusCode ?? 500
  if (status >= 500) return undefined
  const code: ApiErrorCode =
    status === 413 ? 'payload_too_large' : status === 415 ? 'unsupported_media_type' : 'bad_request'
  return new ApiError(code, code === 'bad_request' ? 'The request could not be understood' : error.message)
}

/**
 * PostgreSQL's conditions that pass by themselves: lock_not_available, admin_shutdown,
 * cannot_connect_now, too_many_connections. The same request may succeed a moment later.
 */
const TRANSIENT_SQLSTATES = new Set(['55P03', '57P01', '57P03', '53300'])
/**
 * The database (or its pooler) could not be reached for a moment, after the store's own retries
 * until the request deadline (isStoreUnreachable: refused, lost, timed out); or it refused our
 * connection: invalid_authorization_specification (a role without LOGIN, or pg_hba.conf),
 * invalid_password. For the client alike: the store cannot serve, not its request.
 */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', '28000', '28P01'])

/** A 503 for a store that cannot serve just now; undefined for any other error. */
function fromBusyStore(error: FastifyError): ApiError | undefined {
  if (error instanceof StoreBusyError) return serviceUnavailable(error.message, error.retryAfterSeconds)
  if (isDiskFull(error)) return serviceUnavailable(STORE_UNAVAILABLE_MESSAGE, STORE_UNAVAILABLE_RETRY_SECONDS)
  const { code } = error as { code?: unknown }
  if (
    (typeof code === 'string' && (TRANSIENT_SQLSTATES.has(code) || UNREACHABLE.has(code))) ||
    isStoreUnreachable(error)
  )
    return serviceUnavailable(STORE_BUSY_MESSAGE, 1)
  return undefined
}

/** The path alone, bounded: a query string may carry personal data. */
function pathOf(url: string): string {
  const path = url.split('?')[0] ?? ''
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}

/** The path as the router matches it: percent-decoded, except for reserved characters. */
function routedPath(url: string): string {
  const path = url.split('?')[0] ?? ''
  try {
    return decodeURI(path)
  } catch {
    return path
  }
}

/**
 * Only GET (and HEAD) are routed; refuseOtherMethods adds 405 routes for the common write
 * methods. Any other method Node parses (TRACE, QUERY, PROPFIND, M-SEARCH, CONNECT...) meets no
 * route: on a path that has a GET route it is a 405, not a 404.
 */
function isOtherMethodOnKnownPath(request: FastifyRequest): boolean {
  return (
    request.method !== 'GET' &&
    request.method !== 'HEAD' &&
    request.server.hasRoute({ method: 'GET', url: routedPath(request.url) })
  )
}

/** The one place where errors become responses: same shape everywhere, nothing internal in a 5xx. */
export default fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof ApiError) return sendError(reply, error)
      if (error instanceof PoolExhaustedError) {
        // The database answers; this instance has more requests than connections (runbooks.md).
        request.log.warn({ err: error }, 'overloaded: no free database connection')
        return sendError(reply, overloaded())
      }
      const busy = fromBusyStore(error)
      if (busy) {
        // Not the client's fault and likely to pass; the operator still learns what happened.
        request.log.warn({ err: error }, 'store busy')
        return sendError(reply, busy)
      }
      const known = fromFramework(error)
      if (known) return sendError(reply, known)
      request.log.error({ err: error }, 'request failed')
      return sendError(reply, internalError(request.id))
    })

    // In onRequest, so that the 405 comes before any body is read (Fastify parses one for QUERY).
    app.addHook('onRequest', (request, _reply, done) => {
      done(request.is404 && isOtherMethodOnKnownPath(request) ? methodNotAllowed(request.method) : undefined)
    })

    app.setNotFoundHandler((request, reply) =>
      sendError(reply, new ApiError('not_found', `No route for ${request.method} ${pathOf(request.url)}`)),
    )
  },
  { name: 'errors' },
)
