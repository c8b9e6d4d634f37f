import {
  BODY_LIMIT,
  codesOf,
  ERROR_CATALOGUE,
  INVALID_KEY_MESSAGE,
  MISSING_KEY_MESSAGE,
  PAYLOAD_TOO_LARGE_MESSAGE,
  STORE_BUSY_MESSAGE,
} from '../errors.js'
import { REQUEST_ID_PATTERN } from '../request-id.js'
import { MAX_IF_NONE_MATCH_TAGS } from '../routes/public/v1/etag.js'
import { errorSchema } from '../schemas/envelope.js'
import { responseSchemaOf } from '../schemas/json-schema.js'

// The document's shared components: the headers, request-header parameters and responses that
// several operations use, and the error shapes, whose codes come from the catalogue (errors.ts).

export const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
})
export const jsonContent = (schema: object, examples?: Record<string, { value: unknown }>) => ({
  'application/json': examples ? { schema, examples } : { schema },
})

/** Every code an error body's `code` may hold, with its status and what a client does about it. */
export const CODE_LIST = Object.entries(ERROR_CATALOGUE)
  .map(([code, { status, meaning }]) => `- \`${code}\`: ${status}: ${meaning}`)
  .join('\n')

/** `a`, `a or b`, `a, b or c`: the codes of one status, for a response's description. */
const codeChoice = (status: number) => {
  const codes = codesOf(status).map((code) => `\`${code}\``)
  return codes.length < 2 ? codes.join('') : `${codes.slice(0, -1).join(', ')} or ${codes.at(-1)}`
}

/** Response headers, each declared once. */
export const HEADERS: Record<string, object> = {
  'X-Request-Id': {
    description:
      "The id of this request, on every response: the request's own `X-Request-Id` when it sent a well-formed one, else one the server made. Quote it to support.",
    schema: { type: 'string', examples: ['req-3f2a8c1e-6b1d-4c47-9d3e-2f0a9b7c5d11'] },
  },
  Allow: {
    description: 'The methods the path answers: GET and HEAD.',
    schema: { type: 'string', examples: ['GET, HEAD'] },
  },
  'Openbook-Key-Expires': {
    description:
      'When the API key that authorized this request expires, as an HTTP-date (RFC 9110), on every response to a request with a key that has an expiry; absent for a key without one. Create a new key and switch to it before then.',
    schema: { type: 'string', examples: ['Fri, 02 Jan 2099 03:04:05 GMT'] },
  },
  'Openbook-Organization': {
    description:
      "The id of the key's organization, whose rows the list holds, on every page and every 304. A copy of the lists keys its rows by it (ids are unique within an organization only).",
    schema: { type: 'string', examples: ['org_demo'] },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying the same request.',
    schema: { type: 'integer', minimum: 1 },
  },
  'WWW-Authenticate': {
    description: 'The Bearer challenge (RFC 6750); `error="invalid_token"` for a key that is refused.',
    schema: { type: 'string', examples: ['Bearer realm="openbook", error="invalid_token"'] },
  },
  // Conditional pages (src/routes/public/v1/etag.ts): the validator.
  ETag: {
    description:
      "Strong validator of this page: it changes whenever anything in the organization's list could change " +
      'the page or its total, and differs between queries and content-codings. Send it back in If-None-Match.',
    schema: { type: 'string', examples: ['"42-3q2vQv7XzK1mGq9dY0bA_w"'] },
  },
}

/** The headers every page of a list carries. */
export const LIST_PAGE_HEADERS = ['X-Request-Id', 'Openbook-Key-Expires', 'Openbook-Organization', 'ETag']

export const headersOf = (names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, ref('headers', name)]))

/** An error body as the server writes it for `code`. */
const errorExample = (code: keyof typeof ERROR_CATALOGUE, message: string) => ({
  error: ERROR_CATALOGUE[code].title,
  message,
  code,
})

