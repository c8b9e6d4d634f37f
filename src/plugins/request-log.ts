import type { FastifyBaseLogger } from 'fastify'
import fp from 'fastify-plugin'

/** Headers every response carries, including those written before Fastify has a request. */
export function identifyingHeaders(requestId: string): Record<string, string> {
  return { 'x-request-id': requestId, 'x-content-type-options': 'nosniff' }
}

export interface RequestLine {
  readonly method: string
  readonly route: string
  readonly status: number
  /** Omitted where the start of the request is unknown (refused by Node's HTTP parser). */
  readonly ms?: number
}

/** The one line per request; `log` carries the request id (Fastify's request logger does). */
export function logRequest(log: FastifyBaseLogger, line: RequestLine): void {
  log.info(line, 'request')
}

/**
 * One line per request: method, route pattern, status, duration, request id.
 * Never the URL's query string, a header or a body: they may carry keys or personal data.
 */
export default fp(
  async (app) => {
    // Callback hooks, as on every hook of the request path: no promise per request.
    app.addHook('onSend', (request, reply, payload, done) => {
      reply.headers(identifyingHeaders(request.id))
      done(null, payload)
    })
    app.addHook('onResponse', (request, reply, done) => {
      logRequest(request.log, {
        method: request.method,
        route: request.routeOptions.url ?? '(no route)',
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      })
      done()
    })
  },
  { name: 'request-log' },
)
