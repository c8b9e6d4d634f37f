import type { FastifyInstance } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { STORE_BUSY_MESSAGE } from '../../src/errors.js'
import { storeReadiness } from '../../src/ops/readiness.js'
import { createPostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/postgres.js'
import { RECONNECT_EVERY_MS } from '../../src/store/postgres/reconnect.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/**
 * A bad minute of the store, as an instance meets it: PostgreSQL (or its pooler) restarting for a
 * second or more, a pooler that hands the request's transactions to any server connection. Real
 * PostgreSQL behind a TCP proxy that the test takes down and brings back.
 */
describe.skipIf(!postgresAvailable())('the store through a short outage (PostgreSQL behind a proxy)', () => {
  let database: TestDatabase
  let proxy: TcpProxy
  let store: Store | undefined
  let app: FastifyInstance | undefined
  let key = ''

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    const org = await createOrg(setup, 'org_outage')
    await addCustomers(setup, org.id, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
    ;({ key } = await createKey(setup, org))
    await setup.close()
    proxy = TcpProxy.forUrl(database.url)
    await proxy.start()
  })
  afterEach(async () => {
    await app?.close()
    await store?.close()
    app = undefined
    store = undefined
    await proxy.start().catch(() => undefined)
  })
  afterAll(async () => {
    await proxy?.stop()
    await database?.drop()
  })

  async function serve(options: Partial<PostgresStoreOptions> = {}): Promise<FastifyInstance> {
    store = createPostgresStore({
      connectionString: proxy.urlFor(database.url),
      maxConnections: 4,
      ...options,
    })
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    const warm = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    expect(warm.statusCode).toBe(200)
    return app
  }

  it('requests that arrive during a 1.5 s outage wait it out and succeed; readiness stays 200', async () => {
    const served = await serve()
    await proxy.stop()
    const started = performance.now()
    const requests = Array.from({ length: 5 }, () =>
      served.inject({ url: '/api/public/v1/customers?limit=1', headers: bearer(key) }),
    )
    const readiness = await storeReadiness(store as Store, 10_000).refresh()
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    await proxy.start()
    const responses = await Promise.all(requests)
    const waited = performance.now() - started
    expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200])
    expect(responses[0]?.json().data.map((c: { id: string }) => c.id)).toEqual(['cus_1'])
    expect(waited).toBeGreaterThanOrEqual(1_400)
    expect(readiness).toMatchObject({ statusCode: 200, body: { status: 'ready', store: 'unreachable' } })
    expect((await storeReadiness(store as Store, 10_000).refresh()).body).toEqual({
      status: 'ready',
      store: 'ok',
    })
  })

  it('requests waiting through a server restart try it one connection at a time, and all go on at its return', async () => {
    const served = await serve()
    // A server starting up: every new session refused with 57P03, the open ones gone.
    await proxy.stop()
    proxy.refuseSessions('57P03', 'the database system is starting up')
    await proxy.start()
    const requests = Array.from({ length: 20 }, () =>
      served.inject({ url: '/api/public/v1/customers?limit=1', headers: bearer(key) }),
    )
    // Each request's own first try, then the shared ones.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const before = proxy.refused
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    const during = proxy.refused - before
    proxy.stopRefusing()
    const back = performance.now()
    const responses = await Promise.all(requests)
    console.log(
      `[outages] 20 requests through a server restart: ${during} sessions tried in 1.2 s; all answered ${Math.round(performance.now() - back)} ms after its return`,
    )
    expect(responses.map((r) => r.statusCode)).toEqual(Array(20).fill(200))
    // One try every RECONNECT_EVERY_MS (12 in 1.2 s), however many requests wait.
    expect(during).toBeGreaterThanOrEqual(6)
    expect(during).toBeLessThanOrEqual(1_200 / RECONNECT_EVERY_MS + 4)
  })

  it('a request whose deadline runs out is answered 503 with Retry-After, in words of its own', async () => {
    const served = await serve({ requestDeadlineMs: 1_000 })
    await proxy.stop()
    const started = performance.now()
    const response = await served.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    const waited = performance.now() - started
    expect(response.statusCode).toBe(503)
    expect(response.headers['retry-after']).toBe('1')
    expect(response.json()).toEqual({
      error: 'Service Unavailable',
      message: STORE_BUSY_MESSAGE,
      code: 'service_unavailable',
    })
    expect(waited).toBeGreaterThanOrEqual(900)
    expect(waited).toBeLessThan(5_000)
    await proxy.start()
    expect((await served.inject({ url: '/api/public/v1/customers', headers: bearer(key) })).statusCode).toBe(
      200,
    )
  })

  it('a database that stops answering mid-request is cut off at the deadline: 503, not a wait without end', async () => {
    const served = await serve({ requestDeadlineMs: 1_500 })
    proxy.freeze()
    const started = performance.now()
    const response = await served.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    expect(response.statusCode).toBe(503)
    expect(performance.now() - started).toBeLessThan(4_000)
    await proxy.stop()
  })

  it(
    '200 clients through a 10 s outage: all answered by the deadline, no database connection piles up, memory bounded',
    async () => {
      const served = await serve()
      const port = await listenOnLoopback(served)
      await proxy.stop()
      const rssBefore = process.memoryUsage().rss
      const started = performance.now()
      const clients = Array.from({ length: 200 }, () =>
        fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=1`, { headers: bearer(key) }).then(
          async (response) => ({
            status: response.status,
            body: await response.text(),
            at: performance.now() - started,
          }),
        ),
      )
      await new Promise((resolve) => setTimeout(resolve, 4_000))
      const pools = (store as Store).pools()
      const rssDuring = process.memoryUsage().rss
      const answers = await Promise.all(clients)
      const slowest = Math.max(...answers.map((a) => a.at))
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10_000 - (performance.now() - started))))
      await proxy.start()
      const after = await served.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
      console.log(
        `[outages] 200 clients, 10 s outage: ${answers.filter((a) => a.status === 503).length} x 503 by ${Math.round(slowest)} ms ` +
          `(deadline 8 s); pool during it ${pools[0]?.total} connections, ${pools[0]?.waiting} waiting; ` +
          `RSS +${Math.round((rssDuring - rssBefore) / 1_048_576)} MB; after: ${after.statusCode}`,
      )
      expect(answers.every((a) => a.status === 503 && a.body.includes('service_unavailable'))).toBe(true)
      expect(slowest).toBeGreaterThanOrEqual(7_500)
      // The deadline, and what the machine adds to the last retry's turn: up to 2 s on an idle
      // machine, and more in proportion to its load (10.1 s seen at load 17). A wait without end
      // runs into the test's limit.
      expect(slowest).toBeLessThan(8_000 + patience(4_000))
      expect(pools[0]?.total ?? 0).toBeLessThanOrEqual(4)
      expect(rssDuring - rssBefore).toBeLessThan(100 * 1_048_576)
      expect(after.statusCode).toBe(200)
    },
    patience(60_000),
  )

  it('prepared statements on, where the server connection lost them (as behind a pooler): no request fails, the store switches to pooler once', async () => {
    const detected = vi.fn()
    store = createPostgresStore({
      connectionString: database.url,
      maxConnections: 1,
      preparedStatements: 'on',
      onPoolerDetected: detected,
    })
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    const get = () =>
      (app as FastifyInstance).inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    expect((await get()).statusCode).toBe(200)
    // The one connection forgets its statements behind the client's back, as a server connection
    // that another client of the pooler used, or that the pooler reset, does.
    await store.admin((sql) => sql.exec('DEALLOCATE ALL'))
    expect((await get()).statusCode).toBe(200)
    expect(detected).toHaveBeenCalledTimes(1)
    await store.admin((sql) => sql.exec('DEALLOCATE ALL'))
    const statuses = [(await get()).statusCode, (await get()).statusCode]
    expect(statuses).toEqual([200, 200])
    expect(detected).toHaveBeenCalledTimes(1)
  })
})
