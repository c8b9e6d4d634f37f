import type { FastifyInstance } from 'fastify'
import type { z } from 'zod'
import { invalidQuery } from '../../../errors.js'
import { COMPRESSION, type CodingListener, ON_CODING } from '../../../plugins/compression.js'
import { pageBody, type VersionedPage } from '../../../queries/page.js'
import type { KnownVersions } from '../../../queries/page-statement.js'
import type { Query } from '../../../schemas/query.js'
import type { Sql, StoreAdapter, Tenant } from '../../../store/types.js'
import { knownVersions, listEtag, matches, type PageIdentity, parseIfNoneMatch } from './etag.js'

/** Everything about one list operation: registration and the OpenAPI document both read it. */
/** What a list's query gives its `list` once checked. */
export type QueryOutput<Q> = Q extends Query<infer Out> ? Out : never

export interface ListRoute<QueryOut, Item extends z.AnyZodObject> {
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
  /**
   * The page `query` asks for, read on `sql` in the form `store` reads best, with its list's
   * version; not read when that version is one of `known`.
   */
  list(
    store: StoreAdapter,
    sql: Sql,
    tenant: Tenant,
    query: QueryOut,
    known: KnownVersions,
  ): Promise<VersionedPage>
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous list of routes
export type AnyListRoute = ListRoute<any, any>

/**
 * The content-codings a page may be sent in (plugins/compression.ts picks one per request, after
 * the handler): each is its own representation with its own tag (`listEtag`). A 200's tag is the
 * coding's it was sent in, set once the body is encoded; an `If-None-Match` naming the page's tag
 * in any of them is answered 304 with that tag.
 */
const ENCODINGS = ['identity', ...COMPRESSION.encodings] as const

/**
 * The response header that names the key's organization, on every page and every 304: a client
 * learns whose rows it copies from any answer, also of an organization without rows.
 */
export const ORGANIZATION_HEADER = 'openbook-organization'

export function registerListRoute(app: FastifyInstance, route: AnyListRoute): void {
  const fields = Object.keys(route.item.shape)
  // HEAD by the same handler, rather than Fastify's generated HEAD route, which gives a 304 a
  // Content-Length of 0 (RFC 9110 §8.6 allows only the 200's).
  app.route({
    method: ['GET', 'HEAD'],
    url: route.path,
    exposeHeadRoute: false,
    handler: async (request, reply) => {
      const parsed = route.query.safeParse(request.query)
      const condition = parseIfNoneMatch(request.headers['if-none-match'])
      const read = (known: KnownVersions) =>
        request.readAsTenant((sql, tenant) => {
          // Checked after the key, so that a caller without a valid key learns nothing from validation.
          if (!parsed.success) throw invalidQuery(parsed.error)
          return route.list(app.store.adapter, sql, tenant, parsed.data, known)
        })
      // Read only once the query passed (`read` refuses it otherwise).
      const query = parsed.success ? JSON.stringify(parsed.data) : ''
      const identityOf = ({ orgId, version, latest }: VersionedPage): PageIdentity => ({
        list: route.path,
        fields,
        orgId,
        query,
        version,
        latest,
      })
      let answer = await read(knownVersions(condition))
      reply.header(ORGANIZATION_HEADER, answer.orgId)
      if (!answer.page) {
        const identity = identityOf(answer)
        const etag =
          condition &&
          ENCODINGS.map((coding) => listEtag(identity, coding)).find((tag) => matches(condition, tag))
        if (etag) {
          // Not modified: no body; the tag, and every header a 200 carries but the body's own.
          reply.code(304).header('etag', etag)
          return reply.send()
        }
        // A tag of this version, but of another query, organization or history (the same count of
        // changes written at other times, in a copy of the database): the page after all.
        answer = await read([])
      }
      if (!answer.page) throw new Error('an unconditional read returned no page')
      const identity = identityOf(answer)
      // The tag of the coding the body goes in (`identity` too), once compression has chosen it:
      // hashed once a request, in the onSend hook every route gets (plugins/compression.ts).
      ;(reply as CodingListener)[ON_CODING] = (coding) => reply.header('etag', listEtag(identity, coding))
      // The items arrive as JSON from the database, written field by field from the query's list:
      // only those fields leave the server, and the body is sent as it is, without a parse.
      reply.type('application/json; charset=utf-8')
      const body = pageBody(answer.page)
      if (request.method !== 'HEAD') return body
      // The GET's length, without its body.
      reply.header('content-length', String(Buffer.byteLength(body)))
      return ''
    },
  })
}