/** Responses other than a page, each declared once. */
export const RESPONSES: Record<string, object> = {
  NotModified: {
    description: 'Not modified: the page and its total are those of the ETag sent in If-None-Match',
    headers: headersOf(['X-Request-Id', 'Openbook-Key-Expires', 'Openbook-Organization', 'ETag']),
  },
  InvalidQuery: {
    description: 'Invalid query parameters (`code` `invalid_query`; `details` lists each issue)',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'ValidationError'), {
      limitTooLarge: {
        value: {
          error: ERROR_CATALOGUE.invalid_query.title,
          message: 'limit: limit must be at most 100',
          code: 'invalid_query',
          details: [
            {
              code: 'too_big',
              maximum: 100,
              type: 'number',
              inclusive: true,
              exact: false,
              message: 'limit must be at most 100',
              path: ['limit'],
            },
          ],
        },
      },
    }),
  },
  Unauthorized: {
    description: `Missing, malformed, unknown, revoked or expired API key. \`code\`: ${codeChoice(401)}. Never retry it unchanged.`,
    headers: headersOf(['X-Request-Id', 'WWW-Authenticate']),
    content: jsonContent(ref('schemas', 'Error'), {
      missing: { value: errorExample('missing_api_key', MISSING_KEY_MESSAGE) },
      invalid: { value: errorExample('invalid_api_key', INVALID_KEY_MESSAGE) },
      expired: { value: errorExample('expired_api_key', INVALID_KEY_MESSAGE) },
      revoked: { value: errorExample('revoked_api_key', INVALID_KEY_MESSAGE) },
    }),
  },
  BadRequest: {
    description: 'A malformed request (`code` `bad_request`): its Host header, its path encoding.',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      badRequest: {
        value: errorExample('bad_request', 'An HTTP/1.1 request must carry exactly one Host header'),
      },
    }),
  },
  NotFound: {
    description:
      'No such path (`code` `not_found`): the base URL or the path is wrong. An empty list is a 200 with no items, never a 404.',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      notFound: { value: errorExample('not_found', 'No route for GET /api/public/v1/customer') },
    }),
  },
  MethodNotAllowed: {
    description:
      'The path answers GET and HEAD only (`code` `method_not_allowed`): this is the answer to any other method on it, with `Allow`. The API is read-only.',
    headers: headersOf(['X-Request-Id', 'Allow']),
    content: jsonContent(ref('schemas', 'Error'), {
      post: {
        value: errorExample('method_not_allowed', 'Method POST is not allowed; this API is read-only'),
      },
    }),
  },
  PayloadTooLarge: {
    description: `A request with a body over ${BODY_LIMIT} bytes, or a chunked one (\`code\` \`payload_too_large\`): a GET carries none. The connection is closed.`,
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      body: {
        value: errorExample('payload_too_large', PAYLOAD_TOO_LARGE_MESSAGE),
      },
    }),
  },
  HeaderTooLarge: {
    description:
      'The request line and headers exceed 16 KiB (`code` `header_too_large`); answered before the request is read, so its `X-Request-Id` is always one the server made. The connection is closed.',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      headers: {
        value: errorExample('header_too_large', 'Request line and headers must stay under 16 KiB'),
      },
    }),
  },
  InternalError: {
    description: 'Unexpected failure (`code` `internal_error`); safe to retry with backoff',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      internal: {
        value: errorExample('internal_error', 'Internal server error (request id req-3f2a)'),
      },
    }),
  },
  ServiceUnavailable: {
    description: `The data store is briefly unavailable (a maintenance lock, a restart) or the server has more requests than it can take (\`code\` ${codeChoice(503)}): retry the same request after Retry-After seconds`,
    headers: headersOf(['X-Request-Id', 'Retry-After']),
    content: jsonContent(ref('schemas', 'Error'), {
      busy: { value: errorExample('service_unavailable', STORE_BUSY_MESSAGE) },
    }),
  },
}

/**
 * The answers of every path whatever its operation, by status. OpenAPI has no responses per path:
 * each operation lists them, the 405 (the answer to any other method on the path) included.
 */
export const PATH_RESPONSES: Record<string, string> = {
  404: 'NotFound',
  405: 'MethodNotAllowed',
  413: 'PayloadTooLarge',
  431: 'HeaderTooLarge',
}

/** The responses of every list operation besides its page, by status. */
export const LIST_RESPONSES: Record<string, string> = {
  304: 'NotModified',
  400: 'InvalidQuery',
  401: 'Unauthorized',
  ...PATH_RESPONSES,
  500: 'InternalError',
  503: 'ServiceUnavailable',
}

/** Parameters declared here rather than by a query schema (request headers), each once. */
export const PARAMETERS: Record<string, object> = {
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description:
      "ETags of this page held by the client, or `*` (RFC 9110 §13.1.2): when the page's current ETag is one of " +
      'them, the answer is 304 without a body and the page is not read. A 401 or 400 is answered first. ' +
      `Only the first ${MAX_IF_NONE_MATCH_TAGS} tags of the header are compared; any after them are ignored, ` +
      'so a request whose only matching tag comes later gets the page (200).',
    schema: { type: 'string' },
  },
  RequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description:
      "The client's own id for this request, to find it in both sides' logs: when it matches the pattern it becomes the request's id, echoed in the response's `X-Request-Id` and quoted in a 500's message. Any other value is not used (no error): the server makes an id.",
    schema: {
      type: 'string',
      pattern: REQUEST_ID_PATTERN,
      examples: ['b7f3c2d1-5e4a-4f6b-8c9d-0a1b2c3d4e5f'],
    },
  },
}

/** The request headers every operation reads, by their name in `PARAMETERS`. */
export const HEADER_PARAMETERS: readonly string[] = ['RequestId']

/** The request headers every list operation reads, by their name in `PARAMETERS`. */
export const LIST_HEADER_PARAMETERS: readonly string[] = ['IfNoneMatch', ...HEADER_PARAMETERS]

/** The error body; `code` one of the catalogue's (errors.ts). */
export function errorSchemas(): Record<string, object> {
  const error = responseSchemaOf(errorSchema) as { properties: Record<string, object> }
  const base = {
    ...error,
    description:
      'Every error answer: `error` always, and the `code` a client branches on. Fields may be added within v1: ignore those you do not know.',
    properties: {
      ...error.properties,
      error: { type: 'string', description: 'The status in words, e.g. `Unauthorized`' },
      message: { type: 'string', description: 'What went wrong, for people' },
      code: ref('schemas', 'ErrorCode'),
      details: { description: 'For `invalid_query`: the validation issues (see ValidationError)' },
    },
  }
  return {
    ErrorCode: {
      type: 'string',
      description: `Why the request failed. New codes may be added within v1: treat an unknown code by its HTTP status.\n\n${CODE_LIST}`,
      enum: Object.keys(ERROR_CATALOGUE),
    },
    Error: base,
    ValidationIssue: {
      type: 'object',
      description: 'One invalid query parameter',
      properties: {
        code: { type: 'string', description: 'The kind of issue, e.g. `too_big`, `invalid_type`' },
        path: {
          type: 'array',
          items: { type: ['string', 'integer'] },
          description: 'The parameter, e.g. `["limit"]`',
        },
        message: { type: 'string' },
      },
      required: ['code', 'path', 'message'],
      additionalProperties: true,
    },
    ValidationError: {
      ...base,
      description: 'A 400 `invalid_query`: the error body with every issue in `details`',
      properties: {
        ...base.properties,
        details: { type: 'array', items: ref('schemas', 'ValidationIssue') },
      },
      required: ['error', 'message', 'code', 'details'],
    },
  }
}
