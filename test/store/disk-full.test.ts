import type { FastifyInstance } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { STORE_UNAVAILABLE_MESSAGE } from '../../src/errors.js'
import { Readiness, storeReadiness } from '../../src/ops/readiness.js'
import { createPostgresStore, isStoreUnreachable } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { openbook } from '../cli/run.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/**
 * PostgreSQL with its disk at 100 %: each new backend fails at start with
 * `FATAL: could not write init file` (XX000), while the server itself stays up. Real PostgreSQL
 * behind a TCP proxy that answers every new session with that FATAL, as the full disk does.
 */
describe.skipIf(!postgresAvailable())(
  'a database whose disk is full (new sessions refused with XX000)',
  () => {
    let database: TestDatabase
    let proxy: TcpProxy
    let store: Store | undefined
    let app: FastifyInstance | undefined
    let key = ''

    const diskFull = async () => {
      // Sessions open before the disk filled are gone too (a restart, an idle timeout): start afresh.
      await proxy.stop()
      proxy.refuseSessions('XX000', 'could not write init file')
      await proxy.start()
    }

    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true })
      const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
      const org = await createOrg(setup, 'org_disk_full')
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
      proxy.stopRefusing()
    })
    afterAll(async () => {
      await proxy?.stop()
      await database?.drop()
    })

    it('the API answers 503 with Retry-After, and serves again once there is room, without a restart', async () => {
      store = createPostgresStore({ connectionString: proxy.urlFor(database.url), maxConnections: 2 })
      ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
      const list = () =>
        (app as FastifyInstance).inject({ url: '/api/public/v1/customers', headers: bearer(key) })
      expect((await list()).statusCode).toBe(200)

      await diskFull()
      const refused = await list()
      expect(refused.statusCode).toBe(503)
      expect(refused.headers['retry-after']).toBe('10')
      expect(refused.json()).toEqual({
        error: 'Service Unavailable',
        message: STORE_UNAVAILABLE_MESSAGE,
        code: 'service_unavailable',
      })

      proxy.stopRefusing()
      const served = await list()
      expect(served.statusCode).toBe(200)
      expect(served.json().data.map((c: { id: string }) => c.id)).toEqual(['cus_1'])
    })

    it('counts as an outage every instance shares (readiness keeps its grace rule for it), not as a fault of this instance', async () => {
      store = createPostgresStore({ connectionString: proxy.urlFor(database.url), maxConnections: 2 })
      await diskFull()
      const error = await store.read((sql) => sql.query('SELECT 1')).catch((e: unknown) => e)
      expect(error).toMatchObject({ code: 'XX000', message: 'could not write init file' })
      // Readiness (ops/readiness.ts) counts what isStoreUnreachable says as the shared outage of its grace rule.
      expect(isStoreUnreachable(error)).toBe(true)
      expect(isStoreUnreachable(Object.assign(new Error('could not open file'), { code: 'XX000' }))).toBe(
        false,
      )
      proxy.stopRefusing()
      expect(await store.read((sql) => sql.query<{ one: number }>('SELECT 1 AS one'))).toEqual([{ one: 1 }])
    })

    it('readiness keeps its grace rule: 200 while the outage is younger than the grace, 503 after, 200 once there is room', async () => {
      store = createPostgresStore({ connectionString: proxy.urlFor(database.url), maxConnections: 2 })
      await diskFull()
      const first = await storeReadiness(store, 10_000).refresh()
      expect(first).toMatchObject({ statusCode: 200, body: { status: 'ready', store: 'unreachable' } })
      expect(String(first.body.reason)).toMatch(/could not write init file/)
      let now = 0
      const probe = (store as Store).probe ?? (store as Store).admin
      const readiness = new Readiness(
        () => probe((sql) => sql.query('SELECT 1')).then(() => undefined),
        10_000,
        () => now,
      )
      expect((await readiness.refresh()).statusCode).toBe(200)
      now = 10_001
      expect(readiness.report().statusCode).toBe(503)
      proxy.stopRefusing()
      expect(await readiness.refresh()).toMatchObject({ statusCode: 200, body: { store: 'ok' } })
    })

    it.each([
      [
        'keys create',
        ['keys', 'create', '--org', 'org_disk_full', '--as', 'owner@org_disk_full.test', '--env', 'test'],
      ],
      ['orgs list', ['orgs', 'list']],
      ['import', ['import', '-']],
    ])('%s says that the database disk is full and what to do', async (_name, args) => {
      await diskFull()
      const result = await openbook(args, { DATABASE_URL: proxy.urlFor(database.url) }, '')
      expect(result.code).toBe(1)
      expect(result.stderr).toBe(
        "openbook: the database's disk is full (XX000, could not write init file); nothing of this command was written: " +
          "free space on its disk (PostgreSQL's data directory, or DATA_DIR for the embedded store) and run it again; " +
          'running servers recover by themselves once there is room\n',
      )
    })
  },
)
