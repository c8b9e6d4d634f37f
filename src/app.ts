import { type IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  LogController,
} from 'fastify'
import type { pino } from 'pino'
import type { Config } from './config.js'
import type { LastUsedOptions } from './domain/last-used.js'
import { ApiError, BODY_LIMIT, PAYLOAD_TOO_LARGE_MESSAGE } from './errors.js'
import { loggable } from './loggable-error.js'
import openapi from './openapi/route.js'
import { type Metrics, metricsPlugin } from './ops/metrics.js'
import { registerCompression } from './plugins/compression.js'
import errors, { sendError } from './plugins/errors.js'
import requestLog, { identifyingHeaders, logRequest } from './plugins/request-log.js'
import storePlugin from './plugins/store.js'
import { newRequestId, requestIdOf } from './request-id.js'
import publicV1, { LIST_ROUTES, PUBLIC_V1_PREFIX } from './routes/public/v1/index.js'
import { refuseOtherMethods } from './routes/refuse-other-methods.js'
import type { Store } from './store/types.js'

export interface AppOptions {
  readonly store: Store
  readonly config: Pick<Config, 'apiKeyBrand' | 'logLevel'>
  readonly lastUsed?: LastUsedOptions
  /** Where the log lines go (the server's stream, src/log-destination.ts; a test's capture); else stdout. */
  readonly logStream?: pino.DestinationStream
  /** Request counts, latencies and store failures, served on the ops port (src/ops/). */
  readonly metrics?: Metrics
}

/**
 * HTTP deadlines: the request line and headers within `headersMs`, the whole request within
 * `requestMs`, both checked every `checkEveryMs` (a slow client is cut at most that much after
 * its deadline, so one that dribbles its headers is cut within 6 s).
 */
const HTTP_DEADLINES = { headersMs: 5_000, requestMs: 10_000, checkEveryMs: 1_000 }

export const DEFAULT_LAST_USED: LastUsedOptions = { resolutionMs: 60_000, flushEveryMs: 5_000 }

const HEADER_TOO_LARGE = JSON.stringify(
  new ApiError('header_too_large', 'Request line and headers must stay under 16 KiB').toBody(),
)
const BAD_REQUEST = JSON.stringify(new ApiError('bad_request', 'Malformed HTTP request').toBody())
const TOO_SLOW = JSON.stringify(new ApiError('bad_request', 'Request not received in time').toBody())

/**
 * A raw response for errors Node's HTTP parser raises before Fastify sees a request, with the
 * headers every response carries; `log` writes the request line under the same request id.
 */
function clientErrorResponse(code: string | undefined, log: FastifyBaseLogger): string {
  const [status, reason, body] =
    code === 'HPE_HEADER_OVERFLOW'
      ? ([431, 'Request Header Fields Too Large', HEADER_TOO_LARGE] as const)
      : code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ([400, 'Bad Request', TOO_SLOW] as const)
        : ([400, 'Bad Request', BAD_REQUEST] as const)
  const id = newRequestId()
  logRequest(log.child({ reqId: id }), { method: '(unparsed)', route: '(no route)', status })
  const headers = Object.entries({
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    'Cache-Control': 'no-store',
    ...identifyingHeaders(id),
    Connection: 'close',
  })
  return `HTTP/1.1 ${status} ${reason}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`
}

/** RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host header, and no request carries two. */
const HOST_REQUIRED = 'An HTTP/1.1 request must carry exactly one Host header'

function hasValidHost(request: IncomingMessage): boolean {
  let count = 0
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i]?.toLowerCase() === 'host') count++
  }
  if (count > 1) return false
  const required =
    request.httpVersionMajor > 1 || (request.httpVersionMajor === 1 && request.httpVersionMinor >= 1)
  // An empty Host names no host either: RFC 9110 4.2.1, an http URI has a non-empty host.
  return count === 0 ? !required : Boolean(request.headers.host)
}

/**
 * Node hands a CONNECT request to a 'connect' listener, and without one closes the connection
 * unanswered: route it like any other method (405 on an API path, else 404), then close.
 */
function routeConnectRequests(app: FastifyInstance): void {
  app.server.on('connect', (request: IncomingMessage, duplex: Duplex) => {
    const socket = duplex as Socket
    socket.on('error', () => socket.destroy())
    // The server's whole-request deadline, read when the request comes.
    socket.setTimeout(app.server.requestTimeout, () => socket.destroy())
    const response = new ServerResponse(request)
    response.shouldKeepAlive = false
    response.assignSocket(socket)
    response.once('finish', () => {
      response.detachSocket(socket)
      socket.end()
    })
    app.routing(request, response)
  })
}

