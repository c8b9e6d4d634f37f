import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { bucketFaults } from '../helpers/buckets.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { asOwner } from '../helpers/list-truth.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// A fold is upkeep: the pending changes it moves are read by every page until it runs. So a fold
// that fails must cost the writer nothing: its commit goes through with its changes left pending. And a list whose fold
// fails must not hold the server's background fold off the other lists. The faults are injected
// by a trigger on list_folds, which every fold writes.

const ORG = 'org_faults'
const OTHER = 'org_faults_other'

describe.skipIf(!postgresAvailable())('a fold that fails (PostgreSQL)', () => {
  let database: TestDatabase
  let store: Store
  let writerRole: TestRole
  let app: FastifyInstance
  let key: string
  let written = 0

  const owner = <T extends pg.QueryResultRow>(sql: string, params: unknown[] = []) =>
    asOwner<T>(database.url, sql, params)

  /** Every fold of `org`'s lists, from now on, does `fault` first (`RAISE …` or `PERFORM pg_sleep(…)`). */
  const injectFault = (org: string, fault: string) =>
    owner(`
      CREATE OR REPLACE FUNCTION injected_fold_fault() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.org_id = '${org}' THEN ${fault}; END IF;
        RETURN NEW;
      END $$;
      CREATE OR REPLACE TRIGGER injected_fold_fault BEFORE INSERT OR UPDATE ON list_folds
        FOR EACH ROW EXECUTE FUNCTION injected_fold_fault();`)

  const pending = async (org: string) =>
    (await owner<{ n: number }>('SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1', [org]))[0]?.n

  /**
   * 600 new appointments of `org` in one transaction as the writer: its entries take a turn that
   * is a multiple of 512, so its commit folds (in READ COMMITTED).
   */
  async function writeBookings(org: string, isolation = 'READ COMMITTED'): Promise<string[]> {
    const notices: string[] = []
    const client = new pg.Client({ connectionString: database.url.replace('root@', `${writerRole.name}@`) })
    client.on('notice', (notice) => notices.push(String(notice.message)))
    await client.connect()
    try {
      written += 1
      await client.query(`BEGIN ISOLATION LEVEL ${isolation}`)
      await client.query(
        `INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
         SELECT $1, 'apt_w${written}_' || g, timestamptz '2024-01-01' + g * interval '1 hour',
                timestamptz '2024-01-01' + g * interval '1 hour' + interval '30 minutes', 'confirmed', true, now(), now()
         FROM generate_series(1, 600) g`,
        [org],
      )
      await client.query('COMMIT')
    } finally {
      await client.end()
    }
    return notices
  }

  /** The organization's appointments over HTTP against its table: the total and the last page. */
  async function expectTotalOfTable(): Promise<void> {
    const [truth] = await owner<{ n: number }>(
      'SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active',
      [ORG],
    )
    const response = await app.inject({ url: '/api/public/v1/appointments?limit=1', headers: bearer(key) })
    expect(response.statusCode).toBe(200)
    expect(response.json().pagination.total).toBe(truth?.n)
    expect(await bucketFaults(store)).toEqual([])
  }

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    const org = await createOrg(store, ORG)
    await createOrg(store, OTHER)
    key = (await createKey(store, org)).key
    await owner(
      `INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
       SELECT o, 'apt_' || g, timestamptz '2020-01-01' + g * interval '3 hours',
              timestamptz '2020-01-01' + g * interval '3 hours' + interval '1 hour', 'completed', true, now(), now()
       FROM unnest(array['${ORG}', '${OTHER}']) o, generate_series(1, 3000) g`,
    )
    await owner('SELECT list_fold_all()')
    writerRole = await createTestRole('openbook_writer')
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  }, patience(60_000))

  afterEach(async () => {
    await owner('DROP TRIGGER IF EXISTS injected_fold_fault ON list_folds')
    await owner('SELECT list_fold_all()')
    expect(await pending(ORG)).toBe(0)
    await expectTotalOfTable()
  })

  afterAll(async () => {
    await app?.close()
    await store?.close()
    await database?.drop()
    await writerRole?.drop()
  })

  it("at a writer's commit, raising an error: the commit goes through, its changes pending, with a warning", async () => {
    await injectFault(ORG, `RAISE EXCEPTION 'an injected fault'`)
    const notices = await writeBookings(ORG)
    expect(notices).toEqual([expect.stringMatching(/fold of org_faults\/appointments .*an injected fault/)])
    expect(await pending(ORG)).toBeGreaterThanOrEqual(600)
    await expectTotalOfTable()
  })

  it("in the server's background fold: the other lists are folded, and the call says how many failed", async () => {
    // SERIALIZABLE: the writers' commits fold nothing, the server's fold has both lists to fold.
    await writeBookings(ORG, 'SERIALIZABLE')
    await writeBookings(OTHER, 'SERIALIZABLE')
    expect(await pending(ORG)).toBeGreaterThanOrEqual(600)
    expect(await pending(OTHER)).toBeGreaterThanOrEqual(600)
    await injectFault(ORG, `RAISE EXCEPTION 'an injected fault'`)
    const report = await store.foldLists?.()
    expect(report).toMatchObject({
      folded: 1,
      failed: 1,
      failure: expect.stringMatching(/^org_faults\/appointments: an injected fault/),
    })
    expect(await pending(OTHER)).toBe(0)
    expect(await pending(ORG)).toBeGreaterThanOrEqual(600)
    await expectTotalOfTable()
  })
})
