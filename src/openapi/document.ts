import type { AnyListRoute } from '../routes/public/v1/list-route.js'
import { paginationSchema } from '../schemas/envelope.js'
import { type JsonSchema, jsonSchemaOf, responseSchemaOf } from '../schemas/json-schema.js'
import {
  CODE_LIST,
  errorSchemas,
  HEADER_PARAMETERS,
  HEADERS,
  headersOf,
  jsonContent,
  LIST_HEADER_PARAMETERS,
  LIST_PAGE_HEADERS,
  LIST_RESPONSES,
  PARAMETERS,
  PATH_RESPONSES,
  RESPONSES,
  ref,
} from './components.js'

export const CONTRACT_VERSION = '1.0.0'

/**
 * The document is built from named components, each defined once and used by `$ref`: the
 * resources and the envelope's parts (so that generated clients carry one type of each), the
 * error shapes, and the headers, parameters and responses that several operations share. To add
 * one to every list operation: a response header to `HEADERS` and `LIST_PAGE_HEADERS`; a request
 * header (a conditional request's) to `PARAMETERS` and `LIST_HEADER_PARAMETERS`; a response (a
 * status) to `RESPONSES` and `LIST_RESPONSES`. Query parameters come from each list's query
 * schema; those all lists share are named in `LIST_QUERY_PARAMETERS`. The shared components are
 * in components.ts.
 */

const INFO_DESCRIPTION = `Read-only access to the customers and appointments of one organization, identified by its API key.

## Using the API well

- **Concurrency.** Keep at most **two requests in flight per key**. More does not read faster: every request of a key reads the same organization's data.
- **Idempotency.** Every operation is a GET: safe to repeat, with no effect on the data. Pages are offset pages over data that may change between requests; keep sync jobs idempotent on \`id\` (an upsert, never an insert), and read the whole list again rather than trusting one page.
- **Retries and backoff.** Retry 5xx answers and network failures with exponential backoff with full jitter (for example 250 ms doubling to 8 s, for a bounded total time). On a 503 wait at least the \`Retry-After\` seconds. Never retry a 400 or a 401 unchanged: it fails the same way.
- **X-Request-Id.** Every response carries one; quote it to support. Send your own (up to 128 letters, digits, \`.\`, \`_\`, \`:\` or \`-\`) and it is the request's id, in both sides' logs. It is logged with the request, never with its data.
- **Unchanged pages: ETags.** Every page carries an \`ETag\`. Send it back in \`If-None-Match\`: while nothing in the list could change that page or its total, the answer is 304 without a body, and the page is not even read. A nightly copy whose lists did not change costs one request per list.
- **New fields.** Fields may be added to items, pages and error bodies within v1, and the schemas allow them: ignore fields you do not know rather than refuse the answer. Unknown query parameters, on the other hand, are refused (400), so that a misspelt or guessed filter never silently returns the whole list.
- **Key expiry.** A key with an expiry is answered with \`Openbook-Key-Expires\` (an HTTP-date) on every response; rotate before that date. A refused key is a 401 whose \`code\` says why: \`invalid_api_key\`, \`expired_api_key\` or \`revoked_api_key\` (the message is the same for all three).
- **Compression.** Send \`Accept-Encoding: gzip\` (or \`br\`): a page of 100 customers (about 50 KB of JSON) travels in about a fifth of its bytes.

## Error codes

Every error is a JSON body \`{ error, message, code, details? }\`. The values of \`code\`:

${CODE_LIST}
`

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
          schema: { ...rest, ...route.query.published[name] },
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

/** The list envelope of `itemName`, its parts by reference; open to fields added within v1. */
const listSchema = (itemName: string) => ({
  type: 'object',
  description: `A page of ${itemName} objects and where it stands in the list`,
  properties: {
    data: { type: 'array', items: ref('schemas', itemName), description: 'Items of this page' },
    pagination: ref('schemas', 'Pagination'),
  },
  required: ['data', 'pagination'],
})

/** The responses shared by every path, by reference. */
const referenced = (responses: Record<string, string>) =>
  Object.fromEntries(Object.entries(responses).map(([status, name]) => [status, ref('responses', name)]))

/**
 * HEAD on a path that serves it: the GET's answer without its body (RFC 9110 §9.3.2), with the
 * same parameters and statuses; a 200 carries the GET's `Content-Length`.
 */
function headOf(get: {
  operationId: string
  summary: string
  responses: Record<string, { description?: string; headers?: object } | object>
  [key: string]: unknown
}) {
  const { operationId, summary, responses, description: _description, ...rest } = get
  const ok = responses[200] as { description: string; headers?: object }
  return {
    ...rest,
    operationId: `head${operationId.charAt(0).toUpperCase()}${operationId.slice(1)}`,
    summary: `${summary}: headers only (HEAD)`,
    description: `The answer of \`${operationId}\` without its body: the same status and headers, a 200's \`Content-Length\` that of the GET's body. Error bodies are not sent either.`,
    responses: {
      ...responses,
      200: { description: `${ok.description}, without the body`, headers: ok.headers },
    },
  }
}

function operationOf(route: AnyListRoute) {
  const get = {
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
      ...referenced(LIST_RESPONSES),
    },
  }
  return { get, head: headOf(get) }
}

/** The OpenAPI 3.1 document, built from the same schemas that validate and serialise. */
export function buildOpenApiDocument(prefix: string, routes: readonly AnyListRoute[]): object {
  const schemas: Record<string, object> = { Pagination: responseSchemaOf(paginationSchema) }
  const paths: Record<string, object> = {}
  const parameters: Record<string, object> = { ...PARAMETERS }
  for (const route of routes) {
    schemas[route.itemName] = responseSchemaOf(route.item)
    schemas[`${route.itemName}List`] = listSchema(route.itemName)
    paths[prefix + route.path] = operationOf(route)
    for (const [name, parameter] of Object.entries(queryParameters(route))) {
      const shared = LIST_QUERY_PARAMETERS[name]
      if (shared) parameters[shared] = parameter
    }
  }
  Object.assign(schemas, errorSchemas())
  const contract = {
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    description:
      'The machine-readable contract of the public API, as an OpenAPI 3.1 document. No key needed; cacheable for 5 minutes.',
    tags: ['Contract'],
    security: [],
    parameters: HEADER_PARAMETERS.map((name) => ref('parameters', name)),
    responses: {
      200: {
        description: 'The OpenAPI 3.1 document',
        headers: headersOf(['X-Request-Id']),
        content: jsonContent({ type: 'object', description: 'An OpenAPI 3.1 document' }),
      },
      400: ref('responses', 'BadRequest'),
      ...referenced(PATH_RESPONSES),
    },
  }
  paths['/openapi.json'] = { get: contract, head: headOf(contract) }
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
