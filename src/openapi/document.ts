import { INVALID_KEY_MESSAGE, MISSING_KEY_MESSAGE, STORE_BUSY_MESSAGE } from '../errors.js'
import type { AnyListRoute } from '../routes/public/v1/list-route.js'
import { errorSchema, listEnvelope, paginationSchema } from '../schemas/envelope.js'
import { type JsonSchema, jsonSchemaOf } from '../schemas/json-schema.js'

export const CONTRACT_VERSION = '1.0.0'

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const jsonContent = (schema: object, examples?: Record<string, { value: unknown }>) => ({
  'application/json': examples ? { schema, examples } : { schema },
})

const ERROR_RESPONSES = {
  400: {
    description: 'Invalid query parameters',
    content: jsonContent(ref('Error'), {
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
  401: {
    description: 'Missing, malformed, invalid, revoked or expired API key',
    headers: { 'WWW-Authenticate': { schema: { type: 'string' }, description: 'Bearer challenge' } },
    content: jsonContent(ref('Error'), {
      missing: { value: { error: 'Unauthorized', message: MISSING_KEY_MESSAGE, code: 'missing_api_key' } },
      invalid: { value: { error: 'Unauthorized', message: INVALID_KEY_MESSAGE, code: 'invalid_api_key' } },
    }),
  },
  500: {
    description: 'Unexpected failure; safe to retry with backoff',
    content: jsonContent(ref('Error'), {
      internal: {
        value: {
          error: 'Internal server error',
          message: 'Internal server error (request id req-3f2a)',
          code: 'internal_error',
        },
      },
    }),
  },
  503: {
    description:
      'The data store is briefly unavailable (a maintenance lock, a restart, no free connection); ' +
      'retry the same request after Retry-After seconds',
    headers: {
      'Retry-After': {
        schema: { type: 'integer', minimum: 1 },
        description: 'Seconds to wait before a retry',
      },
    },
    content: jsonContent(ref('Error'), {
      busy: {
        value: { error: 'Service Unavailable', message: STORE_BUSY_MESSAGE, code: 'service_unavailable' },
      },
    }),
  },
} as const

/** Conditional pages (src/routes/public/v1/etag.ts): the validator, the condition, the answer. */
const ETAG_HEADER = {
  ETag: {
    description:
      "Strong validator of this page: it changes whenever anything in the organization's list could change " +
      'the page or its total, and differs between queries and content-codings. Send it back in If-None-Match.',
    schema: { type: 'string', example: '"42-3q2vQv7XzK1mGq9dY0bA_w"' },
  },
} as const
const IF_NONE_MATCH = {
  name: 'If-None-Match',
  in: 'header',
  required: false,
  description:
    "ETags of this page held by the client, or `*` (RFC 9110 §13.1.2): when the page's current ETag is one of " +
    'them, the answer is 304 without a body and the page is not read. A 401 or 400 is answered first.',
  schema: { type: 'string' },
} as const
const NOT_MODIFIED = {
  description: 'Not modified: the page and its total are those of the ETag sent in If-None-Match',
  headers: ETAG_HEADER,
} as const

/** `anyOf: [{type: T, ...}, {type: 'null'}]` as the flatter `type: [T, 'null']` that parameter docs read best in. */
function flattenNullable(schema: JsonSchema): JsonSchema {
  const { anyOf, ...rest } = schema as { anyOf?: JsonSchema[] }
  const branches = anyOf ?? []
  const value = branches.find((branch) => branch.type !== 'null')
  if (branches.length !== 2 || !value || !branches.some((branch) => branch.type === 'null')) return schema
  return { ...value, ...rest, type: [value.type, 'null'] }
}

function parametersOf(route: AnyListRoute): object[] {
  const schema = jsonSchemaOf(route.query.schema) as { properties: Record<string, JsonSchema> }
  return Object.entries(schema.properties).map(([name, property]) => {
    const { description, ...rest } = flattenNullable(property)
    // A bound that must not be before another (endDate, startDate): clients check it as the server does.
    const notBefore = route.query.notBefore?.[name]
    return {
      name,
      in: 'query',
      required: false,
      description,
      schema: rest,
      ...(notBefore ? { 'x-not-before': notBefore } : {}),
    }
  })
}

function operationOf(route: AnyListRoute) {
  return {
    get: {
      operationId: route.operationId,
      summary: route.summary,
      description: route.description,
      security: [{ bearerAuth: [] }],
      parameters: [...parametersOf(route), IF_NONE_MATCH],
      responses: {
        200: {
          description: `A page of ${route.itemName} objects`,
          headers: ETAG_HEADER,
          content: jsonContent(ref(`${route.itemName}List`), {
            page: {
              value: {
                data: [route.example],
                pagination: { limit: 50, offset: 0, total: 1, hasMore: false },
              },
            },
          }),
        },
        304: NOT_MODIFIED,
        ...ERROR_RESPONSES,
      },
    },
  }
}

/** The OpenAPI 3.1 document, built from the same schemas that validate and serialise. */
export function buildOpenApiDocument(prefix: string, routes: readonly AnyListRoute[]): object {
  const schemas: Record<string, object> = {
    Pagination: jsonSchemaOf(paginationSchema),
    Error: jsonSchemaOf(errorSchema),
  }
  const paths: Record<string, object> = {}
  for (const route of routes) {
    schemas[route.itemName] = jsonSchemaOf(route.item)
    schemas[`${route.itemName}List`] = jsonSchemaOf(listEnvelope(route.item))
    paths[prefix + route.path] = operationOf(route)
  }
  paths['/openapi.json'] = {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      security: [],
      responses: {
        200: { description: 'The OpenAPI 3.1 document', content: jsonContent({ type: 'object' }) },
      },
    },
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'openbook public API',
      version: CONTRACT_VERSION,
      description:
        'Read-only access to the customers and appointments of one organization, identified by its API key.',
    },
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
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
    },
  }
}
