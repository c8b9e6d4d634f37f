import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError, type ApiErrorCode, internalError } from '../errors.js'

function send(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply
    .code(error.statusCode)
    .headers(error.headers)
    .header('content-type', 'application/json; charset=utf-8')
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

/** The path alone, bounded: a query string may carry personal data. */
function pathOf(url: string): string {
  const path = url.split('?')[0] ?? ''
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}

/** Quoted text in driver messages is the offending value or a query literal: never logged. */
function redact(text: unknown): string | undefined {
  return typeof text === 'string' ? text.replace(/"[^"]*"|'[^']*'/g, '"…"') : undefined
}

/**
 * What an unexpected error may put in a log line: its kind, code and redacted message and stack.
 * Never a driver's query text, parameters, context or detail, which can hold query values or rows.
 */
function loggable(error: FastifyError): Record<string, unknown> {
  const { code, routine } = error as { code?: unknown; routine?: unknown }
  return {
    type: error.name,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof routine === 'string' ? { routine } : {}),
    message: redact(error.message),
    stack: redact(error.stack),
  }
}

/** The one place where errors become responses: same shape everywhere, nothing internal in a 5xx. */
export default fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      const known = error instanceof ApiError ? error : fromFramework(error)
      if (known) return send(reply, known)
      request.log.error({ err: loggable(error) }, 'request failed')
      return send(reply, internalError(request.id))
    })

    app.setNotFoundHandler((request, reply) =>
      send(reply, new ApiError('not_found', `No route for ${request.method} ${pathOf(request.url)}`)),
    )
  },
  { name: 'errors' },
)
