import { get } from 'node:http'
import { connect } from 'node:net'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Sql, Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import {
  createTestRole,
  createTestStore,
  describeEachStore,
  postgresAvailable,
  type TestStore,
} from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/** Words that would show a driver, SQL or a stack in a response body. */
const INTERNALS =
  /ECONN|connect|127\.0\.0\.1|postgres|pg_|SELECT|FROM |relation|statement|timeout|canceling|stack|\bat \w|\.ts:|\.js:|node_modules/i

/** 503 with Retry-After, the request id, and a message of ours: the store could not be reached. */
function expectUnavailable(response: { statusCode: number; body: string; headers: Record<string, unknown> }) {
  expect(response.statusCode).toBe(503)
  const body = JSON.parse(response.body) as Record<string, unknown>
  expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
  expect(body.code).toBe('service_unavailable')
  expect(response.headers['retry-after']).toBe('1')
  expect(String(response.headers['x-request-id'])).toMatch(/^req-/)
  expect(String(body.message)).not.toMatch(INTERNALS)
  expect(String(body.message)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/)
}

function expectInternalError(response: {
  statusCode: number
  body: string
  headers: Record<string, unknown>
}) {
  expect(response.statusCode).toBe(500)
  const body = JSON.parse(response.body) as Record<string, unknown>
  expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
  expect(body.error).toBe('Internal server error')
  expect(body.code).toBe('internal_error')
  const requestId = String(response.headers['x-request-id'])
  expect(requestId).toMatch(/^req-/)
  expect(body.message).toContain(requestId)
  expect(String(body.message).replace(requestId, '')).not.toMatch(INTERNALS)
}

/** One request on its own connection (no client-side pooling), body as text. */
function httpGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers, agent: false }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        body += chunk
      })
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
      response.on('error', reject)
    })
    request.on('error', reject)
  })
}

