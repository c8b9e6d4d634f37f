import { type ApiErrorCode, INVALID_KEY_MESSAGE, MISSING_KEY_MESSAGE, STORE_BUSY_MESSAGE } from '../errors.js'
import { MAX_IF_NONE_MATCH_TAGS } from '../routes/public/v1/etag.js'
import type { AnyListRoute } from '../routes/public/v1/list-route.js'
import { errorSchema, paginationSchema } from '../schemas/envelope.js'
import { type JsonSchema, jsonSchemaOf } from '../schemas/json-schema.js'

export const CONTRACT_VERSION = '1.0.0'

/**
 * The document is built from named components, each defined once and used by `$ref`: the
 * resources and the envelope's parts (so that generated clients carry one type of each), the
 * error shapes, and the headers, parameters and responses that several operations share. To add
 * one to every list operation: a response header to `HEADERS` and `LIST_PAGE_HEADERS`; a request
 * header (a conditional request's) to `PARAMETERS` and `LIST_HEADER_PARAMETERS`; a response (a
 * status) to `RESPONSES` and `LIST_RESPONSES`. Query parameters come from each list's query
 * schema; those all lists share are named in `LIST_QUERY_PARAMETERS`.
 */
const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
})
const jsonContent = (schema: object, examples?: Record<string, { value: unknown }>) => ({
  'application/json': examples ? { schema, examples } : { schema },
})

/** Every code an error body's `code` may hold, with what a client does about it. */
export const ERROR_CODES: Readonly<Record<ApiErrorCode, string>> = {
  invalid_query:
    '400: a query parameter is invalid (`details` lists each issue). Fix the request; never retry it unchanged.',
  bad_request: '400: the request itself is malformed (Host header, path encoding). Fix the request.',
  missing_api_key: '401: no `Authorization: Bearer <key>` header, or one not of that form.',
  invalid_api_key: '401: no key matches the one presented. Check the key.',
  expired_api_key:
    '401: the key was valid and has expired. Create a new key; the `Openbook-Key-Expires` header on earlier answers gave the date.',
  revoked_api_key:
    "401: the key was revoked by the organization. Ask the organization's owner or admin for a new key.",
  not_found: '404: no such path.',
  method_not_allowed: '405: the API is read-only; only GET and HEAD are answered (`Allow` lists them).',
  payload_too_large: '413: a GET carries no body.',
  unsupported_media_type: '415: a request body of a type the server does not read.',
  header_too_large: '431: the request line and headers exceed 16 KiB.',
  internal_error: '500: an unexpected failure; retry with backoff and quote the X-Request-Id if it persists.',
  service_unavailable:
    '503: the data store is briefly unavailable; retry the same request after `Retry-After` seconds.',
}

const CODE_LIST = Object.entries(ERROR_CODES)
  .map(([code, meaning]) => `- \`${code}\`: ${meaning}`)
  .join('\n')

const INFO_DESCRIPTION = `Read-only access to the customers and appointments of one organization, identified by its API key.

## Using the API well

- **Concurrency.** Keep at most **two requests in flight per key**. More does not read faster: every request of a key reads the same organization's data.
- **Idempotency.** Every operation is a GET: safe to repeat, with no effect on the data. Pages are offset pages over data that may change between requests; keep sync jobs idempotent on \`id\` (an upsert, never an insert), and read the whole list again rather than trusting one page.
- **Retries and backoff.** Retry 5xx answers and network failures with exponential backoff with full jitter (for example 250 ms doubling to 8 s, for a bounded total time). On a 503 wait at least the \`Retry-After\` seconds. Never retry a 400 or a 401 unchanged: it fails the same way.
- **X-Request-Id.** Every response carries one; quote it to support. It is logged with the request, never with its data.
- **Key expiry.** A key with an expiry is answered with \`Openbook-Key-Expires\` (an HTTP-date) on every response; rotate before that date. A refused key is a 401 whose \`code\` says why: \`invalid_api_key\`, \`expired_api_key\` or \`revoked_api_key\` (the message is the same for all three).
- **Compression.** Send \`Accept-Encoding: gzip\` (or \`br\`): a page of 100 customers (about 50 KB of JSON) travels in about a fifth of its bytes.

## Error codes

Every error is a JSON body \`{ error, message, code, details? }\`. The values of \`code\`:

${CODE_LIST}
`

