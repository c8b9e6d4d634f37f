import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance, LogController } from 'fastify'
import type { Config } from './config.js'
import type { LastUsedOptions } from './domain/last-used.js'
import { ApiError } from './errors.js'
import errors from './plugins/errors.js'
import openapi from './plugins/openapi.js'
import requestLog from './plugins/request-log.js'
import storePlugin from './plugins/store.js'
import type { TenantFilterOptions } from './queries/page.js'
import publicV1, { LIST_ROUTES, PUBLIC_V1_PREFIX } from './routes/public/v1/index.js'
import { refuseOtherMethods } from './routes/public/v1/list-route.js'
import type { Store } from './store/types.js'

export interface AppOptions {
  readonly store: Store
  readonly config: Pick<Config, 'apiKeyBrand' | 'logLevel'>
  readonly lastUsed?: LastUsedOptions
  /** Test-only: see TenantFilterOptions. */
  readonly tenantFilter?: TenantFilterOptions
  /** A pino destination stream (tests capture log lines with it). */
  readonly logStream?: NodeJS.WritableStream
  /** Test-only: shorter HTTP deadlines, so that a slow-client test stays short. */
  readonly httpTimeouts?: HttpTimeouts
}

export interface HttpTimeouts {
  /** The request line and headers must arrive within this many milliseconds. */
  readonly headersMs: number
  /** The whole request must arrive within this many milliseconds. */
  readonly requestMs: number
  /** How often Node checks both deadlines: a slow client is cut at most this much after its deadline. */
  readonly checkEveryMs: number
}

/** Production deadlines: a client that dribbles its headers is cut within 6 s. */
export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = {
  headersMs: 5_000,
  requestMs: 10_000,
  checkEveryMs: 1_000,
}

/** The API reads no request body; a GET may carry at most this many bytes, which are ignored. */
export const BODY_LIMIT = 1024

export const DEFAULT_LAST_USED: LastUsedOptions = { resolutionMs: 60_000, flushEveryMs: 5_000 }

const HEADER_TOO_LARGE = JSON.stringify(
  new ApiError('header_too_large', 'Request line and headers must stay under 16 KiB').toBody(),
)
const BAD_REQUEST = JSON.stringify(new ApiError('bad_request', 'Malformed HTTP request').toBody())
const TOO_SLOW = JSON.stringify(new ApiError('bad_request', 'Request not received in time').toBody())

/** A raw response for errors Node's HTTP parser raises before Fastify sees a request. */
function clientErrorResponse(code: string | undefined): string {
  const [status, body] =
    code === 'HPE_HEADER_OVERFLOW'
      ? ['431 Request Header Fields Too Large', HEADER_TOO_LARGE]
      : code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['400 Bad Request', TOO_SLOW]
        : ['400 Bad Request', BAD_REQUEST]
  return (
    `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/** Builds the HTTP application: plugins in a fixed order, then routes, then the error handler. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const timeouts = options.httpTimeouts ?? DEFAULT_HTTP_TIMEOUTS
  const app = Fastify({
    logger: {
      level: options.config.logLevel,
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    // request-log writes the one line per request; Fastify's own lines would carry the URL.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => `req-${randomUUID()}`,
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    // Slow clients cannot hold a connection: headers within 5 s, the whole request within 10 s,
    // both checked every second (Node's default check runs every 30 s); idle keep-alive 5 s.
    http: { connectionsCheckingInterval: timeouts.checkEveryMs },
    requestTimeout: timeouts.requestMs,
    connectionTimeout: 15_000,
    keepAliveTimeout: 5_000,
    maxRequestsPerSocket: 10_000,
    // During a drain, a request that arrives on an open keep-alive connection is still answered
    // (a 503 is not in the contract); new connections are refused by the closed listener.
    return503OnClosing: false,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: false },
    clientErrorHandler: (error, socket) => {
      // Once a request's headers were parsed it belongs to the app, which may have answered it
      // already (a body still dribbling in when the deadline passes): then just close, never a
      // second, unsolicited response.
      const { parser, _httpMessage } = socket as { parser?: { incoming?: unknown }; _httpMessage?: unknown }
      if (socket.writable && !parser?.incoming && !_httpMessage) {
        socket.end(clientErrorResponse((error as NodeJS.ErrnoException).code))
      } else {
        socket.destroy(error)
      }
    },
  })
  app.server.headersTimeout = timeouts.headersMs

  // No route reads a body. A GET may carry a small one (ignored); a larger or chunked one is
  // refused before it is read, and the connection is closed rather than drained.
  app.addHook('onRequest', async (request, reply) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return
    const length = request.headers['content-length']
    if (request.headers['transfer-encoding'] !== undefined || Number(length ?? 0) > BODY_LIMIT) {
      reply.header('connection', 'close')
      throw new ApiError(
        'payload_too_large',
        `A GET request carries no body (at most ${BODY_LIMIT} bytes, ignored)`,
      )
    }
  })

  await app.register(storePlugin, { store: options.store })
  await app.register(requestLog)
  await app.register(errors)
  await app.register(openapi)
  await app.register(publicV1, {
    prefix: PUBLIC_V1_PREFIX,
    apiKeyBrand: options.config.apiKeyBrand,
    lastUsed: options.lastUsed ?? DEFAULT_LAST_USED,
    ...(options.tenantFilter ? { tenantFilter: options.tenantFilter } : {}),
  })
  for (const route of LIST_ROUTES) refuseOtherMethods(app, PUBLIC_V1_PREFIX + route.path)
  return app
}