/**
 * What comes before the body limit and the key: one Host header, then no body on a GET beyond a
 * small one (ignored). A larger or chunked body is refused before it is read. Either refusal
 * closes the connection, as Node does, rather than drain what the client still sends.
 */
function badHostOrBody(request: FastifyRequest): ApiError | undefined {
  if (!hasValidHost(request.raw)) return new ApiError('bad_request', HOST_REQUIRED)
  if (request.method !== 'GET' && request.method !== 'HEAD') return undefined
  const length = request.headers['content-length']
  if (request.headers['transfer-encoding'] !== undefined || Number(length ?? 0) > BODY_LIMIT) {
    return new ApiError('payload_too_large', PAYLOAD_TOO_LARGE_MESSAGE)
  }
  return undefined
}

/** The onRequest checks that come before the body limit and the key (a callback hook: no promise per request). */
function refuseBadHostsAndBodies(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const refusal = badHostOrBody(request)
    if (refusal) reply.header('connection', 'close')
    done(refusal)
  })
}

/** Builds the HTTP application: plugins in a fixed order, then routes, then the error handler. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: options.config.logLevel,
      // An error in a log line is its kind, code and redacted text, never what a driver hangs on it.
      // Fastify's type asks for the message and stack that an Error always has.
      serializers: {
        err: (error: Error) => loggable(error) as { type: string; message: string; stack: string },
      },
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    // request-log writes the one line per request; Fastify's own lines would carry the URL.
    logController: new LogController({ disableRequestLogging: true }),
    // A client's well-formed X-Request-Id is the request's id, echoed on the response; else a new one.
    genReqId: requestIdOf,
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    // Slow clients cannot hold a connection: headers within 5 s, the whole request within 10 s,
    // both checked every second (Node's default check runs every 30 s); idle keep-alive 5 s.
    // Node answers an HTTP/1.1 request without Host with a bare 400 (no body, no request id, not
    // logged): the onRequest hook below refuses it instead, in the API's error shape.
    http: { connectionsCheckingInterval: HTTP_DEADLINES.checkEveryMs, requireHostHeader: false },
    requestTimeout: HTTP_DEADLINES.requestMs,
    connectionTimeout: 15_000,
    keepAliveTimeout: 5_000,
    maxRequestsPerSocket: 10_000,
    // During a drain, a request that arrives on an open keep-alive connection is still answered
    // (a 503 is not in the contract); new connections are refused by the closed listener.
    return503OnClosing: false,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: false },
    // The router's own refusals (a path that is not valid percent-encoding) bypass the hooks:
    // answered here in the API's shape, with the headers and the log line of every request.
    frameworkErrors: (_error, request, reply) => {
      reply.raw.once('close', () =>
        logRequest(request.log, {
          method: request.method,
          route: '(no route)',
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 100) / 100,
        }),
      )
      reply.headers(identifyingHeaders(request.id))
      sendError(reply, new ApiError('bad_request', 'The request path is not valid percent-encoding'))
    },
    clientErrorHandler: (error, socket) => {
      // Once a request's headers were parsed it belongs to the app, which may have answered it
      // already (a body still dribbling in when the deadline passes): then just close, never a
      // second, unsolicited response.
      const { parser, _httpMessage } = socket as { parser?: { incoming?: unknown }; _httpMessage?: unknown }
      if (socket.writable && !parser?.incoming && !_httpMessage) {
        socket.end(clientErrorResponse((error as NodeJS.ErrnoException).code, app.log))
      } else {
        socket.destroy(error)
      }
    },
  })
  app.server.headersTimeout = HTTP_DEADLINES.headersMs
  // First, so that every request the hooks below refuse is counted too.
  if (options.metrics) await app.register(metricsPlugin, { metrics: options.metrics })

  routeConnectRequests(app)
  refuseBadHostsAndBodies(app)

  await app.register(storePlugin, { store: options.store })
  await app.register(requestLog)
  await app.register(errors)
  await registerCompression(app)
  await app.register(openapi)
  await app.register(publicV1, {
    prefix: PUBLIC_V1_PREFIX,
    apiKeyBrand: options.config.apiKeyBrand,
    lastUsed: options.lastUsed ?? DEFAULT_LAST_USED,
  })
  for (const route of LIST_ROUTES) refuseOtherMethods(app, PUBLIC_V1_PREFIX + route.path)
  return app
}
