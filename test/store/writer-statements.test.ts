import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { bucketFaults } from '../helpers/buckets.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { asOwner, expectPagesOfTables } from '../helpers/list-truth.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// The salon software writes with whatever SQL its ORM or its own code makes: not only one-row
// INSERT, UPDATE and DELETE, but MERGE, upserts, writable CTEs, COPY, joins, a row's key or its
// organization changed. Each form here runs as a member of openbook_writer, in READ COMMITTED
// (where its commit may fold) and in SERIALIZABLE (where its changes stay pending), and every
// list is then held to the tables: the buckets with their pending changes, each list's total
// over HTTP for both organizations, a deep page, and an ETag that moved.

const ORG = 'org_stmts'
/** The organization rows are moved to and from. */
const OTHER = 'org_stmts_other'
const STATUSES = ['scheduled', 'confirmed', 'completed'] as const
const APPOINTMENT_COLUMNS =
  'org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at'
const CUSTOMER_COLUMNS = 'org_id, id, is_active, created_at, updated_at'

/** An appointment's values as SQL, `n` spreading its time, staff member and status. */
const appointment = (org: string, id: string, n: number, active = true) =>
  `('${org}', '${id}', 'stf_${1 + (n % 4)}', timestamptz '2021-03-01' + ${n} * interval '7 minutes',
    timestamptz '2021-03-01' + ${n} * interval '7 minutes' + interval '1 hour',
    '${STATUSES[n % 3]}', ${active}, now(), now())`

interface Form {
  readonly name: string
  /** The lists it changes for `ORG`, whose ETag must move. */
  readonly lists: readonly ('customers' | 'appointments')[]
  /**
   * Writes it as the writer, in the open transaction. `round` (1, 2, …, one a test) tells one run's
   * rows from another's: each run changes rows that the runs before it left in place.
   */
  readonly write: (client: pg.Client, round: number) => Promise<unknown>
  /** Written by a member of openbook_writer that also has BYPASSRLS. */
  readonly bypassRls?: boolean
}

/** 300 appointments of `ORG`, a seventh of them inactive, by COPY into `table`. */
async function copyAppointments(client: pg.Client, table: string, round: number): Promise<void> {
  const lines = Array.from({ length: 300 }, (_, i) => {
    const at = new Date(Date.UTC(2021, 2, 1) + (i * 77 + round) * 60_000)
    const end = new Date(at.getTime() + 3_600_000)
    const iso = at.toISOString()
    return [
      ORG,
      `apt_copy${round}_${i}`,
      `stf_${1 + (i % 4)}`,
      iso,
      end.toISOString(),
      STATUSES[i % 3],
      i % 7 !== 0,
      iso,
      iso,
    ]
  })
  await pipeline(
    Readable.from(lines.map((line) => `${line.join('\t')}\n`)),
    client.query(copyFrom(`COPY ${table} (${APPOINTMENT_COLUMNS}) FROM STDIN`)),
  )
}

