import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { PreparedStatements } from '../../src/config.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { KEY_ORGANIZATION, type Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * No re-planning in the steady state: with prepared statements on (the default), each request-path
 * statement is parsed and planned once per connection and then runs its generic plan; pooler (for
 * PgBouncer in transaction mode), each page statement is prepared once per server connection,
 * which the database checks; off, nothing is left prepared on the connection.
 * Round trips: on and pooler, the settings, the key lookup and the page go in one message, which
 * is its own transaction (no BEGIN, no COMMIT); off, the page waits for the lookup's answer.
 */
describe.skipIf(!postgresAvailable())('prepared statements on the request path (PostgreSQL)', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  /**
   * A store on one connection, an organization `name` with a customer and an appointment, its
   * key and the app on that store: `use` runs with them, then all is closed.
   */
  async function withOneConnection<T>(
    preparedStatements: PreparedStatements,
    name: string,
    use: (store: Store, app: FastifyInstance, key: string) => Promise<T>,
  ): Promise<T> {
    const store = createPostgresStore({
      connectionString: database.url,
      maxConnections: 1,
      preparedStatements,
    })
    try {
      const org = await createOrg(store, name)
      await addCustomers(store, org.id, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
      // Pages with rows: an empty page asks for its total on its own.
      await addAppointments(store, org.id, [
        { id: 'apt_1', start: '2025-01-02T00:00:00.000Z', status: 'completed' },
      ])
      const { key } = await createKey(store, org)
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      try {
        return await use(store, app, key)
      } finally {
        await app.close()
      }
    } finally {
      await store.close()
    }
  }

  /**
   * 30 requests of each list (the appointments past their end, so that their total runs alone
   * each time) on one connection, then the connection's prepared statements.
   */
  function run(preparedStatements: PreparedStatements) {
    return withOneConnection(
      preparedStatements,
      `org_prep_${preparedStatements}`,
      async (store, app, key) => {
        for (let i = 0; i < 30; i++) {
          for (const url of [
            '/api/public/v1/customers?limit=5',
            `/api/public/v1/appointments?offset=${i + 1}`,
          ]) {
            const response = await app.inject({ url, headers: bearer(key) })
            expect(response.statusCode).toBe(200)
          }
        }
        return store.admin((sql) =>
          sql.query<{ statement: string; generic: number; custom: number }>(
            `SELECT statement, generic_plans::int AS generic, custom_plans::int AS custom
           FROM pg_prepared_statements WHERE name LIKE 'openbook\\_%' ORDER BY statement`,
          ),
        )
      },
    )
  }

  it.each(['on', 'pooler'] as const)(
    '%s: each statement is planned once, then every execution uses its generic plan',
    async (mode) => {
      const prepared = await run(mode)
      // on: both pages and the total asked alone past the end; pooler: both pages.
      expect(prepared.length).toBeGreaterThanOrEqual(2)
      for (const statement of prepared) {
        expect(statement.custom, statement.statement).toBe(0)
        expect(statement.generic, statement.statement).toBeGreaterThanOrEqual(30)
      }
    },
  )

  it('off: no statement is left prepared on the connection', async () => {
    expect(await run('off')).toEqual([])
  })

  /**
   * The messages node-postgres sends for one request of each list, after a first request of each,
   * and the connection's prepared statements by name.
   */
  function messagesPerRequest(preparedStatements: PreparedStatements) {
    return withOneConnection(
      preparedStatements,
      `org_trips_${preparedStatements}`,
      async (store, app, key) => {
        const urls = ['/api/public/v1/customers?limit=5', '/api/public/v1/appointments?status=completed']
        for (const url of urls) await app.inject({ url, headers: bearer(key) })
        const sent = vi.spyOn(pg.Client.prototype, 'query')
        try {
          const requests: string[][] = []
          for (const url of urls) {
            sent.mockClear()
            const response = await app.inject({ url, headers: bearer(key) })
            expect(response.statusCode).toBe(200)
            requests.push(
              sent.mock.calls.map(([query]) =>
                typeof query === 'string' ? query : String((query as { text?: unknown }).text),
              ),
            )
          }
          const statements = await store.admin((sql) =>
            sql.query<{ name: string; statement: string }>(
              'SELECT name, statement FROM pg_prepared_statements',
            ),
          )
          return { requests, prepared: new Map(statements.map((s) => [s.name, s.statement])) }
        } finally {
          sent.mockRestore()
        }
      },
    )
  }

  /** The settings every request-path transaction opens with, in this order first. */
  const SETTINGS =
    "SELECT concat\\(set_config\\('transaction_read_only', 'on', true\\), set_config\\('role', 'openbook_reader', true\\)[^;]*"
  const LOOKUP =
    "SELECT set_config\\('openbook\\.org_id', CASE a\\.state WHEN 'active' THEN a\\.org_id ELSE '' END, true\\)[^;]*FROM openbook_key_lookup"
  const PAGE_EXECUTE = "\\(current_setting\\('openbook\\.org_id', true\\)[^;]*\\)"

  it('on: a request is one message of EXECUTEs (settings, key lookup, page), its own transaction, each statement prepared once per connection', async () => {
    const { requests, prepared } = await messagesPerRequest('on')
    expect(requests.map((messages) => messages.length)).toEqual([1, 1])
    const name = '(openbook_e_[0-9a-f]{24})'
    for (const [message] of requests) {
      const match = new RegExp(
        `^EXECUTE ${name}; EXECUTE ${name}\\('[0-9a-f]{64}'\\); EXECUTE ${name}${PAGE_EXECUTE}$`,
      ).exec(message ?? '')
      expect(match, message).not.toBeNull()
      const [, settings = '', lookup = '', page = ''] = match ?? []
      // In this order: the read-only reader role and the other settings, the key found (and the
      // organization set) before the page's EXECUTE reads a row, which the database binds to it.
      // pg_prepared_statements holds the whole message each was prepared in.
      expect(prepared.get(settings)).toMatch(new RegExp(`PREPARE ${settings} AS ${SETTINGS}; `))
      expect(prepared.get(lookup)).toMatch(new RegExp(`PREPARE ${lookup} AS ${LOOKUP}\\(\\$1::text\\) a; `))
      expect(prepared.get(page)).toMatch(new RegExp(`PREPARE ${page} AS WITH v AS MATERIALIZED `))
    }
  })

  it('pooler: a request is one message (settings, the page prepared on its server connection, key lookup, page), its own transaction', async () => {
    const { requests } = await messagesPerRequest('pooler')
    expect(requests.map((messages) => messages.length)).toEqual([1, 1])
    for (const [message] of requests) {
      // The statement prepared (unless it is there already; preparing reads no row) is the one
      // executed; the settings and the key lookup go as text, the key's hash written in.
      expect(message).toMatch(
        new RegExp(
          `^${SETTINGS}; ` +
            "SELECT openbook_prepare\\('(openbook_e_[0-9a-f]{24})', 'WITH v AS MATERIALIZED [\\s\\S]*'\\); " +
            `${LOOKUP}\\('[0-9a-f]{64}'::text\\) a; ` +
            `EXECUTE \\1${PAGE_EXECUTE}$`,
        ),
      )
    }
  })

  it.each(['on', 'pooler'] as const)(
    '%s: the request leaves no transaction, role or setting behind for the next user of its connection',
    async (mode) => {
      await withOneConnection(mode, `org_after_${mode}`, async (store, app, key) => {
        for (const url of ['/api/public/v1/customers', '/api/public/v1/appointments']) {
          const response = await app.inject({ url, headers: bearer(key) })
          expect(response.statusCode).toBe(200)
          // The same (only) connection: its own transaction, as the login role, read-write.
          const [state] = await store.admin((sql) =>
            sql.query<{ role: string; login: string; readOnly: string; org: string | null }>(
              `SELECT current_user AS role, session_user AS login,
                 current_setting('transaction_read_only') AS "readOnly",
                 nullif(current_setting('openbook.org_id', true), '') AS org`,
            ),
          )
          expect(state).toEqual({
            role: state?.login,
            login: state?.login,
            readOnly: 'off',
            org: null,
          })
        }
      })
    },
  )

  it.each(['on', 'pooler'] as const)(
    '%s: a statement after the message that was its own transaction opens a new one, with the settings',
    async (mode) => {
      await withOneConnection(mode, `org_again_${mode}`, async (store) => {
        const [first, after] = await store.read(async (sql) => {
          const page = await sql.query<{ role: string }>('SELECT $1::text AS org, current_user AS role', [
            KEY_ORGANIZATION,
          ])
          const next = await sql.query<{ role: string }>(
            'SELECT current_user AS role, current_setting(\'transaction_read_only\') AS "readOnly"',
          )
          return [page[0], next[0]]
        })
        expect(first?.role).toBe('openbook_reader')
        expect(after).toEqual({ role: 'openbook_reader', readOnly: 'on' })
      })
    },
  )

  it('off: the page waits for the key lookup (three messages)', async () => {
    const { requests } = await messagesPerRequest('off')
    expect(requests.map((messages) => messages.length)).toEqual([3, 3])
  })

  /**
   * A pooler hands a server connection from client to client, and may reset it between them. With
   * one connection, the store's own admin transactions stand in for the other clients.
   */
  it('pooler: a page is served whatever happened to the server connection in between', async () => {
    await withOneConnection('pooler', 'org_pooler_resets', async (store, app, key) => {
      const sent = vi.spyOn(pg.Client.prototype, 'query')
      const page = async () => {
        sent.mockClear()
        const response = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
        expect(response.statusCode).toBe(200)
        expect(response.json().data.map((c: { id: string }) => c.id)).toEqual(['cus_1'])
        return sent.mock.calls.map(([query]) => String(typeof query === 'string' ? query : ''))
      }
      const statements = () =>
        store.admin((sql) =>
          sql.query<{ name: string }>(
            `SELECT name FROM pg_prepared_statements WHERE name LIKE 'openbook\\_e\\_%'`,
          ),
        )
      try {
        await page()
        expect(await statements()).toHaveLength(1)
        // Its settings reset, its statements kept (a rolled-back transaction undoes the setting
        // that marks them prepared, not the PREPARE): found in pg_prepared_statements, not
        // prepared twice, which PostgreSQL would refuse.
        await store.admin((sql) => sql.exec('RESET ALL'))
        await page()
        // Both reset, as DISCARD ALL (PgBouncer's server_reset_query) does: prepared again.
        await store.admin((sql) => sql.exec('RESET ALL; DEALLOCATE ALL'))
        expect(await statements()).toHaveLength(0)
        await page()
        expect(await statements()).toHaveLength(1)
        // The statements dropped alone, the setting still marking them prepared: the EXECUTE
        // fails, and the request is run again with the statements checked in the catalogue.
        await store.admin((sql) => sql.exec('DEALLOCATE ALL'))
        const messages = await page()
        expect(messages.filter((m) => m.includes('openbook_prepare('))).toHaveLength(2)
        const rechecked =
          /^SELECT concat\(set_config[\s\S]*SELECT openbook_prepare\('openbook_e_[0-9a-f]+', '[\s\S]*', true\); SELECT set_config\('openbook\.org_id'/
        expect(messages.filter((m) => rechecked.test(m))).toHaveLength(1)
        expect(await statements()).toHaveLength(1)
      } finally {
        sent.mockRestore()
      }
    })
  })

  it('values written into the one-trip message select exactly what they name', async () => {
    const store = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    try {
      const org = await createOrg(store, 'org_quotes')
      const awkward = ["cus_o'brien", 'cus_back\\slash', "x'); DELETE FROM customers; --", 'cus_$1']
      await addCustomers(
        store,
        org.id,
        awkward.map((id, i) => ({ id, createdAt: `2025-01-0${i + 1}T00:00:00.000Z` })),
      )
      await addAppointments(
        store,
        org.id,
        awkward.map((customerId, i) => ({
          id: `apt_${i}`,
          start: `2025-02-0${i + 1}T00:00:00.000Z`,
          customerId,
        })),
      )
      const { key } = await createKey(store, org)
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      try {
        for (const [i, customerId] of awkward.entries()) {
          const response = await app.inject({
            url: '/api/public/v1/appointments',
            query: { customerId },
            headers: bearer(key),
          })
          expect(response.statusCode).toBe(200)
          expect(response.json().data.map((a: { id: string }) => a.id)).toEqual([`apt_${i}`])
        }
        const all = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
        expect(all.json().pagination.total).toBe(awkward.length)
      } finally {
        await app.close()
      }
    } finally {
      await store.close()
    }
  })
})

describe.skipIf(!postgresAvailable())('a statement held to go with the next one (PostgreSQL)', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  it('is still sent when nothing follows it and its caller awaits it', async () => {
    const store = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    try {
      const rows = await store.read(async (sql) => {
        if (!sql.sendWithNext) throw new Error('the request path with prepared statements holds statements')
        return sql.sendWithNext<{ n: number }>('SELECT 41 + 1 AS n')
      })
      expect(rows).toEqual([{ n: 42 }])
    } finally {
      await store.close()
    }
  })
})

describe.skipIf(!postgresAvailable())('a held statement with parameters (PostgreSQL)', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  it.each(['on', 'pooler'] as const)(
    '%s: is answered with its own rows, alone or before the next statement, prepared once (on) or written in (pooler)',
    async (preparedStatements) => {
      const store = createPostgresStore({
        connectionString: database.url,
        maxConnections: 1,
        preparedStatements,
      })
      const sent = vi.spyOn(pg.Client.prototype, 'query')
      try {
        for (let i = 0; i < 2; i++) {
          const [alone, together] = await store.read(async (sql) => {
            if (!sql.sendWithNext)
              throw new Error('the request path with prepared statements holds statements')
            const first = await sql.sendWithNext<{ n: number }>('SELECT $1::int + 1 AS n', [41])
            const held = sql.sendWithNext<{ s: string }>("SELECT $1::text || '!' AS s", ["o'k"])
            const next = await sql.query<{ n: number }>('SELECT 7 AS n')
            return [first, [await held, next]]
          })
          expect(alone).toEqual([{ n: 42 }])
          expect(together).toEqual([[{ s: "o'k!" }], [{ n: 7 }]])
        }
        const texts = sent.mock.calls.map(([query]) => String(typeof query === 'string' ? query : ''))
        const prepares = texts.join('\n').match(/PREPARE openbook_e_/g) ?? []
        // on: the settings and the two statements, each once for the two transactions.
        expect(prepares).toHaveLength(preparedStatements === 'on' ? 3 : 0)
        if (preparedStatements === 'pooler')
          expect(texts.join('\n')).toContain("SELECT 'o''k'::text || '!' AS s")
      } finally {
        sent.mockRestore()
        await store.close()
      }
    },
  )
})