/** Response headers, each declared once. */
const HEADERS: Record<string, object> = {
  'X-Request-Id': {
    description: 'The id of this request, on every response; quote it to support.',
    schema: { type: 'string', examples: ['req-3f2a8c1e-6b1d-4c47-9d3e-2f0a9b7c5d11'] },
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
const LIST_PAGE_HEADERS = ['X-Request-Id', 'Openbook-Key-Expires', 'Openbook-Organization', 'ETag']

const headersOf = (names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, ref('headers', name)]))

/** Responses other than a page, each declared once. */
const RESPONSES: Record<string, object> = {
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
          error: 'Invalid query parameters',
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
    description:
      'Missing, malformed, unknown, revoked or expired API key. `code`: `missing_api_key`, `invalid_api_key`, `expired_api_key` or `revoked_api_key`. Never retry it unchanged.',
    headers: headersOf(['X-Request-Id', 'WWW-Authenticate']),
    content: jsonContent(ref('schemas', 'Error'), {
      missing: { value: { error: 'Unauthorized', message: MISSING_KEY_MESSAGE, code: 'missing_api_key' } },
      invalid: { value: { error: 'Unauthorized', message: INVALID_KEY_MESSAGE, code: 'invalid_api_key' } },
      expired: { value: { error: 'Unauthorized', message: INVALID_KEY_MESSAGE, code: 'expired_api_key' } },
      revoked: { value: { error: 'Unauthorized', message: INVALID_KEY_MESSAGE, code: 'revoked_api_key' } },
    }),
  },
  BadRequest: {
    description: 'A malformed request (`code` `bad_request`) or headers over 16 KiB (431).',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      badRequest: {
        value: {
          error: 'Bad Request',
          message: 'An HTTP/1.1 request must carry exactly one Host header',
          code: 'bad_request',
        },
      },
    }),
  },
  InternalError: {
    description: 'Unexpected failure (`code` `internal_error`); safe to retry with backoff',
    headers: headersOf(['X-Request-Id']),
    content: jsonContent(ref('schemas', 'Error'), {
      internal: {
        value: {
          error: 'Internal server error',
          message: 'Internal server error (request id req-3f2a)',
          code: 'internal_error',
        },
      },
    }),
  },
  ServiceUnavailable: {
    description:
      'The data store is briefly unavailable (a maintenance lock, a restart, no free connection; `code` `service_unavailable`): retry the same request after Retry-After seconds',
    headers: headersOf(['X-Request-Id', 'Retry-After']),
    content: jsonContent(ref('schemas', 'Error'), {
      busy: {
        value: { error: 'Service Unavailable', message: STORE_BUSY_MESSAGE, code: 'service_unavailable' },
      },
    }),
  },
}

/** The responses of every list operation besides its page, by status. */
const LIST_RESPONSES: Record<string, string> = {
  304: 'NotModified',
  400: 'InvalidQuery',
  401: 'Unauthorized',
  500: 'InternalError',
  503: 'ServiceUnavailable',
}

/** `anyOf: [{type: T, ...}, {type: 'null'}]` as the flatter `type: [T, 'null']` that parameter docs read best in. */
function flattenNullable(schema: JsonSchema): JsonSchema {
  const { anyOf, ...rest } = schema as { anyOf?: JsonSchema[] }
  const branches = anyOf ?? []
  const value = branches.find((branch) => branch.type !== 'null')
  if (branches.length !== 2 || !value || !branches.some((branch) => branch.type === 'null')) return schema
  return { ...value, ...rest, type: [value.type, 'null'] }
}

/** Query parameters every list takes, declared once under their component name. */
const LIST_QUERY_PARAMETERS: Record<string, string> = { limit: 'Limit', offset: 'Offset' }

/** Parameters declared here rather than by a query schema (request headers), each once. */
const PARAMETERS: Record<string, object> = {
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
}

/** The request headers every list operation reads, by their name in `PARAMETERS`. */
const LIST_HEADER_PARAMETERS: readonly string[] = ['IfNoneMatch']

function queryParameters(route: AnyListRoute): Record<string, object> {
  const schema = jsonSchemaOf(route.query.schema) as { properties: Record<string, JsonSchema> }
  return Object.fromEntries(
    Object.entries(schema.properties).map(([name, property]) => {
      const { description, ...rest } = flattenNullable(property)
      // A bound that must not be before another (endDate, startDate): clients check it as the server does.
      const notBefore = route.query.notBefore?.[name]
      return [
        name,
        {
          name,
          in: 'query',
          required: false,
          description,
          schema: rest,
          ...(notBefore ? { 'x-not-before': notBefore } : {}),
        },
      ]
    }),
  )
}

