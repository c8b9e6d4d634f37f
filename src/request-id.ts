import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

/**
 * What a client's `X-Request-Id` must be to become the request's id: 1 to 128 letters, digits,
 * `.`, `_`, `:` or `-` (a UUID, a ULID, a trace id). Anything else (empty, longer, a space, a
 * quote, the header given twice, which Node joins with a comma) is not used and the server makes
 * one: a request id goes into every log line and error message, so it must be safe to print.
 * Published with the header parameter (src/openapi/components.ts).
 */
export const REQUEST_ID_PATTERN = '^[A-Za-z0-9._:-]{1,128}$'
const WELL_FORMED = new RegExp(REQUEST_ID_PATTERN)

export const newRequestId = (): string => `req-${randomUUID()}`

/** The request's id: the client's `X-Request-Id` when well-formed, else a new one. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && WELL_FORMED.test(given) ? given : newRequestId()
}