const FORMS: readonly Form[] = [
  {
    name: 'MERGE that inserts, updates, deactivates and deletes in one statement',
    lists: ['appointments'],
    write: (client, round) =>
      client.query(`
        MERGE INTO appointments a
        USING (SELECT '${ORG}' AS org_id, 'apt_' || g AS id, g FROM generate_series(1, 40) g
               UNION ALL SELECT '${ORG}', 'apt_m${round}_' || g, 3000 + g FROM generate_series(1, 15) g) s
        ON a.org_id = s.org_id AND a.id = s.id
        WHEN MATCHED AND s.g % 4 = 0 THEN DELETE
        WHEN MATCHED AND s.g % 4 = 1 THEN UPDATE SET status = 'confirmed', start_at = a.start_at + interval '3 days',
                                                    end_at = a.end_at + interval '3 days'
        WHEN MATCHED AND s.g % 4 = 2 THEN UPDATE SET is_active = NOT a.is_active
        WHEN MATCHED THEN UPDATE SET note = 'merged'
        WHEN NOT MATCHED THEN INSERT (${APPOINTMENT_COLUMNS})
          VALUES (s.org_id, s.id, 'stf_2', timestamptz '2022-01-01' + s.g * interval '1 hour',
                  timestamptz '2022-01-01' + s.g * interval '1 hour' + interval '1 hour', 'scheduled', true, now(), now())`),
  },
  {
    name: 'MERGE of customers',
    lists: ['customers'],
    write: (client, round) =>
      client.query(`
        MERGE INTO customers c
        USING (SELECT '${ORG}' AS org_id, 'cus_' || g AS id, g FROM generate_series(100, 130) g
               UNION ALL SELECT '${ORG}', 'cus_m${round}_' || g, g FROM generate_series(1, 12) g) s
        ON c.org_id = s.org_id AND c.id = s.id
        WHEN MATCHED AND s.g % 3 = 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET is_active = NOT c.is_active, created_at = c.created_at - interval '1 year'
        WHEN NOT MATCHED THEN INSERT (${CUSTOMER_COLUMNS})
          VALUES (s.org_id, s.id, true, timestamptz '2023-06-01' + s.g * interval '1 day', now())`),
  },
  {
    name: 'INSERT … ON CONFLICT DO UPDATE, new rows and existing ones in one statement',
    lists: ['appointments'],
    write: (client, round) =>
      client.query(`
        INSERT INTO appointments (${APPOINTMENT_COLUMNS}) VALUES
          ${[200, 201, 202, 203, 204].map((n) => appointment(ORG, `apt_${n}`, n + 1)).join(',\n')},
          ${[1, 2, 3].map((n) => appointment(ORG, `apt_u${round}_${n}`, 5000 + n)).join(',\n')}
        ON CONFLICT (org_id, id) DO UPDATE SET status = excluded.status, staff_id = excluded.staff_id,
          start_at = excluded.start_at, end_at = excluded.end_at, is_active = excluded.is_active`),
  },
  {
    name: 'INSERT … ON CONFLICT DO NOTHING, some rows already there',
    lists: ['appointments'],
    write: (client, round) =>
      client.query(`
        INSERT INTO appointments (${APPOINTMENT_COLUMNS}) VALUES
          ${[300, 301].map((n) => appointment(ORG, `apt_${n}`, 9)).join(',\n')},
          ${[1, 2].map((n) => appointment(ORG, `apt_n${round}_${n}`, 6000 + n)).join(',\n')}
        ON CONFLICT DO NOTHING`),
  },
  {
    name: 'a writable CTE that deletes rows and inserts them again under new ids',
    lists: ['appointments'],
    write: (client, round) =>
      client.query(`
        WITH gone AS (
          DELETE FROM appointments WHERE org_id = '${ORG}'
            AND id IN (SELECT 'apt_' || g FROM generate_series(2500 + ${round * 30}, 2520 + ${round * 30}) g)
          RETURNING *)
        INSERT INTO appointments (${APPOINTMENT_COLUMNS})
        SELECT org_id, id || '_c${round}', staff_id, start_at, end_at, status, is_active, created_at, updated_at FROM gone`),
  },
  {
    name: "UPDATE of rows' primary key",
    lists: ['appointments', 'customers'],
    write: async (client, round) => {
      await client.query(
        `UPDATE appointments SET id = id || '_k' WHERE org_id = '${ORG}'
           AND id IN (SELECT 'apt_' || g FROM generate_series(2000 + ${round * 20}, 2010 + ${round * 20}) g)`,
      )
      await client.query(
        `UPDATE customers SET id = id || '_k' WHERE org_id = '${ORG}'
           AND id IN (SELECT 'cus_' || g FROM generate_series(1000 + ${round * 20}, 1010 + ${round * 20}) g)`,
      )
    },
  },
  {
    name: 'UPDATE that moves rows to another organization, some of them back, and one of its rows in',
    lists: ['appointments', 'customers'],
    write: async (client, round) => {
      const moved = (from: number, to: number) => `SELECT 'apt_' || g FROM generate_series(${from}, ${to}) g`
      const base = 1000 + round * 50
      await client.query(
        `UPDATE appointments SET org_id = '${OTHER}' WHERE org_id = '${ORG}' AND id IN (${moved(base, base + 40)})`,
      )
      await client.query(
        `UPDATE appointments SET org_id = '${ORG}' WHERE org_id = '${OTHER}' AND id IN (${moved(base, base + 10)})`,
      )
      await client.query(
        `UPDATE appointments SET org_id = '${ORG}' WHERE org_id = '${OTHER}' AND id = 'apt_o${1 + (round % 30)}'`,
      )
      await client.query(
        `UPDATE customers SET org_id = '${OTHER}' WHERE org_id = '${ORG}'
           AND id IN (SELECT 'cus_' || g FROM generate_series(2000 + ${round * 20}, 2010 + ${round * 20}) g)`,
      )
    },
  },
  {
    name: 'UPDATE … FROM and DELETE … USING a list of values',
    lists: ['appointments'],
    write: async (client, round) => {
      await client.query(`
        UPDATE appointments a SET status = v.status, staff_id = v.staff_id
        FROM (VALUES ('apt_700', 'completed', 'stf_3'), ('apt_701', 'scheduled', 'stf_1'), ('apt_702', 'confirmed', 'stf_4')) v (id, status, staff_id)
        WHERE a.org_id = '${ORG}' AND a.id = v.id`)
      await client.query(`
        DELETE FROM appointments a USING (VALUES ('apt_${3100 + round * 5}'), ('apt_${3101 + round * 5}')) v (id)
        WHERE a.org_id = '${ORG}' AND a.id = v.id`)
    },
  },
  {
    name: 'COPY FROM STDIN into a temporary table, then INSERT … SELECT from it',
    lists: ['appointments'],
    write: async (client, round) => {
      await client.query('CREATE TEMPORARY TABLE staged (LIKE appointments) ON COMMIT DROP')
      await copyAppointments(client, 'staged', round)
      await client.query(`INSERT INTO appointments SELECT * FROM staged`)
    },
  },
  {
    name: 'COPY FROM STDIN by a login role with BYPASSRLS',
    lists: ['appointments'],
    bypassRls: true,
    write: (client, round) => copyAppointments(client, 'appointments', round),
  },
]

