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
}

export const DEFAULT_LAST_USED: LastUsedOptions = { resolutionMs: 60_000, flushEveryMs: 5_000 }

const HEADER_TOO_LARGE = JSON.stringify(
  new ApiError('header_too_large', 'Request line and headers must stay under 16 KiB').toBody(),
)
const BAD_REQUEST = JSON.stringify(new ApiError('bad_request', 'Malformed HTTP request').toBody())

/** Builds the HTTP application: plugins in a fixed order, then routes, then the error handler. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: options.config.logLevel,
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    // request-log writes the one line per request; Fastify's own lines would carry the URL.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => `req-${randomUUID()}`,
    requestIdHeader: false,
    bodyLimit: 1024,
    // Slow clients cannot hold a connection: whole request within 10 s, idle keep-alive 5 s.
    requestTimeout: 10_000,
    connectionTimeout: 15_000,
    keepAliveTimeout: 5_000,
    maxRequestsPerSocket: 10_000,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: false },
    clientErrorHandler: (error, socket) => {
      const tooLarge = (error as NodeJS.ErrnoException).code === 'HPE_HEADER_OVERFLOW'
      const body = tooLarge ? HEADER_TOO_LARGE : BAD_REQUEST
      const status = tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request'
      if (socket.writable) {
        socket.end(
          `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        )
      } else {
        socket.destroy(error)
      }
    },
  })
  app.server.headersTimeout = 5_000

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
