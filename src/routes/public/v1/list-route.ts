import type { FastifyInstance } from 'fastify'
import type { z } from 'zod'
import { ApiError, methodNotAllowed } from '../../../errors.js'
import { type Page, pageBody } from '../../../queries/page.js'
import type { Sql, StoreAdapter } from '../../../store/types.js'

/** Everything about one list operation: registration and the OpenAPI document both read it. */
export interface ListRoute<Query extends z.ZodTypeAny, Item extends z.ZodTypeAny> {
  readonly operationId: string
  readonly path: string
  readonly summary: string
  readonly description: string
  readonly query: Query
  readonly item: Item
  readonly itemName: string
  readonly example: z.infer<Item>
  /** The page `query` asks for, read on `sql` in the form `store` reads best. */
  list(store: StoreAdapter, sql: Sql, orgId: string, query: z.output<Query>): Promise<Page>
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous list of routes
export type AnyListRoute = ListRoute<any, any>

export function invalidQuery(error: z.ZodError): ApiError {
  const message = error.issues
    .map((issue) => `${issue.path.join('.') || 'query'}: ${issue.message}`)
    .join('; ')
  return new ApiError('invalid_query', message, error.issues)
}

export const NON_GET_METHODS = ['DELETE', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const

/**
 * Answers the write methods on `url` with 405 before any body is read. Every other method meets
 * no route and gets its 405 from the errors plugin (plugins/errors.ts), also before the body.
 */
export function refuseOtherMethods(app: FastifyInstance, url: string): void {
  app.route({
    method: [...NON_GET_METHODS],
    url,
    onRequest: async (request) => {
      throw methodNotAllowed(request.method)
    },
    handler: async () => undefined,
  })
}

export function registerListRoute(app: FastifyInstance, route: AnyListRoute): void {
  app.get(route.path, {
    handler: async (request, reply) => {
      const parsed = route.query.safeParse(request.query)
      const page = await request.readAsTenant((sql, orgId) => {
        // Checked after the key, so that a caller without a valid key learns nothing from validation.
        if (!parsed.success) throw invalidQuery(parsed.error)
        return route.list(app.store.adapter, sql, orgId, parsed.data)
      })
      // The items arrive as JSON from the database, written field by field from the query's list:
      // only those fields leave the server, and the body is sent as it is, without a parse.
      reply.type('application/json; charset=utf-8')
      return pageBody(page)
    },
  })
}
