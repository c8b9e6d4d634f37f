import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { get } from 'node:http'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, ROOT, start } from '../helpers/process.js'
import { createTestStore, postgresAvailable, type TestStore } from '../helpers/stores.js'

/** Words that would show a driver, SQL or a stack in a response body. */
const INTERNALS =
  /ECONN|connect|127\.0\.0\.1|postgres|pg_|SELECT|FROM |relation|statement|timeout|canceling|stack|\bat \w|\.ts:|\.js:|node_modules/i

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

  it('database unreachable: 500 with the request id and nothing internal; the error is logged without the key', async () => {
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
        expectInternalError(response)
      }
      const text = logs.join('')
      expect(text).toContain('request failed') // the operator sees the cause...
      expect(text).not.toContain(key) // ...but never the key or the query's values
      expect(text).not.toContain(key.slice(-64))
      expect(text).not.toContain('CANARY_DOWN')
      expect(text.toLowerCase()).not.toContain('authorization')
    } finally {
      await app.close()
      await down.close()
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

  it('statement timeout: the request path runs with 5 s and a slow statement is cut', async () => {
    const [setting] = await store.read((sql) =>
      sql.query<{ statement_timeout: string }>('SHOW statement_timeout'),
    )
    expect(setting?.statement_timeout).toBe('5s')
    const started = Date.now()
    const error = await store.read((sql) => sql.query('SELECT pg_sleep(10)')).catch((e: unknown) => e)
    const elapsed = Date.now() - started
    expect((error as { code?: string }).code).toBe('57014') // query_canceled
    expect(elapsed).toBeLessThan(6_500)
  }, 15_000)

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

  it('SIGTERM while requests are in flight: every one completes with 200, exit 0 within 10 s', async () => {
    if (!existsSync(join(ROOT, 'dist/server.js')))
      execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' })
    const port = await freePort()
    const server = start(
      'node',
      ['dist/server.js'],
      cleanEnv({ DATABASE_URL: url, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' }),
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
      await new Promise((r) => setTimeout(r, 300)) // let every request reach the server
      expect(completed).toBe(0) // all 20 are still in flight when the signal is sent
      const signalled = Date.now()
      server.child.kill('SIGTERM')
      await new Promise((r) => setTimeout(r, 300))
      await admin.query('COMMIT')
      locked = false
      const results = await Promise.all(inFlight)
      const code = await server.exited()
      const seconds = (Date.now() - signalled) / 1000
      console.log(
        `[faults] SIGTERM with ${results.length} requests in flight (${waiting} blocked in the database): ` +
          `statuses ${[...new Set(results.map((r) => r.status))].join(',')}, exit ${code} after ${seconds.toFixed(2)} s`,
      )
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200))
      for (const r of results) expect(JSON.parse(r.body).data).toHaveLength(1)
      expect(code).toBe(0)
      expect(seconds).toBeLessThan(10)
      expect(server.output()).toMatch(/draining requests in flight/)
    } finally {
      if (locked) await admin.query('ROLLBACK').catch(() => {})
      await admin.end()
      if (server.child.exitCode === null) server.child.kill('SIGKILL')
    }
  }, 30_000)
})
