import type { FastifyInstance } from 'fastify'
import type { z } from 'zod'
import { invalidQuery } from '../../../errors.js'
import type { Page } from '../../../queries/page.js'
import { pageBody } from '../../../schemas/envelope.js'
import type { Query } from '../../../schemas/query.js'
import type { Sql, StoreAdapter, Tenant } from '../../../store/types.js'

/** Everything about one list operation: registration and the OpenAPI document both read it. */
/** What a list's query gives its `list` once checked. */
export type QueryOutput<Q> = Q extends Query<infer Out> ? Out : never

export interface ListRoute<QueryOut, Item extends z.ZodTypeAny> {
  readonly operationId: string
  readonly path: string
  readonly summary: string
  readonly description: string
  readonly query: Query<QueryOut>
  readonly item: Item
  readonly itemName: string
  /** The operation's tag in the OpenAPI document, and what the tag groups. */
  readonly tag: string
  readonly tagDescription: string
  readonly example: z.infer<Item>
  /** The page `query` asks for, read on `sql` in the form `store` reads best. */
  list(store: StoreAdapter, sql: Sql, tenant: Tenant, query: QueryOut): Promise<Page>
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous list of routes
export type AnyListRoute = ListRoute<any, any>

export function registerListRoute(app: FastifyInstance, route: AnyListRoute): void {
  app.get(route.path, {
    handler: async (request, reply) => {
      const parsed = route.query.safeParse(request.query)
      const page = await request.readAsTenant((sql, tenant) => {
        // Checked after the key, so that a caller without a valid key learns nothing from validation.
        if (!parsed.success) throw invalidQuery(parsed.error)
        return route.list(app.store.adapter, sql, tenant, parsed.data)
      })
      // The items arrive as JSON from the database, written field by field from the query's list:
      // only those fields leave the server, and the body is sent as it is, without a parse.
      reply.type('application/json; charset=utf-8')
      return pageBody(page)
    },
  })
}
