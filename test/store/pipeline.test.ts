import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { KEY_ORGANIZATION, type Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * Requests that share a connection (DATABASE_PIPELINE_DEPTH): the read-only requests of one turn
 * of the event loop send their messages on one connection, written together, answered in order.
 * Each message is its own transaction with its own settings: an organization's request never
 * sees another's rows, a failing request fails alone, and nothing is left behind.
 */
describe.skipIf(!postgresAvailable())('requests sharing a connection (PostgreSQL)', () => {
  let database: TestDatabase
  const keys: Record<string, string> = {}
  const UNKNOWN = `svc_test_${'0'.repeat(64)}`
  const ONE_MESSAGE = { oneMessage: true }

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    for (const name of ['org_pipe_a', 'org_pipe_b', 'org_pipe_c']) {
      const org = await createOrg(setup, name)
      await addCustomers(
        setup,
        org.id,
        Array.from({ length: 3 }, (_, i) => ({
          id: `cus_${name}_${i}`,
          createdAt: `2025-01-0${i + 1}T00:00:00.000Z`,
        })),
      )
      await addAppointments(setup, org.id, [
        { id: `apt_${name}_1`, start: '2025-02-01T10:00:00.000Z', status: 'confirmed' },
      ])
      keys[name] = (await createKey(setup, org)).key
    }
    await setup.close()
  })
  afterAll(async () => {
    await database?.drop()
  })

  async function withStore<T>(
    depth: number,
    use: (store: Store, app: FastifyInstance) => Promise<T>,
    maxConnections = 1,
  ): Promise<T> {
    const store = createPostgresStore({
      connectionString: database.url,
      maxConnections,
      pipelineDepth: depth,
    })
    try {
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      try {
        return await use(store, app)
      } finally {
        await app.close()
      }
    } finally {
      await store.close()
    }
  }

  it("a crowd of three organizations' requests and unknown keys on one connection: each answered with its own organization's rows", async () => {
    await withStore(4, async (_store, app) => {
      const names = Object.keys(keys)
      const asked = Array.from({ length: 60 }, (_, i) => {
        const name = i % 5 === 4 ? undefined : names[i % names.length]
        const url = i % 2 === 0 ? '/api/public/v1/customers' : '/api/public/v1/appointments?status=confirmed'
        return { name, url }
      })
      const responses = await Promise.all(
        asked.map(({ name, url }) =>
          app.inject({ url, headers: bearer(name ? (keys[name] ?? '') : UNKNOWN) }),
        ),
      )
      for (const [i, response] of responses.entries()) {
        const { name, url } = asked[i] ?? {}
        if (!name) {
          expect(response.statusCode, url).toBe(401)
          continue
        }
        expect(response.statusCode, url).toBe(200)
        const ids = (response.json() as { data: { id: string }[] }).data.map((item) => item.id)
        expect(ids.length).toBeGreaterThan(0)
        for (const id of ids) expect(id).toContain(name)
      }
    })
  })

  it("the requests of one turn go on one connection, their messages written together; requests of a later turn don't join it", async () => {
    await withStore(
      4,
      async (store, app) => {
        const warm = await app.inject({
          url: '/api/public/v1/customers',
          headers: bearer(keys.org_pipe_a ?? ''),
        })
        expect(warm.statusCode).toBe(200)
        const sent: { client: unknown; corked: number }[] = []
        const realQuery = pg.Client.prototype.query
        const recorder = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
          this: pg.Client & { connection: { stream: { writableCorked: number } } },
          ...args: unknown[]
        ) {
          sent.push({ client: this, corked: this.connection.stream.writableCorked })
          return (realQuery as (...a: unknown[]) => unknown).apply(this, args)
        } as never)
        try {
          const together = await Promise.all(
            Array.from({ length: 4 }, () =>
              app.inject({ url: '/api/public/v1/customers', headers: bearer(keys.org_pipe_b ?? '') }),
            ),
          )
          expect(together.map((r) => r.statusCode)).toEqual([200, 200, 200, 200])
          expect(sent).toHaveLength(4)
          expect(new Set(sent.map((s) => s.client)).size).toBe(1)
          for (const each of sent) expect(each.corked).toBeGreaterThan(0)
          // Four more than the depth, in one turn: the fifth waits for the pool's only connection.
          sent.length = 0
          const five = await Promise.all(
            Array.from({ length: 5 }, () =>
              app.inject({ url: '/api/public/v1/customers', headers: bearer(keys.org_pipe_c ?? '') }),
            ),
          )
          expect(five.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200])
          expect(sent).toHaveLength(5)
        } finally {
          recorder.mockRestore()
        }
        expect(store.pools()[0]).toMatchObject({ total: 1 })
      },
      1,
    )
  })

  it('a request that fails on the shared connection fails alone; the others of its turn are answered', async () => {
    await withStore(4, async (store) => {
      const outcomes = await Promise.allSettled([
        store.read((sql) => sql.query<{ n: number }>('SELECT 1 AS n'), ONE_MESSAGE),
        store.read((sql) => sql.query('SELECT 1 / $1::int AS n', [0]), ONE_MESSAGE),
        store.read((sql) => sql.query<{ n: number }>('SELECT 3 AS n'), ONE_MESSAGE),
      ])
      expect(outcomes[0]).toEqual({ status: 'fulfilled', value: [{ n: 1 }] })
      expect(outcomes[1]).toMatchObject({ status: 'rejected', reason: { code: '22012' } })
      expect(outcomes[2]).toEqual({ status: 'fulfilled', value: [{ n: 3 }] })
      // The connection goes on serving.
      expect(await store.read((sql) => sql.query<{ n: number }>('SELECT 4 AS n'), ONE_MESSAGE)).toEqual([
        { n: 4 },
      ])
    })
  })

  it("each message is a transaction of its own, as the reader with the key's organization; nothing is left behind for the connection's next user", async () => {
    await withStore(4, async (store) => {
      const seen = await Promise.all(
        [0, 1, 2].map(() =>
          store.read(
            (sql) =>
              sql.query<{ role: string; readOnly: string; org: string | null }>(
                `SELECT current_user AS role, current_setting('transaction_read_only') AS "readOnly", $1::text AS org`,
                [KEY_ORGANIZATION],
              ),
            ONE_MESSAGE,
          ),
        ),
      )
      // No key was looked up: the organization is NULL, which no row matches.
      for (const [row] of seen) expect(row).toEqual({ role: 'openbook_reader', readOnly: 'on', org: null })
      const [after] = await store.admin((sql) =>
        sql.query<{ role: string; login: string; readOnly: string; org: string | null }>(
          `SELECT current_user AS role, session_user AS login, current_setting('transaction_read_only') AS "readOnly",
             nullif(current_setting('openbook.org_id', true), '') AS org`,
        ),
      )
      expect(after).toEqual({ role: after?.login, login: after?.login, readOnly: 'off', org: null })
    })
  })

  it('a read of several messages (not one message) keeps one transaction on a connection of its own', async () => {
    await withStore(
      4,
      async (store) => {
        const reads = await Promise.all(
          ['org_pipe_a', 'org_pipe_b'].map((org) =>
            store.read(async (sql) => {
              await sql.query("SELECT set_config('openbook.org_id', $1, true)", [org])
              const [row] = await sql.query<{ org: string; pid: number }>(
                "SELECT current_setting('openbook.org_id') AS org, pg_backend_pid() AS pid",
              )
              return row
            }),
          ),
        )
        expect(reads.map((row) => row?.org)).toEqual(['org_pipe_a', 'org_pipe_b'])
        expect(reads[0]?.pid).not.toBe(reads[1]?.pid)
      },
      2,
    )
  })

  it('depth 1: every request on a connection of its own, as without sharing', async () => {
    await withStore(
      1,
      async (store, app) => {
        const responses = await Promise.all(
          Array.from({ length: 4 }, () =>
            app.inject({ url: '/api/public/v1/customers', headers: bearer(keys.org_pipe_a ?? '') }),
          ),
        )
        expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 200])
        expect(store.pools()[0]?.total).toBe(4)
      },
      4,
    )
  })
})