/** Opens and closes a TCP connection: 'connected', or the error code. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
  })
}

async function adminClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return client
}

describe.skipIf(!postgresAvailable())('faults on postgres', () => {
  let testStore: TestStore
  let store: Store
  let key: string
  let url: string
  let dbName: string

  beforeAll(async () => {
    testStore = await createTestStore('postgres')
    store = testStore.store
    url = testStore.url as string
    dbName = new URL(url).pathname.slice(1)
    const org = await createOrg(store, 'org_fault')
    await addCustomers(store, 'org_fault', [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
    key = (await createKey(store, org)).key
  })
  afterAll(async () => {
    await testStore?.close()
  })

  it('database unreachable: 503 with Retry-After and the request id, nothing internal; the error is logged without the key', async () => {
    const down = createPostgresStore({
      connectionString: 'postgres://root@127.0.0.1:1/none',
      maxConnections: 1,
    })
    const { app, logs } = await buildTestApp(down, { logLevel: 'info' })
    try {
      for (const path of [
        '/api/public/v1/customers?limit=5',
        '/api/public/v1/appointments?customerId=CANARY_DOWN',
      ]) {
        const response = await app.inject({ method: 'GET', url: path, headers: bearer(key) })
        expectUnavailable(response)
      }
      const text = logs.join('')
      expect(text).toContain('ECONNREFUSED') // the operator sees the cause...
      expect(text).not.toContain(key) // ...but never the key or the query's values
      expect(text).not.toContain(key.slice(-64))
      expect(text).not.toContain('CANARY_DOWN')
      expect(text.toLowerCase()).not.toContain('authorization')
    } finally {
      await app.close()
      await down.close()
    }
  })

  it('a login role that may not log in (NOLOGIN) or whose password is refused: 503 with Retry-After, as when unreachable, never 500', async () => {
    const role = await createTestRole('openbook_reader')
    const roleUrl = new URL(url)
    roleUrl.username = role.name
    const refused = createPostgresStore({ connectionString: roleUrl.toString(), maxConnections: 1 })
    const { app, logs } = await buildTestApp(refused, { logLevel: 'info' })
    const customers = () =>
      app.inject({ method: 'GET', url: '/api/public/v1/customers?limit=5', headers: bearer(key) })
    const admin = await adminClient(url)
    try {
      expect((await customers()).statusCode).toBe(200)
      await admin.query(`ALTER ROLE ${role.name} NOLOGIN`)
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${role.name}'`,
      )
      let response = await customers()
      // A pooled connection found dead on the way may cost one attempt; a new one is refused.
      for (let i = 0; i < 3 && response.statusCode !== 503; i++) response = await customers()
      expectUnavailable(response)
      expect(logs.join('')).toMatch(/not permitted to log in/)
      expect(logs.join('')).not.toContain(key)

      // pg_hba.conf here trusts every role, so a wrong password cannot be refused for real: the driver's error as it comes.
      const wrongPassword = Object.assign(
        new Error(`password authentication failed for user "${role.name}"`),
        {
          code: '28P01',
        },
      )
      const withPassword: Store = { ...store, read: () => Promise.reject(wrongPassword) }
      const second = await buildTestApp(withPassword, { logLevel: 'silent' })
      try {
        expectUnavailable(
          await second.app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: bearer(key) }),
        )
      } finally {
        await second.app.close()
      }
    } finally {
      await admin.end()
      await app.close()
      await refused.close()
      await role.drop()
    }
  })

  it('terminated backends: the app recovers without a restart (at most one 500 on the way)', async () => {
    const victimUrl = new URL(url)
    victimUrl.searchParams.set('application_name', 'openbook_victim')
    const idleErrors: Error[] = []
    const victim = createPostgresStore({
      connectionString: victimUrl.toString(),
      maxConnections: 4,
      onIdleError: (error) => idleErrors.push(error),
    })
    const { app } = await buildTestApp(victim, { logLevel: 'silent' })
    const admin = await adminClient(url)
    try {
      const get = () => app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: bearer(key) })
      await Promise.all([get(), get(), get()]).then((all) => {
        for (const r of all) expect(r.statusCode).toBe(200)
      })
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name = 'openbook_victim'`,
        [dbName],
      )
      expect(killed.rowCount).toBeGreaterThan(0)
      const statuses: number[] = []
      for (let i = 0; i < 8; i++) {
        const response = await get()
        statuses.push(response.statusCode)
        if (response.statusCode !== 200) expectInternalError(response)
      }
      console.log(
        `[faults] after pg_terminate_backend of ${killed.rowCount} backends: ${statuses.join(' ')} ` +
          `(${idleErrors.length} idle-connection errors reported)`,
      )
      expect(statuses.filter((s) => s !== 200).length).toBeLessThanOrEqual(1)
      expect(statuses.slice(-4)).toEqual([200, 200, 200, 200])
    } finally {
      await admin.end()
      await app.close()
      await victim.close()
    }
  })

  it('a pooled connection that died while idle is replaced before the work runs; a failure inside the work is not retried', async () => {
    const victimUrl = new URL(url)
    victimUrl.searchParams.set('application_name', 'openbook_retry')
    const retrying = createPostgresStore({
      connectionString: victimUrl.toString(),
      maxConnections: 3,
      onIdleError: () => {},
    })
    const admin = await adminClient(url)
    const terminate = () =>
      admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1 AND application_name = 'openbook_retry'`,
        [dbName],
      )
    try {
      for (let round = 0; round < 5; round++) {
        // Three connections in the pool, idle, each of which has served a transaction...
        await Promise.all(
          Array.from({ length: 3 }, () => retrying.read((sql) => sql.query('SELECT pg_sleep(0.02)'))),
        )
        // ...all killed at once; whether or not their errors have been read yet, every kind of
        // transaction ends on a live connection, and no statement of it is answered twice. The
        // request path's BEGIN travels with its first statement, so its work may be started again
        // when that first round trip finds the connection dead; the others begin before the work.
        expect((await terminate()).rowCount).toBe(3)
        let calls = 0
        let answered = 0
        const work = async (sql: Sql) => {
          calls++
          const rows = await sql.query<{ one: number }>('SELECT 1 AS one')
          answered++
          return rows
        }
        expect(await retrying.read(work)).toEqual([{ one: 1 }])
        expect(answered).toBe(1)
        calls = 0
        expect(await retrying.asReader(work)).toEqual([{ one: 1 }])
        expect(await retrying.admin(work)).toEqual([{ one: 1 }])
        expect(calls).toBe(2)
        expect(answered).toBe(3)
      }
      // The connection dies inside the work: the error is the caller's, the work is not run again.
      let calls = 0
      const error = await retrying
        .admin(async (sql) => {
          calls++
          await sql.query('SELECT pg_terminate_backend(pg_backend_pid())')
        })
        .catch((e: unknown) => e)
      expect((error as { code?: string }).code).toBe('57P01')
      expect(calls).toBe(1)
      // A statement error on a live connection is not retried either.
      const refused = await retrying
        .read(async (sql) => {
          calls++
          await sql.query('SELECT 1/0')
        })
        .catch((e: unknown) => e)
      expect((refused as { code?: string }).code).toBe('22012')
      expect(calls).toBe(2)
      expect(await retrying.read((sql) => sql.query('SELECT 1 AS one'))).toEqual([{ one: 1 }])
    } finally {
      await admin.end()
      await retrying.close()
    }
  })

  it('statement timeout: every request-path transaction has 5 s, and a slow statement is cut at its bound', async () => {
    // The production value (every statement of the request path is checked in isolation.test.ts).
    const [setting] = await store.read((sql) =>
      sql.query<{ statement_timeout: string }>('SHOW statement_timeout'),
    )
    expect(setting?.statement_timeout).toBe('5s')
    // No JIT compilation on the request path: it cost 40 ms on a 3 ms page.
    const [jit] = await store.read((sql) => sql.query<{ jit: string }>('SHOW jit'))
    expect(jit?.jit).toBe('off')
    // The cut, with a 500 ms bound so that the test stays short; the last-used write path too.
    const quick = createPostgresStore({ connectionString: url, maxConnections: 1, statementTimeoutMs: 500 })
    try {
      for (const path of ['read', 'asReader'] as const) {
        const started = Date.now()
        const error = await quick[path]((sql) => sql.query('SELECT pg_sleep(10)')).catch((e: unknown) => e)
        const elapsed = Date.now() - started
        expect((error as { code?: string }).code, path).toBe('57014') // query_canceled
        expect(elapsed, path).toBeLessThan(2_000)
      }
    } finally {
      await quick.close()
    }
  })

  it('PostgreSQL goes away and comes back: 503s without internals once the request deadline is spent, 200 again without a restart', async () => {
    const outage = TcpProxy.forUrl(url)
    await outage.start()
    const idleErrors: Error[] = []
    const relayed = createPostgresStore({
      connectionString: outage.urlFor(url),
      maxConnections: 4,
      requestDeadlineMs: 1_500,
      onIdleError: (error) => idleErrors.push(error),
    })
    const { app, logs } = await buildTestApp(relayed, { logLevel: 'info' })
    const get = () =>
      app.inject({ method: 'GET', url: '/api/public/v1/customers?limit=5', headers: bearer(key) })
    try {
      const before = await Promise.all([get(), get(), get()])
      expect(before.map((r) => r.statusCode)).toEqual([200, 200, 200])

      await outage.stop()
      const during: number[] = []
      const slowest = { ms: 0 }
      for (let i = 0; i < 5; i++) {
        const started = Date.now()
        const response = await get()
        slowest.ms = Math.max(slowest.ms, Date.now() - started)
        during.push(response.statusCode)
        expectUnavailable(response)
      }

      await outage.start()
      const after: number[] = []
      for (let i = 0; i < 5; i++) after.push((await get()).statusCode)
      console.log(
        `[faults] PostgreSQL down: ${during.join(' ')} (slowest ${slowest.ms} ms); back: ${after.join(' ')} ` +
          `(${idleErrors.length} idle-connection errors reported, process alive)`,
      )
      expect(during).toEqual([503, 503, 503, 503, 503])
      // Refused connections are tried again until the request deadline (1.5 s here, 8 s by default).
      expect(slowest.ms).toBeLessThan(6_000)
      expect(after.filter((s) => s !== 200).length).toBeLessThanOrEqual(1)
      expect(after.slice(-3)).toEqual([200, 200, 200])
      const text = logs.join('')
      expect(text).toContain('store busy')
      expect(text).not.toContain(key.slice(-64))
    } finally {
      await app.close()
      await relayed.close()
      await outage.stop()
    }
  })

  it('a request stuck behind a lock is cut by the statement timeout and answered 500, nothing internal', async () => {
    const quick = createPostgresStore({ connectionString: url, maxConnections: 2, statementTimeoutMs: 300 })
    const { app } = await buildTestApp(quick, { logLevel: 'silent' })
    const admin = await adminClient(url)
    try {
      await admin.query('BEGIN; LOCK TABLE customers IN ACCESS EXCLUSIVE MODE')
      const started = Date.now()
      const response = await app.inject({
        method: 'GET',
        url: '/api/public/v1/customers',
        headers: bearer(key),
      })
      expect(Date.now() - started).toBeLessThan(3_000)
      expectInternalError(response)
      await admin.query('ROLLBACK')
      const after = await app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: bearer(key) })
      expect(after.statusCode).toBe(200)
    } finally {
      await admin.end()
      await app.close()
      await quick.close()
    }
  })

  it(
    'SIGTERM while requests are in flight: every one completes with 200, new connections are refused, exit 0 within 10 s',
    async () => {
      const port = await freePort()
      const opsPort = await freePort()
      // The build of the current sources (the global set-up makes it): without tsx's compiling,
      // which on a busy machine took seconds of the drain's grace.
      const server = start(
        'node',
        ['dist/server.js'],
        cleanEnv({
          DATABASE_URL: url,
          PORT: String(port),
          OPS_PORT: String(opsPort),
          HOST: '127.0.0.1',
          LOG_LEVEL: 'info',
        }),
      )
      const admin = await adminClient(url)
      let locked = false
      try {
        await server.waitFor(/Server listening/)
        const base = `http://127.0.0.1:${port}/api/public/v1/customers`
        const ok = await httpGet(base, bearer(key))
        expect(ok.status).toBe(200)

        // Hold the table so that the requests are really in flight when the signal arrives.
        await admin.query('BEGIN; LOCK TABLE customers IN ACCESS EXCLUSIVE MODE')
        locked = true
        let completed = 0
        const inFlight = Array.from({ length: 20 }, () =>
          httpGet(base, bearer(key)).then((result) => {
            completed++
            return result
          }),
        )
        const deadline = Date.now() + 3_000
        let waiting = 0
        while (Date.now() < deadline) {
          const result = await admin.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
            [new URL(url).pathname.slice(1)],
          )
          waiting = result.rows[0].n
          if (waiting >= 1) break
          await new Promise((r) => setTimeout(r, 50))
        }
        expect(waiting).toBeGreaterThanOrEqual(1)
        // Every request received by the server, not only sent: one still in the listening socket's
        // queue when the server closes it would be reset, on a busy machine.
        let received = 0
        const until = Date.now() + patience(5_000)
        while (received < 20 && Date.now() < until) {
          const metrics = await httpGet(`http://127.0.0.1:${opsPort}/metrics`, {})
          received = Number(/^openbook_http_requests_in_flight (\d+)$/m.exec(metrics.body)?.[1] ?? 0)
          if (received < 20) await new Promise((r) => setTimeout(r, 20))
        }
        expect(received).toBe(20)
        expect(completed).toBe(0) // all 20 are still in flight when the signal is sent
        const signalled = Date.now()
        server.child.kill('SIGTERM')
        // While the 20 are still held in the database, a new connection is refused.
        let refusedAfter: number | undefined
        while (refusedAfter === undefined && Date.now() - signalled < 2_000) {
          if ((await tryConnect(port)) === 'ECONNREFUSED') refusedAfter = Date.now() - signalled
          else await new Promise((r) => setTimeout(r, 20))
        }
        expect(refusedAfter).toBeDefined()
        expect(completed).toBe(0)
        await admin.query('COMMIT')
        locked = false
        const results = await Promise.all(inFlight)
        const code = await server.exited()
        const seconds = (Date.now() - signalled) / 1000
        console.log(
          `[faults] SIGTERM with ${results.length} requests in flight (${waiting} blocked in the database): ` +
            `new connections refused after ${refusedAfter} ms, ` +
            `statuses ${[...new Set(results.map((r) => r.status))].join(',')}, exit ${code} after ${seconds.toFixed(2)} s`,
        )
        expect(results.map((r) => r.status)).toEqual(Array(20).fill(200))
        for (const r of results) expect(JSON.parse(r.body).data).toHaveLength(1)
        // 0: the drain ended within its grace (10 s); past it, close-with-grace exits with 1.
        expect(code).toBe(0)
        const output = server.output()
        expect(output).toMatch(/draining requests in flight/)
        // Given a privileged DATABASE_URL (root here), it said so once at start.
        expect(
          output.match(/privileged role; requests run under SET LOCAL ROLE openbook_reader/g),
        ).toHaveLength(1)
      } finally {
        if (locked) await admin.query('ROLLBACK').catch(() => {})
        await admin.end()
        if (server.child.exitCode === null) server.child.kill('SIGKILL')
      }
    },
    patience(30_000),
  )
})

describeEachStore('a driver error on %s', (testStore) => {
  const CANARY = 'CANARYVALUE7741-2024-01-01T00:00:00+99:00'
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_driver')
    key = (await createKey(testStore.store, org)).key
  })

  it('that quotes a value: 500 without internals; the log keeps the SQLSTATE, not the value, SQL or parameters', async () => {
    // As if a query value got past validation and the database refused it: a real driver error
    // (node-postgres or PGlite, with whatever fields each attaches) raised on the request path.
    const store: Store = {
      ...testStore.store,
      read: (work) =>
        testStore.store.read(async (sql) => {
          await sql.query('SELECT $1::timestamptz AS refused', [CANARY])
          return work(sql)
        }),
    }
    const { app, logs } = await buildTestApp(store, { logLevel: 'info' })
    try {
      const response = await app.inject({
        method: 'GET',
        url: '/api/public/v1/customers',
        headers: bearer(key),
      })
      expectInternalError(response)
      expect(response.body).not.toContain('CANARYVALUE7741')
      const text = logs.join('\n')
      const failure = logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'request failed')
      expect(failure?.err).toMatchObject({ code: '22007', message: expect.stringContaining('timestamp') })
      expect(text).not.toContain('CANARYVALUE7741')
      expect(text).not.toMatch(/SELECT|\$1|params|unnamed portal/)
      expect(text).not.toContain(key.slice(-64))
    } finally {
      await app.close()
    }
  })
})
