import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { OVERLOADED_MESSAGE, STORE_BUSY_MESSAGE } from '../../src/errors.js'
import { Metrics } from '../../src/ops/metrics.js'
import { storeReadiness } from '../../src/ops/readiness.js'
import type { TransactionMode } from '../../src/store/postgres/connection.js'
import { connectionLimitWarning, readConnectionLimits } from '../../src/store/postgres/connection-budget.js'
import { openDatabase } from '../../src/store/postgres/pool.js'
import { createPostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, type RunningProcess, start } from '../helpers/process.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/**
 * An instance beside others that share the database's connections: its readiness while the
 * server has no slot for the check's own connection, the idle connections it gives back, a
 * request that finds every pooled connection busy (overload, not an outage), and the warning at
 * start when the pool could outgrow what the server leaves free.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const PAGE = '/api/public/v1/customers?limit=1'

describe.skipIf(!postgresAvailable())('connection limits (PostgreSQL)', () => {
  let database: TestDatabase
  /** A member of openbook_reader, as production's openbook_api: its CONNECTION LIMIT is set per test. */
  let role: TestRole
  let key = ''
  let store: Store | undefined
  let app: FastifyInstance | undefined
  const others: pg.Client[] = []

  const asRole = (extra: Record<string, string> = {}) => {
    const url = new URL(database.url)
    url.username = role.name
    for (const [name, value] of Object.entries(extra)) url.searchParams.set(name, value)
    return url.toString()
  }
  const asOwner = async (text: string, values: unknown[] = []) => {
    const client = new pg.Client({ connectionString: database.url })
    await client.connect()
    try {
      return (await client.query(text, values)).rows
    } finally {
      await client.end()
    }
  }
  const connectionLimit = (limit: number) => asOwner(`ALTER ROLE ${role.name} CONNECTION LIMIT ${limit}`)
  /** The database's sessions whose `application_name` or role (`usename`) is `value`. */
  const sessionsWhere = async (column: 'application_name' | 'usename', value: string) =>
    Number(
      (
        await asOwner(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND ${column} = $1`,
          [value],
        )
      )[0]?.n,
    )

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    role = await createTestRole('openbook_reader')
    const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    const org = await createOrg(setup, 'org_limits')
    await addCustomers(setup, org.id, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
    ;({ key } = await createKey(setup, org))
    await setup.close()
  })
  afterEach(async () => {
    await app?.close()
    await store?.close()
    app = undefined
    store = undefined
    for (const client of others.splice(0)) await client.end().catch(() => undefined)
    await connectionLimit(-1)
    // The next test's limit counts the sessions whose backends are still exiting: wait for them.
    const deadline = performance.now() + patience(2_000)
    while ((await sessionsWhere('usename', role.name)) > 0 && performance.now() < deadline) await sleep(50)
  })
  afterAll(async () => {
    await database?.drop()
    await role?.drop()
  })

  /**
   * A client of the role in its one slot. The pool has ended its connection, but the server counts
   * that session against the role until its backend has exited, a moment later: the slot is tried
   * again for as long as the role's limit alone refuses it.
   */
  async function connectAsRoleOnceFree(): Promise<pg.Client> {
    const deadline = performance.now() + patience(2_000)
    for (;;) {
      const client = new pg.Client({ connectionString: asRole() })
      try {
        await client.connect()
        return client
      } catch (error) {
        if (!/too many connections for role/.test(String(error)) || performance.now() > deadline) throw error
        await sleep(50)
      }
    }
  }

  async function serve(options: Partial<PostgresStoreOptions>, metrics?: Metrics) {
    store = createPostgresStore({ connectionString: asRole(), ...options })
    const built = await buildTestApp(store, { logLevel: 'info', ...(metrics ? { metrics } : {}) })
    app = built.app
    return { served: built.app, logs: built.logs, store }
  }

  it("readiness says ready while requests succeed and the check's own connection finds no slot", async () => {
    // The role may hold one session: the pool's, once a request has opened it.
    await connectionLimit(1)
    const { served, store } = await serve({ maxConnections: 1 })
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(200)
    const readiness = storeReadiness(store, 0)
    const report = await readiness.refresh()
    expect(report).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(200)
    expect((await readiness.refresh()).statusCode).toBe(200)
  })

  it('and a store this instance cannot get a connection from at all still turns readiness 503', async () => {
    await connectionLimit(1)
    const { served, store } = await serve({ maxConnections: 1, idleTimeoutMs: 200 })
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(200)
    // The pool gives its connection back; another client of the role takes the one slot.
    for (let i = 0; i < 50 && store.pools()[0]?.total !== 0; i++) await sleep(50)
    others.push(await connectAsRoleOnceFree())
    const report = await storeReadiness(store, 0).refresh()
    expect(report.statusCode).toBe(503)
    expect(String(report.body.reason)).toMatch(/too many connections for role/)
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(503)
  })

  it('idle pooled connections are closed after DATABASE_IDLE_TIMEOUT_MS: a burst gives its connections back', async () => {
    const name = `openbook_idle_${process.pid}`
    store = createPostgresStore({
      connectionString: asRole({ application_name: name }),
      maxConnections: 4,
      idleTimeoutMs: 500,
    })
    const burst = store
    await Promise.all(Array.from({ length: 4 }, () => burst.read((sql) => sql.query('SELECT pg_sleep(0.3)'))))
    expect(await sessionsWhere('application_name', name)).toBe(4)
    const idleSince = performance.now()
    let left = 4
    while (left > 0 && performance.now() - idleSince < 5_000) {
      await sleep(100)
      left = await sessionsWhere('application_name', name)
    }
    const gone = performance.now() - idleSince
    console.log(
      `[connection-limits] 4 idle connections closed ${Math.round(gone)} ms after the burst (timeout 500 ms)`,
    )
    expect(left).toBe(0)
    expect(gone).toBeGreaterThanOrEqual(400)
    expect(burst.pools()[0]).toMatchObject({ total: 0, idle: 0 })
  })

  it('a request that finds every pooled connection busy is answered 503 overloaded, logged and counted as such', async () => {
    const metrics = new Metrics({ version: 'test', contractVersion: 'test' })
    const { served, logs, store } = await serve({ maxConnections: 1, requestDeadlineMs: 800 }, metrics)
    // A request holding the pool's one connection: the database answers, the pool is full.
    let release = () => {}
    const held = store.read(async (sql) => {
      await sql.query('SELECT 1')
      await new Promise<void>((resolve) => {
        release = resolve
      })
    })
    await sleep(100)
    const started = performance.now()
    const response = await served.inject({ url: PAGE, headers: bearer(key) })
    const waited = performance.now() - started
    release()
    await held
    expect(response.statusCode).toBe(503)
    expect(response.headers['retry-after']).toBe('2')
    expect(response.json()).toEqual({
      error: 'Service Unavailable',
      message: OVERLOADED_MESSAGE,
      code: 'overloaded',
    })
    expect(waited).toBeGreaterThanOrEqual(700)
    const text = await metrics.text()
    expect(text).toMatch(/^openbook_store_errors_total\{kind="pool_exhausted"\} 1$/m)
    expect(text).not.toMatch(/openbook_store_errors_total\{kind="connection"\}/)
    const line = logs.find((l) => l.includes('overloaded'))
    expect(line).toBeDefined()
    expect(JSON.parse(line ?? '{}')).toMatchObject({
      level: 40,
      msg: 'overloaded: no free database connection',
      err: {
        type: 'PoolExhaustedError',
        message: expect.stringMatching(
          /^no free database connection within 0\.\d s: all 1 of the pool in use/,
        ),
      },
    })
    expect(logs.join('')).not.toContain('08006')
    // The pool's connection free again: the next request is served.
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(200)
  })

  it('a crowd on a pool of one: every 503 is overloaded, none an outage, and readiness stays ready', async () => {
    const metrics = new Metrics({ version: 'test', contractVersion: 'test' })
    // The deadline follows the machine's load, and the pool's one connection is open before the
    // crowd comes: what is measured is the crowd, not a connection's start on a busy machine (a
    // connect slower than the deadline is rightly a store that did not answer).
    const deadlineMs = patience(300)
    const { served, store } = await serve({ maxConnections: 1, requestDeadlineMs: deadlineMs }, metrics)
    const readiness = storeReadiness(store, 0)
    expect((await served.inject({ url: PAGE, headers: bearer(key) })).statusCode).toBe(200)
    // A crowd of three deadlines' worth of requests at the pace this machine serves them now: a
    // deadline stretched by the load is not outlasted by a fixed number of requests. The pace is
    // taken ten at a time, a queue far shorter than the deadline even on a loaded machine, so the
    // measurement itself is never turned away.
    const paced = performance.now()
    const warm: number[] = []
    for (let batch = 0; batch < 10; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => served.inject({ url: PAGE, headers: bearer(key) })),
      )
      warm.push(...answers.map((r) => r.statusCode))
    }
    expect(warm).toEqual(warm.map(() => 200))
    const perRequestMs = (performance.now() - paced) / warm.length
    const crowd = Math.max(600, Math.ceil((3 * deadlineMs) / perRequestMs))
    const started = performance.now()
    const responses = await Promise.all(
      Array.from({ length: crowd }, () => served.inject({ url: PAGE, headers: bearer(key) })),
    )
    const took = performance.now() - started
    const statuses = responses.map((r) => r.statusCode)
    const ok = statuses.filter((status) => status === 200).length
    const overloaded = responses.filter((r) => r.statusCode === 503 && r.json().code === 'overloaded').length
    console.log(
      `[connection-limits] ${crowd} requests at once on a pool of 1 (${perRequestMs.toFixed(2)} ms each before), deadline ${deadlineMs} ms: ${ok} × 200, ${overloaded} × 503 overloaded, in ${Math.round(took)} ms`,
    )
    const others = responses.filter((r) => r.statusCode !== 200 && r.json().code !== 'overloaded')
    expect([...new Set(others.map((r) => `${r.statusCode} ${r.body}`))]).toEqual([])
    expect(ok + overloaded).toBe(crowd)
    expect(ok).toBeGreaterThan(0)
    expect(overloaded).toBeGreaterThan(0)
    const text = await metrics.text()
    expect(text).toContain(`openbook_store_errors_total{kind="pool_exhausted"} ${overloaded}`)
    expect(text).not.toMatch(/kind="connection"/)
    expect((await readiness.refresh()).body).toEqual({ status: 'ready', store: 'ok' })
  })

  it('a crowd whose one connection is lost and slow to replace, while the database answered: overload, not an outage', async () => {
    // On a busy machine a connection can go (here its backend is ended) and its replacement take
    // longer than the requests queued behind it can wait. The database answered moments after
    // they came: they are told overloaded, as the crowd is.
    const proxy = TcpProxy.forUrl(database.url)
    await proxy.start()
    const deadlineMs = patience(800)
    const db = openDatabase(
      proxy.urlFor(asRole()),
      { maxConnections: 1 },
      { retryForMs: deadlineMs, roundTripCapMs: deadlineMs, capEveryTransaction: false },
    )
    const REQUEST: TransactionMode = { preamble: '', request: true, readOnly: true }
    try {
      const pid = (
        await db.transaction(REQUEST, (sql) => sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))
      )[0]?.pid
      proxy.delaySessions(deadlineMs * 3)
      let letGo = () => {}
      const first = db.transaction(REQUEST, async (sql) => {
        await sql.query('SELECT 1')
        await new Promise<void>((resolve) => {
          letGo = resolve
        })
        // Answered, and its connection ended under it before the next request gets it.
        await asOwner('SELECT pg_terminate_backend($1)', [pid])
      })
      await sleep(100)
      const crowd = Array.from({ length: 20 }, () =>
        db
          .transaction(REQUEST, (sql) => sql.query('SELECT 1'))
          .then(
            () => 'ok',
            (error: Error) => error.constructor.name,
          ),
      )
      await sleep(100)
      letGo()
      await first
      const outcomes = await Promise.all(crowd)
      // The request that was handed the ended connection (if its end was not heard first) is the
      // only one the store failed.
      const others = outcomes.filter((outcome) => outcome !== 'PoolExhaustedError')
      expect(others.length).toBeLessThanOrEqual(1)
      expect(new Set(others)).toEqual(new Set(others.length ? ['RoundTripTimeout'] : []))
    } finally {
      proxy.delaySessions(0)
      await db.pool.end()
      await proxy.stop()
    }
  })

  it('a database that does not answer is still an outage, not overload', async () => {
    const proxy = TcpProxy.forUrl(database.url)
    await proxy.start()
    try {
      const metrics = new Metrics({ version: 'test', contractVersion: 'test' })
      store = createPostgresStore({
        connectionString: proxy.urlFor(asRole()),
        maxConnections: 1,
        requestDeadlineMs: 800,
      })
      ;({ app } = await buildTestApp(store, { logLevel: 'silent', metrics }))
      proxy.freeze()
      const responses = await Promise.all(
        [0, 1].map(() => (app as FastifyInstance).inject({ url: PAGE, headers: bearer(key) })),
      )
      for (const response of responses) {
        expect(response.statusCode).toBe(503)
        expect(response.json()).toMatchObject({ code: 'service_unavailable', message: STORE_BUSY_MESSAGE })
      }
      expect(await metrics.text()).not.toMatch(/kind="pool_exhausted"/)
    } finally {
      await proxy.stop()
    }
  })

  it("reads the server's, the role's and the database's connection limits, and warns when this instance's pool exceeds what they leave", async () => {
    await connectionLimit(3)
    store = createPostgresStore({ connectionString: asRole(), maxConnections: 10 })
    const limits = await store.admin(readConnectionLimits)
    const [setting] = await asOwner('SHOW max_connections')
    expect(limits[0]?.name).toMatch(
      new RegExp(`^max_connections ${setting?.max_connections} \\(\\d+ reserved for superusers\\)$`),
    )
    expect(limits[1]).toEqual({ name: `role ${role.name}'s CONNECTION LIMIT 3`, limit: 3, inUse: 1 })
    const open = store.pools()[0]?.total ?? 0
    expect(open).toBe(1)
    expect(connectionLimitWarning(limits, { poolSize: 10, extra: 2, open })).toBe(
      `this instance may open 12 connections to DATABASE_URL (DATABASE_POOL_SIZE 10 and 2 of its own for the readiness check and the background fold), ` +
        `but role ${role.name}'s CONNECTION LIMIT 3 leaves 3 free (0 in use by other sessions): under load, ` +
        'requests will wait for connections or be refused them; lower DATABASE_POOL_SIZE or raise the limit ' +
        '(docs/operators/production.md#connections)',
    )
    expect(connectionLimitWarning(limits, { poolSize: 1, extra: 2, open })).toBeUndefined()
  })

  it('the server says it at start, in one warning line', async () => {
    await connectionLimit(3)
    const port = await freePort()
    let server: RunningProcess | undefined
    try {
      server = start('node', ['dist/server.js'], cleanEnv({ DATABASE_URL: asRole(), PORT: String(port) }))
      await server.waitFor(/Server listening/)
      const warnings = server
        .output()
        .split('\n')
        .filter((line) => line.includes('CONNECTION LIMIT'))
      expect(warnings).toHaveLength(1)
      expect(JSON.parse(warnings[0] ?? '{}')).toMatchObject({
        level: 40,
        msg: expect.stringMatching(/^this instance may open 12 connections to DATABASE_URL .* leaves 3 free/),
      })
    } finally {
      server?.child.kill('SIGTERM')
      await server?.exited()
    }
  })
})
