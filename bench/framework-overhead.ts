/**
 * Node's own cost per request, without the database: openbook's app (Fastify, hooks, Zod, metrics,
 * the request log), bare Fastify (`fastify`: one route, none of openbook's plugins) or the minimal
 * handler's node:http path, over a store that answers every statement at once with the same
 * canned rows. What one costs more than the other is framework work, measured without
 * PostgreSQL's noise.
 *
 * MODE=openbook|fastify|minimal PORT=… [DATABASE_URL=…] [NO_METRICS=1] node --import tsx bench/framework-overhead.ts
 *
 * With DATABASE_URL, all run on openbook's own PostgreSQL store instead, the minimal and fastify
 * modes in openbook's one round trip (the key lookup with the page, as plugins/auth.ts sends them)
 * on the list the URL names (`parseListRequest`): the request path's store without the framework,
 * so that openbook's cost over the minimal handler (bench/baseline-server.ts) splits into the
 * store's and the framework's, and the framework's into Fastify's and openbook's plugins'.
 * NO_METRICS=1 leaves the app's metrics out. Load it with autocannon and read the process's CPU
 * time per request (/proc/PID/stat) or, under --trace-gc-nvp, the bytes allocated per request; the
 * key may be any well-formed one (`svc_test_` and 64 hex digits).
 */
import { createServer } from 'node:http'
import Fastify from 'fastify'
import { buildApp } from '../src/app.js'
import { hashSecret } from '../src/domain/api-key-secret.js'
import { tuneGarbageCollector } from '../src/gc-tuning.js'
import { Metrics } from '../src/ops/metrics.js'
import { authenticateKey } from '../src/queries/api-keys.js'
import { pageBody } from '../src/queries/page.js'
import { customersRoute } from '../src/routes/public/v1/customers.js'
import { CUSTOMER, itemFields } from '../src/schemas/descriptions.js'
import { createPostgresStore } from '../src/store/postgres/postgres.js'
import { type AdminSql, KEY_ORGANIZATION, type Store } from '../src/store/types.js'
import { listPage, POSTGRES_PAGES, parseListRequest } from './sql.js'

/** A timestamp as PostgreSQL writes it in the request transaction (UTC, DateStyle ISO). */
const asPostgresText = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 19)}+00`

/**
 * The rows of a customers page as pg hands them, from the documented example customer: every
 * column of the rows statement present (NULL where the example has no value, the page's scalars
 * on the first row only), each row a copy of one empty row, as pg's `Result#parseRow` makes them.
 * Rows missing columns would go through other hidden classes than pg's, and `itemsJson` would
 * then cost several times what it costs on pg's rows.
 */
const COLUMNS = [...itemFields(CUSTOMER).map(({ field }) => field), 'total', 'version', 'latest', 'org']
const EXAMPLE: Record<string, unknown> = {
  ...customersRoute.example,
  createdAt: asPostgresText(customersRoute.example.createdAt),
  updatedAt: asPostgresText(customersRoute.example.updatedAt),
}
const ROWS = Array.from({ length: 50 }, (_, i) => {
  const values: Record<string, unknown> = {
    ...EXAMPLE,
    id: `cus_${String(i).padStart(8, '0')}`,
    email: `ada${i}@example.com`,
    ...(i === 0 ? { total: 1502, version: '1502', org: 'org_demo' } : {}),
  }
  return COLUMNS.map((column) => values[column] ?? null)
})
const EMPTY_ROW = Object.fromEntries(COLUMNS.map((column) => [column, null]))

function pgRows(): Record<string, unknown>[] {
  return ROWS.map((values) => {
    const row: Record<string, unknown> = { ...EMPTY_ROW }
    for (let i = 0; i < COLUMNS.length; i++) row[COLUMNS[i] as string] = values[i]
    return row
  })
}

const sql: AdminSql = {
  async query<Row extends object>(text: string): Promise<Row[]> {
    if (text.includes('openbook_key_lookup'))
      return [
        {
          orgId: 'org_demo',
          keyId: 'key_demo',
          lastUsedAt: new Date(),
          expiresAt: null,
          state: 'active',
          cleared: '',
        },
      ] as unknown as Row[]
    return pgRows() as unknown as Row[]
  },
  async exec() {},
  async copyIn() {},
}

const stub: Store = {
  kind: 'postgres',
  adapter: POSTGRES_PAGES,
  concurrentReads: true,
  read: (work) => work(sql),
  asReader: (work) => work(sql),
  admin: (work) => work(sql),
  maintain: async () => {},
  pools: () => [],
  close: async () => {},
}

/** With DATABASE_URL, openbook's own PostgreSQL store instead of the stub. */
const store: Store = process.env.DATABASE_URL
  ? createPostgresStore({ connectionString: process.env.DATABASE_URL })
  : stub

// The same V8 setting as openbook's server and the minimal handler: each is measured as it runs.
tuneGarbageCollector()

/** The store's side of a request without the framework: the key lookup and the page, as a body. */
function pageFor(authorization: string | undefined, url: string): Promise<Buffer> {
  const secret = /^Bearer (\S+)$/.exec(authorization ?? '')?.[1] ?? ''
  const list = parseListRequest(url) ?? {
    resource: 'customers',
    page: { limit: 50, offset: 0 },
    filters: {},
  }
  return store.read(
    async (sql) => {
      if (!sql.sendWithNext) {
        const key = await authenticateKey(sql, hashSecret(secret))
        return pageBody(await listPage(sql, typeof key === 'string' ? '' : key.orgId, list))
      }
      // openbook's one round trip (plugins/auth.ts): the lookup goes with the page's statement.
      const lookup = authenticateKey(sql, hashSecret(secret), { withNext: true })
      const page = listPage(sql, KEY_ORGANIZATION, list)
      page.catch(() => undefined)
      await sql.flush?.()
      await lookup
      return pageBody(await page)
    },
    // As the server reads a list: its one message may share a connection (pipeline.ts).
    { oneMessage: true },
  )
}

const port = Number(process.env.PORT ?? 3400)
if (process.env.MODE === 'minimal') {
  createServer((request, response) => {
    void pageFor(request.headers.authorization, request.url ?? '').then((text) => {
      response.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(text),
      })
      response.end(text)
    })
  }).listen(port, '127.0.0.1')
} else if (process.env.MODE === 'fastify') {
  // Fastify itself, none of openbook's plugins: its request and reply, routing and query parsing.
  const app = Fastify({ logger: false })
  app.get('/api/public/v1/:list', async (request, reply) => {
    reply.type('application/json; charset=utf-8')
    return pageFor(request.headers.authorization, request.url)
  })
  await app.listen({ port, host: '127.0.0.1' })
} else {
  const metrics = new Metrics({ version: 'bench', contractVersion: 'bench' })
  const app = await buildApp({
    store,
    config: { apiKeyBrand: 'svc', logLevel: 'warn' },
    ...(process.env.NO_METRICS ? {} : { metrics }),
  })
  await app.listen({ port, host: '127.0.0.1' })
}
process.on('SIGINT', () => process.exit(0))