function parametersOf(route: AnyListRoute): object[] {
  const query = Object.entries(queryParameters(route)).map(([name, parameter]) => {
    const shared = LIST_QUERY_PARAMETERS[name]
    return shared ? ref('parameters', shared) : parameter
  })
  return [...query, ...LIST_HEADER_PARAMETERS.map((name) => ref('parameters', name))]
}

/** The list envelope of `itemName`, its parts by reference. */
const listSchema = (itemName: string) => ({
  type: 'object',
  description: `A page of ${itemName} objects and where it stands in the list`,
  properties: {
    data: { type: 'array', items: ref('schemas', itemName), description: 'Items of this page' },
    pagination: ref('schemas', 'Pagination'),
  },
  required: ['data', 'pagination'],
  additionalProperties: false,
})

function operationOf(route: AnyListRoute) {
  return {
    get: {
      operationId: route.operationId,
      summary: route.summary,
      description: route.description,
      tags: [route.tag],
      security: [{ bearerAuth: [] }],
      parameters: parametersOf(route),
      responses: {
        200: {
          description: `A page of ${route.itemName} objects`,
          headers: headersOf(LIST_PAGE_HEADERS),
          content: jsonContent(ref('schemas', `${route.itemName}List`), {
            page: {
              value: {
                data: [route.example],
                pagination: { limit: 50, offset: 0, total: 1, hasMore: false },
              },
            },
          }),
        },
        ...Object.fromEntries(
          Object.entries(LIST_RESPONSES).map(([status, name]) => [status, ref('responses', name)]),
        ),
      },
    },
  }
}

/** The error body; `code` one of `ERROR_CODES`. */
function errorSchemas(): Record<string, object> {
  const error = jsonSchemaOf(errorSchema) as { properties: Record<string, object> }
  const base = {
    ...error,
    description: 'Every error answer: `error` always, and the `code` a client branches on',
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
      enum: Object.keys(ERROR_CODES),
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

/** The OpenAPI 3.1 document, built from the same schemas that validate and serialise. */
export function buildOpenApiDocument(prefix: string, routes: readonly AnyListRoute[]): object {
  const schemas: Record<string, object> = { Pagination: jsonSchemaOf(paginationSchema) }
  const paths: Record<string, object> = {}
  const parameters: Record<string, object> = { ...PARAMETERS }
  for (const route of routes) {
    schemas[route.itemName] = jsonSchemaOf(route.item)
    schemas[`${route.itemName}List`] = listSchema(route.itemName)
    paths[prefix + route.path] = operationOf(route)
    for (const [name, parameter] of Object.entries(queryParameters(route))) {
      const shared = LIST_QUERY_PARAMETERS[name]
      if (shared) parameters[shared] = parameter
    }
  }
  Object.assign(schemas, errorSchemas())
  paths['/openapi.json'] = {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      description:
        'The machine-readable contract of the public API, as an OpenAPI 3.1 document. No key needed; cacheable for 5 minutes.',
      tags: ['Contract'],
      security: [],
      responses: {
        200: {
          description: 'The OpenAPI 3.1 document',
          headers: headersOf(['X-Request-Id']),
          content: jsonContent({ type: 'object', description: 'An OpenAPI 3.1 document' }),
        },
        400: ref('responses', 'BadRequest'),
      },
    },
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'openbook public API',
      version: CONTRACT_VERSION,
      description: INFO_DESCRIPTION,
      contact: {
        name: 'openbook API support',
        url: 'https://openbook.example/support',
        email: 'api@openbook.example',
      },
      license: { name: 'Proprietary: openbook terms of service', url: 'https://openbook.example/terms' },
    },
    servers: [{ url: '/', description: 'This server' }],
    security: [{ bearerAuth: [] }],
    tags: [
      ...routes.map((route) => ({ name: route.tag, description: route.tagDescription })),
      { name: 'Contract', description: 'The machine-readable contract itself' },
    ],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'Organization API key: `<brand>_test_` or `<brand>_live_` followed by 64 hex characters',
        },
      },
      schemas,
      parameters,
      headers: HEADERS,
      responses: RESPONSES,
    },
  }
}