describe.skipIf(!postgresAvailable())(
  'every statement form the salon software may write keeps the lists exact (PostgreSQL)',
  () => {
    let database: TestDatabase
    let store: Store
    let writerRole: TestRole
    let bypassingWriterRole: TestRole
    let app: FastifyInstance
    const keys = new Map<string, string>()

    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true })
      store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
      for (const org of [ORG, OTHER]) keys.set(org, (await createKey(store, await createOrg(store, org))).key)
      const owner = (sql: string) => asOwner(database.url, sql)
      await owner(
        `INSERT INTO staff (org_id, id) SELECT o, 'stf_' || g FROM unnest(array['${ORG}', '${OTHER}']) o, generate_series(1, 4) g`,
      )
      await owner(
        `INSERT INTO customers (${CUSTOMER_COLUMNS})
       SELECT '${ORG}', 'cus_' || g, g % 9 <> 0, timestamptz '2020-01-01' + g * interval '5 hours', now()
       FROM generate_series(1, 2500) g`,
      )
      // Enough for several buckets in each list, so that changes land on both sides of bounds.
      await owner(
        `INSERT INTO appointments (${APPOINTMENT_COLUMNS}) VALUES ${Array.from({ length: 4000 }, (_, i) =>
          appointment(ORG, `apt_${i + 1}`, i + 1, (i + 1) % 11 !== 0),
        ).join(',')}`,
      )
      await owner(
        `INSERT INTO appointments (${APPOINTMENT_COLUMNS}) VALUES ${Array.from({ length: 30 }, (_, i) =>
          appointment(OTHER, `apt_o${i + 1}`, 50 * i + 3),
        ).join(',')}`,
      )
      await owner('SELECT list_fold_all()')
      await owner('ANALYZE')
      writerRole = await createTestRole('openbook_writer')
      bypassingWriterRole = await createTestRole('openbook_writer', 'BYPASSRLS')
      ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    }, patience(120_000))

    afterAll(async () => {
      await app?.close()
      await store?.close()
      await database?.drop()
      await writerRole?.drop()
      await bypassingWriterRole?.drop()
    })

    /** A connection as `role`, a login member of openbook_writer. */
    const writer = async (role: TestRole) => {
      const client = new pg.Client({ connectionString: database.url.replace('root@', `${role.name}@`) })
      await client.connect()
      return client
    }

    const get = (org: string, path: string) => app.inject({ url: path, headers: bearer(keys.get(org) ?? '') })

    /** The ETag of `list`'s first page for `ORG`. */
    const tagOf = async (list: 'customers' | 'appointments') =>
      String((await get(ORG, `/api/public/v1/${list}?limit=1`)).headers.etag)

    /** Each list's total over HTTP for `org`, against a count of the table. */
    async function expectTotals(org: string): Promise<void> {
      const lists: [string, string][] = [
        [
          '/api/public/v1/customers',
          `SELECT count(*)::int AS n FROM customers WHERE org_id = $1 AND is_active`,
        ],
        [
          '/api/public/v1/appointments',
          `SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active`,
        ],
        ...STATUSES.map((status): [string, string] => [
          `/api/public/v1/appointments?status=${status}`,
          `SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active AND status = '${status}'`,
        ]),
        [
          '/api/public/v1/appointments?staffId=stf_2',
          `SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active AND staff_id = 'stf_2'`,
        ],
        [
          '/api/public/v1/appointments?staffId=stf_3&status=completed',
          `SELECT count(*)::int AS n FROM appointments WHERE org_id = $1 AND is_active AND staff_id = 'stf_3' AND status = 'completed'`,
        ],
      ]
      for (const [path, count] of lists) {
        const response = await get(org, `${path}${path.includes('?') ? '&' : '?'}limit=1`)
        expect(response.statusCode, path).toBe(200)
        const [truth] = await asOwner<{ n: number }>(database.url, count, [org])
        expect({ path, total: response.json().pagination.total }).toEqual({ path, total: truth?.n })
      }
    }

    it("refuses COPY FROM into openbook's tables to a member without BYPASSRLS, and writes nothing", async () => {
      const before = await tagOf('appointments')
      const client = await writer(writerRole)
      try {
        await expect(copyAppointments(client, 'appointments', 0)).rejects.toThrow(
          'COPY FROM not supported with row-level security',
        )
      } finally {
        await client.end()
      }
      const [copied] = await asOwner<{ n: number }>(
        database.url,
        "SELECT count(*)::int AS n FROM appointments WHERE id LIKE 'apt\\_copy0\\_%'",
      )
      expect(copied?.n).toBe(0)
      expect(await tagOf('appointments')).toBe(before)
    })

    let round = 0
    for (const isolation of ['READ COMMITTED', 'SERIALIZABLE'] as const) {
      for (const form of FORMS) {
        it(`${form.name}, in ${isolation}`, async () => {
          round += 1
          const before = await Promise.all(form.lists.map(tagOf))
          const client = await writer(form.bypassRls ? bypassingWriterRole : writerRole)
          try {
            await client.query(`BEGIN ISOLATION LEVEL ${isolation}`)
            await form.write(client, round)
            await client.query('COMMIT')
          } finally {
            await client.end()
          }
          for (const [i, list] of form.lists.entries()) expect(await tagOf(list), list).not.toBe(before[i])
          expect(await bucketFaults(store)).toEqual([])
          await expectTotals(ORG)
          await expectTotals(OTHER)
          // A deep page and its ETag, then everything folded: the same tag answers 304.
          await expectPagesOfTables(app, keys.get(ORG) ?? '', database.url, ORG)
          expect(await bucketFaults(store)).toEqual([])
        })
      }
    }
  },
)
