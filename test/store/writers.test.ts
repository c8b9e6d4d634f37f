import { PassThrough, Readable } from 'node:stream'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { importNdjson } from '../../src/import/ndjson.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store } from '../../src/store/types.js'
import { bucketFaults } from '../helpers/buckets.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// The salon software writes the tables one booking at a time, beside the API: what openbook keeps
// beside its rows must not make it wait, deadlock, plan expensive statements, or do more work in
// a large organization than in a small one (docs/writers.md).

const SMALL = 'org_small'
const LARGE = 'org_large'

/** An organization with `n` appointments spread over years, a quarter as many customers, 12 staff. */
async function addOrganization(client: pg.Client, org: string, n: number): Promise<void> {
  await client.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [org])
  await client.query(`INSERT INTO staff (org_id, id) SELECT $1, 'stf_' || g FROM generate_series(1, 12) g`, [
    org,
  ])
  await client.query(
    `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
     SELECT $1, 'cus_' || g, g % 10 <> 0, timestamptz '2020-01-01' + g * interval '37 minutes', now()
     FROM generate_series(1, $2::int) g`,
    [org, Math.ceil(n / 4)],
  )
  await client.query(
    `INSERT INTO appointments (org_id, id, customer_id, staff_id, start_at, end_at, status, is_active,
                               created_at, updated_at)
     SELECT $1, 'apt_' || g, 'cus_' || (1 + g % $3::int), CASE WHEN g % 7 = 0 THEN NULL ELSE 'stf_' || (1 + g % 12) END,
            timestamptz '2020-01-01' + g * interval '9 minutes', timestamptz '2020-01-01' + g * interval '9 minutes' + interval '30 minutes',
            (ARRAY['scheduled','confirmed','checked_in','no_show','cancelled','completed'])[1 + g % 6], g % 11 <> 0, now(), now()
     FROM generate_series(1, $2::int) g`,
    [org, n, Math.ceil(n / 4)],
  )
}

/** The one-row writes of a booking application, on appointment `id` of `org`. */
const oneRowWrites = (org: string, id: string, i: number): string[] => [
  `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
   VALUES ('${org}', 'apt_new_${i}', 'stf_3', now(), now() + interval '1 hour', 'scheduled', true, now(), now())`,
  `UPDATE appointments SET status = 'confirmed' WHERE org_id = '${org}' AND id = '${id}'`,
  `UPDATE appointments SET start_at = start_at + interval '1 day', end_at = end_at + interval '1 day' WHERE org_id = '${org}' AND id = '${id}'`,
  `UPDATE appointments SET note = 'moved ${i}' WHERE org_id = '${org}' AND id = '${id}'`,
  `UPDATE appointments SET is_active = false WHERE org_id = '${org}' AND id = '${id}'`,
  `DELETE FROM appointments WHERE org_id = '${org}' AND id = 'apt_new_${i}'`,
  `UPDATE customers SET first_name = 'Ada' WHERE org_id = '${org}' AND id = 'cus_${i + 1}'`,
]

interface AutoExplained {
  readonly statement: string
  readonly totalCost: number
  readonly jit: boolean
  readonly buffers: number
  /** The plan's nodes, every level: their type and the relation they read (`Index Scan on t`). */
  readonly nodes: string[]
}

/** Every node of an EXPLAIN (FORMAT JSON) plan, its sub-plans included. */
function planNodes(plan: Record<string, unknown>): string[] {
  const below = (plan.Plans as Record<string, unknown>[] | undefined) ?? []
  const relation = plan['Relation Name'] === undefined ? '' : ` on ${String(plan['Relation Name'])}`
  return [`${String(plan['Node Type'])}${relation}`, ...below.flatMap(planNodes)]
}

/**
 * Every plan PostgreSQL makes for `statements` (each run alone, in autocommit), its triggers' and
 * the fold's nested statements included, as auto_explain reports them to the client.
 */
async function explainedWrites(url: string, statements: readonly string[]): Promise<AutoExplained[]> {
  const client = new pg.Client({ connectionString: url })
  const plans: AutoExplained[] = []
  client.on('notice', (notice) => {
    const text = notice.message ?? ''
    const start = text.indexOf('{')
    if (!text.startsWith('duration:') || start < 0) return
    const explained = JSON.parse(text.slice(start)) as {
      'Query Text': string
      Plan: Record<string, unknown>
      JIT?: unknown
    }
    plans.push({
      statement: explained['Query Text'],
      totalCost: Number(explained.Plan['Total Cost']),
      jit: explained.JIT !== undefined,
      // A plan's top node counts the buffers of the nodes under it.
      buffers:
        Number(explained.Plan['Shared Hit Blocks'] ?? 0) + Number(explained.Plan['Shared Read Blocks'] ?? 0),
      nodes: planNodes(explained.Plan),
    })
  })
  await client.connect()
  try {
    // PostgreSQL's defaults for the planner and JIT, whatever the test cluster was given.
    await client.query(`LOAD 'auto_explain';
      SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
      SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;
      SET auto_explain.log_format = json; SET auto_explain.log_level = notice;
      RESET jit; RESET jit_above_cost; RESET enable_seqscan; RESET enable_sort; RESET enable_bitmapscan;
      RESET enable_hashjoin; RESET enable_mergejoin`)
    for (const statement of statements) await client.query(statement)
  } finally {
    await client.end()
  }
  return plans
}

/** Waits until the backend `pid` waits for a lock, as `observer` sees it. */
async function waitForLock(observer: pg.Client, pid: number): Promise<void> {
  const since = Date.now()
  for (;;) {
    const { rows } = await observer.query('SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted', [pid])
    if (rows.length > 0) return
    expect(Date.now() - since).toBeLessThan(patience(20_000))
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// Most tests end with `bucketFaults`, which places every entry of the database's 260,000 rows in
// its bucket: 17-22 s beside the other test files on 2 cores, over 30 s on a slower day.
describe.skipIf(!postgresAvailable())(
  'the salon software writing beside openbook (PostgreSQL)',
  { timeout: patience(120_000) },
  () => {
    let database: TestDatabase
    let store: Store
    let writerRole: TestRole
    const url = () => database.url
    /** One statement as the schema owner, on a connection of its own. */
    const asOwner = async <T extends pg.QueryResultRow>(
      sql: string,
      params: unknown[] = [],
    ): Promise<T[]> => {
      const client = new pg.Client({ connectionString: url() })
      await client.connect()
      try {
        return (await client.query<T>(sql, params)).rows
      } finally {
        await client.end()
      }
    }

    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true })
      store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        await addOrganization(client, SMALL, 10_000)
        await addOrganization(client, LARGE, 200_000)
        await client.query('SELECT list_fold_all()')
        await client.query('ANALYZE')
      } finally {
        await client.end()
      }
      writerRole = await createTestRole('openbook_writer')
    }, patience(300_000))

    afterAll(async () => {
      await store?.close()
      await database?.drop()
      await writerRole?.drop()
    })

    it('plans no statement of a one-row write, its triggers and its fold included, above jit_above_cost, and compiles none', async () => {
      const statements = Array.from({ length: 160 }, (_, i) =>
        oneRowWrites(LARGE, `apt_${1000 + i * 17}`, 5000 + i),
      ).flat()
      // Enough writes that several fold at their commit (one entry written in 512).
      const plans = await explainedWrites(url(), statements)
      expect(plans.some((plan) => plan.statement.includes('list_changes'))).toBe(true)
      expect(plans.some((plan) => /DELETE FROM list_changes/.test(plan.statement))).toBe(true)
      const expensive = plans.filter((plan) => plan.totalCost > 100_000 || plan.jit)
      expect(expensive.map((plan) => `${plan.totalCost}: ${plan.statement.slice(0, 200)}`)).toEqual([])
    })

    it('does as much work for each one-row write in an organization of 200,000 appointments as in one of 10,000', async () => {
      // Each kind of write, the i-th time, on appointment and customer numbers both organizations have.
      const kinds: Record<string, (org: string, i: number) => string> = {
        'INSERT an appointment': (org, i) =>
          `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
         VALUES ('${org}', 'apt_b_${i}', 'stf_3', now(), now() + interval '1 hour', 'scheduled', true, now(), now())`,
        'UPDATE its status': (org, i) =>
          `UPDATE appointments SET status = 'no_show' WHERE org_id = '${org}' AND id = 'apt_${2000 + i * 31}'`,
        'UPDATE its start': (org, i) =>
          `UPDATE appointments SET start_at = start_at + interval '1 day', end_at = end_at + interval '1 day'
         WHERE org_id = '${org}' AND id = 'apt_${3000 + i * 31}'`,
        'UPDATE is_active = false': (org, i) =>
          `UPDATE appointments SET is_active = false WHERE org_id = '${org}' AND id = 'apt_${4000 + i * 31}'`,
        'DELETE an appointment': (org, i) =>
          `DELETE FROM appointments WHERE org_id = '${org}' AND id = 'apt_b_${i}'`,
        'INSERT a customer': (org, i) =>
          `INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ('${org}', 'cus_b_${i}', true, now(), now())`,
        'UPDATE a customer': (org, i) =>
          `UPDATE customers SET first_name = 'Ada' WHERE org_id = '${org}' AND id = 'cus_${100 + i * 7}'`,
      }
      const medians = async (org: string) => {
        const runs: Record<string, number[]> = Object.fromEntries(
          Object.keys(kinds).map((kind) => [kind, []]),
        )
        for (let i = 0; i < 9; i++) {
          for (const [kind, sql] of Object.entries(kinds)) {
            const plans = await explainedWrites(url(), [sql(org, i)])
            runs[kind]?.push(plans.reduce((sum, plan) => sum + plan.buffers, 0))
          }
        }
        return Object.fromEntries(
          Object.entries(runs).map(([kind, totals]) => [kind, totals.sort((a, b) => a - b)[4] ?? 0]),
        )
      }
      const small = await medians(SMALL)
      const large = await medians(LARGE)
      for (const kind of Object.keys(kinds)) {
        expect(small[kind], kind).toBeGreaterThan(0)
        // The same statements; each of the table's indexes may be a level deeper.
        expect(
          Math.abs((large[kind] ?? 0) - (small[kind] ?? 0)),
          `${kind}: ${small[kind]} buffers against ${large[kind]}`,
        ).toBeLessThanOrEqual(16)
      }
    })

    it('never makes a writer wait: two ORM transactions on different appointments of one organization both commit', async () => {
      const [first, second] = [new pg.Client(url()), new pg.Client(url())]
      await Promise.all([first.connect(), second.connect()])
      try {
        await first.query('BEGIN')
        await first.query(
          `UPDATE appointments SET status = 'confirmed' WHERE org_id = '${LARGE}' AND id = 'apt_301'`,
        )
        // The second writer changes B and commits while the first holds its transaction open: on
        // tables that take an organization-wide row or lock it would wait for the first, and the
        // first's next statement on B would then deadlock.
        const started = Date.now()
        await second.query(
          `UPDATE appointments SET status = 'cancelled' WHERE org_id = '${LARGE}' AND id = 'apt_302'`,
        )
        expect(Date.now() - started).toBeLessThan(patience(2_000))
        await first.query(`UPDATE appointments SET note = 'b' WHERE org_id = '${LARGE}' AND id = 'apt_302'`)
        await first.query('COMMIT')
        // Two organizations written in opposite orders, different rows: no deadlock, no wait.
        await first.query('BEGIN')
        await second.query('BEGIN')
        await first.query(
          `UPDATE appointments SET status = 'completed' WHERE org_id = '${SMALL}' AND id = 'apt_401'`,
        )
        await second.query(
          `UPDATE appointments SET status = 'completed' WHERE org_id = '${LARGE}' AND id = 'apt_402'`,
        )
        await first.query(
          `UPDATE appointments SET status = 'completed' WHERE org_id = '${LARGE}' AND id = 'apt_403'`,
        )
        await second.query(
          `UPDATE appointments SET status = 'completed' WHERE org_id = '${SMALL}' AND id = 'apt_404'`,
        )
        await Promise.all([first.query('COMMIT'), second.query('COMMIT')])
      } finally {
        await Promise.all([first.end(), second.end()])
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it('takes no organization-wide lock for a write, and none at all for one that changes a note', async () => {
      const client = new pg.Client(url())
      await client.connect()
      try {
        await client.query('BEGIN')
        await client.query(`UPDATE appointments SET note = 'n' WHERE org_id = '${LARGE}' AND id = 'apt_501'`)
        await client.query(
          `UPDATE appointments SET status = 'no_show' WHERE org_id = '${LARGE}' AND id = 'apt_502'`,
        )
        const { rows } = await client.query<{ locktype: string; relation: string | null; mode: string }>(
          `SELECT locktype, relation::regclass::text AS relation, mode FROM pg_locks
         WHERE pid = pg_backend_pid() AND locktype IN ('advisory', 'relation', 'tuple')
           AND (relation IS NULL OR relation::regclass::text NOT LIKE 'pg_%') ORDER BY 1, 2, 3`,
        )
        await client.query('COMMIT')
        // No advisory lock, no lock on openbook's shared rows: only the tables' row-exclusive locks,
        // which writers share.
        expect(rows.filter((row) => row.locktype !== 'relation')).toEqual([])
        for (const row of rows)
          expect(['RowExclusiveLock', 'AccessShareLock'], String(row.relation)).toContain(row.mode)
        expect(rows.map((row) => row.relation).filter((r) => /buckets|list_folds/.test(String(r)))).toEqual(
          [],
        )
      } finally {
        await client.end()
      }
    })

    it('an import that waits on a writer says so within a second, naming the holder, and goes on when it commits', async () => {
      const writer = new pg.Client({ connectionString: url(), application_name: 'salon-app' })
      await writer.connect()
      try {
        await writer.query('BEGIN')
        await writer.query(
          `UPDATE customers SET first_name = 'Held' WHERE org_id = '${SMALL}' AND id = 'cus_9'`,
        )
        const { rows } = await writer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        const lines: string[] = []
        const line = JSON.stringify({
          type: 'customer',
          id: 'cus_9',
          orgId: SMALL,
          firstName: 'Imported',
          isActive: true,
          createdAt: '2020-01-01T00:00:00.000Z',
          updatedAt: '2020-01-02T00:00:00.000Z',
        })
        const started = Date.now()
        const imported = importNdjson(store, Readable.from([`${line}\n`]), {
          onWait: (said) => lines.push(said),
        })
        while (lines.length === 0 && Date.now() - started < patience(5_000))
          await new Promise((r) => setTimeout(r, 50))
        expect(Date.now() - started).toBeLessThan(patience(1_600))
        expect(lines[0]).toMatch(
          new RegExp(`^waiting: .* held by pid ${rows[0]?.pid} \\(.*salon-app\\) since \\d{4}-`),
        )
        await writer.query('COMMIT')
        await imported
      } finally {
        await writer.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it('lets writers of an organization go on while an import of it holds its transaction: only rows it wrote wait', async () => {
      const input = new PassThrough()
      const chunkLines = 100
      const imported = importNdjson(store, input, { chunkLines })
      const writer = new pg.Client({ connectionString: url() })
      await writer.connect()
      try {
        // Two chunks of the organization's customers restated; the input stays open.
        for (let i = 1; i <= 2 * chunkLines; i++)
          input.write(
            `${JSON.stringify({ type: 'customer', id: `cus_${i}`, orgId: SMALL, isActive: true, firstName: 'Restated', createdAt: '2020-01-01T00:00:00.000Z', updatedAt: '2020-01-03T00:00:00.000Z' })}\n`,
          )
        // Merged: the import's transaction holds the first chunk's rows (its advisory lock alone
        // comes before them, and on a busy machine the writes below could pass before the rows).
        const merged = async () => {
          try {
            await writer.query(`SELECT FROM customers WHERE org_id = $1 AND id = 'cus_5' FOR UPDATE NOWAIT`, [
              SMALL,
            ])
            return false
          } catch (error) {
            if ((error as { code?: string }).code === '55P03') return true
            throw error
          }
        }
        const waitingSince = Date.now()
        while (!(await merged())) {
          expect(Date.now() - waitingSince).toBeLessThan(patience(20_000))
          await new Promise((r) => setTimeout(r, 50))
        }
        await writer.query("SET statement_timeout = '2s'")
        const writes = [
          `UPDATE appointments SET status = 'cancelled' WHERE org_id = '${SMALL}' AND id = 'apt_20'`,
          `UPDATE appointments SET start_at = start_at + interval '1 hour', end_at = end_at + interval '1 hour' WHERE org_id = '${SMALL}' AND id = 'apt_21'`,
          `INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
         VALUES ('${SMALL}', 'apt_beside_import', now(), now() + interval '1 hour', 'scheduled', true, now(), now())`,
          `INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ('${SMALL}', 'cus_beside_import', true, now(), now())`,
          `UPDATE customers SET is_active = false WHERE org_id = '${SMALL}' AND id = 'cus_2000'`,
        ]
        for (const statement of writes) await writer.query(statement)
        // A row the import wrote waits for its commit, as on any table.
        await writer.query("SET statement_timeout = '300ms'")
        await expect(
          writer.query(`UPDATE customers SET first_name = 'Mine' WHERE org_id = '${SMALL}' AND id = 'cus_5'`),
        ).rejects.toThrow(/statement timeout/)
        input.end()
        await imported
      } finally {
        input.end()
        await imported.catch(() => {})
        await writer.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it("builds a new organization's lists in one pass at an import's end, counting each writer's change once", async () => {
      const NEW = 'org_loaded'
      const client = new pg.Client({ connectionString: url() })
      const late = new pg.Client({ connectionString: url() })
      await client.connect()
      await late.connect()
      try {
        await client.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [
          NEW,
        ])
        // The salon software's first bookings, pending (no fold runs outside READ COMMITTED).
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
        for (let i = 0; i < 20; i++)
          await client.query(
            `INSERT INTO appointments (org_id, id, status, start_at, end_at, is_active, created_at, updated_at)
           VALUES ($1, $2, 'scheduled', timestamptz '2024-01-01' + $3 * interval '1 day', timestamptz '2024-01-01' + $3 * interval '1 day' + interval '1 hour', true, now(), now())`,
            [NEW, `apt_pending_${i}`, i],
          )
        await client.query('COMMIT')
        const before = await client.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM buckets WHERE org_id = $1',
          [NEW],
        )
        expect(before.rows[0]?.n).toBe(0)
        // A booking that commits after the import has counted the rows.
        await late.query('BEGIN')
        await late.query(
          `INSERT INTO appointments (org_id, id, status, start_at, end_at, is_active, created_at, updated_at)
         VALUES ($1, 'apt_late', 'confirmed', '2025-06-01', '2025-06-01 01:00', true, now(), now())`,
          [NEW],
        )
        const statuses = ['scheduled', 'confirmed', 'completed']
        const lines = Array.from({ length: 2_500 }, (_, i) =>
          JSON.stringify({
            type: 'appointment',
            orgId: NEW,
            id: i < 10 ? `apt_pending_${i}` : `apt_i${i}`,
            status: statuses[i % 3],
            staffId: null,
            start: new Date(Date.UTC(2023, 0, 1) + i * 3_600_000).toISOString(),
            end: new Date(Date.UTC(2023, 0, 1) + i * 3_600_000 + 1_800_000).toISOString(),
            isActive: i % 13 !== 0,
            createdAt: '2023-01-01T00:00:00.000Z',
            updatedAt: '2023-01-02T00:00:00.000Z',
          }),
        )
        await importNdjson(store, Readable.from([`${lines.join('\n')}\n`]), {})
        await late.query('COMMIT')
        const built = await client.query<{ n: number; total: number }>(
          `SELECT count(*)::int AS n, sum(n)::int AS total FROM buckets WHERE org_id = $1 AND list = 'appointments' AND filters = '{}'`,
          [NEW],
        )
        // 2,500 imported (10 of them the writer's rows restated), 10 more of the writer's, less the inactive.
        expect(built.rows[0]?.n).toBeGreaterThan(1)
        expect(built.rows[0]?.total).toBe(2_500 + 10 - Math.ceil(2_500 / 13))
        const pending = await client.query<{ id: string }>('SELECT id FROM list_changes WHERE org_id = $1', [
          NEW,
        ])
        expect(pending.rows.map((row) => row.id)).toEqual(['apt_late'])
      } finally {
        await late.query('ROLLBACK').catch(() => {})
        await late.end()
        await client.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it('counts a list again from its rows along the index of each of its lists, sorting nothing', async () => {
      // One list per combination of the definition's filter columns: 2^k, each read along its index.
      const definitions = await store.admin((sql) =>
        sql.query<{ list: string; columns: string[] }>(
          'SELECT list, filter_columns AS columns FROM list_definitions ORDER BY list',
        ),
      )
      expect(definitions.map((d) => d.list).sort()).toEqual(['appointments', 'customers'])
      for (const { list, columns } of definitions) {
        const reads = 2 ** columns.length
        const plans = await explainedWrites(url(), [`SELECT list_build('${LARGE}', '${list}')`])
        const built = plans.find((plan) => plan.statement.includes('INSERT INTO buckets'))
        const fix =
          `list_build('${LARGE}', '${list}') must read each of the ${reads} lists of {${columns.join(', ')}} ` +
          `in its order along an index, sorting nothing: a combination without its index sorts ` +
          `(the filter's migration runs SELECT list_index('${list}'), docs/design/lists.md); ` +
          `with every index there, a planner setting of list_build steers it. The plan: ${built?.nodes.join(' > ')}`
        // Each list read in its order along an index (with or without the heap), never sorted.
        const reading = built?.nodes.filter((node) => node.endsWith(`Scan on ${list}`))
        expect(
          reading?.map((node) => node.replace('Index Only Scan', 'Index Scan')),
          fix,
        ).toEqual(Array(reads).fill(`Index Scan on ${list}`))
        expect(
          built?.nodes.filter((node) => /Sort/.test(node)),
          fix,
        ).toEqual([])
      }
      // And counted them right.
      expect(await bucketFaults(store)).toEqual([])
    })

    it("counts a load's rows when a writer's fold counted the list between the load's statement and its turn", async () => {
      const RACED = 'org_raced'
      const [writer, load] = [
        new pg.Client({ connectionString: url() }),
        new pg.Client({ connectionString: url() }),
      ]
      await writer.connect()
      await load.connect()
      const insert = (from: number, to: number) =>
        `INSERT INTO appointments (org_id, id, status, start_at, end_at, is_active, created_at, updated_at)
       SELECT '${RACED}', 'apt_' || g, 'scheduled', timestamptz '2024-01-01' + g * interval '1 hour',
              timestamptz '2024-01-01' + g * interval '1 hour' + interval '30 minutes', true, now(), now()
       FROM generate_series(${from}, ${to}) g`
      try {
        await writer.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [
          RACED,
        ])
        // Rows without buckets (no fold runs outside READ COMMITTED).
        await writer.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
        await writer.query(insert(1, 1_500))
        await writer.query('COMMIT')
        // A writer's fold counts the list and holds it while the load's statement looks for buckets.
        await writer.query('BEGIN')
        await writer.query(`SELECT list_build($1, 'appointments')`, [RACED])
        const { rows } = await load.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        await load.query("BEGIN; SELECT set_config('openbook.fold', 'now', true)")
        const loading = load.query(insert(1_501, 4_000))
        await waitForLock(writer, rows[0]?.pid ?? 0)
        await writer.query('COMMIT')
        await loading
        await load.query('SELECT list_fold_all()')
        await load.query('COMMIT')
        const total = await writer.query<{ n: number }>(
          `SELECT sum(n)::int AS n FROM buckets WHERE org_id = $1 AND list = 'appointments' AND filters = '{}'`,
          [RACED],
        )
        expect(total.rows[0]?.n).toBe(4_000)
      } finally {
        await writer.query('ROLLBACK').catch(() => {})
        await load.query('ROLLBACK').catch(() => {})
        await writer.end()
        await load.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it('runs a fold at the commit of one entry written in 512, an entry that moved between lists counting once', async () => {
      const turn = async () =>
        (await asOwner<{ n: number }>('SELECT last_value::int AS n FROM list_turns'))[0]?.n ?? 0
      const pending = async () =>
        (
          await asOwner<{ n: number }>(
            `SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = 'appointments'`,
            [SMALL],
          )
        )[0]?.n ?? 0
      const client = new pg.Client({ connectionString: url() })
      await client.connect()
      try {
        const first = await turn()
        // 1,024 status changes of active appointments, one at a time: each entry leaves one list and
        // joins another (two changes) and takes one turn.
        const active = Array.from({ length: 1200 }, (_, i) => i + 1).filter((g) => g % 11 !== 0)
        for (const g of active.slice(0, 1024))
          await client.query(
            `UPDATE appointments SET status = CASE status WHEN 'no_show' THEN 'checked_in' ELSE 'no_show' END
           WHERE org_id = $1 AND id = $2`,
            [SMALL, `apt_${g}`],
          )
        const last = await turn()
        expect(last - first).toBe(1024)
        // Two turns were multiples of 512; the later one's commit folded every change before it, so
        // only the two changes of each status change since are pending.
        expect(await pending()).toBe(2 * (last % 512))
      } finally {
        await client.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })

    it(
      'folds a bulk write of one transaction at most twice a list, at its commit, leaving nothing pending',
      async () => {
        const client = new pg.Client({ connectionString: url() })
        await client.connect()
        // The calls of the fold's functions by one statement's transaction: its deferred folds run at
        // SET CONSTRAINTS ALL IMMEDIATE, as they would at its commit, and are counted before it ends.
        const foldCalls = async (statement: string): Promise<Record<string, number>> => {
          const read = async () => {
            const { rows } = await client.query<{ funcname: string; calls: number }>(
              `SELECT funcname, calls::int FROM pg_stat_xact_user_functions
           WHERE funcname IN ('list_fold', 'list_build', 'list_apply')`,
            )
            return new Map(rows.map((row) => [row.funcname, row.calls]))
          }
          await client.query('BEGIN')
          const before = await read()
          await client.query(statement)
          await client.query('SET CONSTRAINTS ALL IMMEDIATE')
          const after = await read()
          await client.query('COMMIT')
          return Object.fromEntries(
            [...after].map(([name, n]) => [name, n - (before.get(name) ?? 0)]).filter(([, n]) => n !== 0),
          )
        }
        const flipStatus = (where: string) =>
          `UPDATE appointments SET status = CASE status WHEN 'confirmed' THEN 'completed' ELSE 'confirmed' END
       WHERE org_id = 'org_bulk' AND ${where}`
        try {
          await client.query(`SET track_functions = 'pl'`)
          await client.query(`INSERT INTO organizations (id, name, plan) VALUES ('org_bulk', 'Bulk', 'free')`)
          await client.query(
            `INSERT INTO staff (org_id, id) SELECT 'org_bulk', 'stf_' || g FROM generate_series(0, 2) g`,
          )
          // A new organization's first 30,000 appointments, in one statement and one transaction:
          // about 58 of its changes ask for a fold. The first finds no buckets and builds the list
          // from its rows; the second takes what is left; the others are skipped.
          expect(
            await foldCalls(
              `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
           SELECT 'org_bulk', 'apt_' || g, 'stf_' || (g % 3), t, t + interval '1 hour',
                  (ARRAY['scheduled', 'confirmed', 'completed'])[1 + g % 3], true, now(), now()
           FROM generate_series(1, 30000) g, LATERAL (SELECT timestamptz '2026-01-01' + g * interval '7 minutes' AS t) x`,
            ),
          ).toEqual({ list_fold: 2, list_build: 1 })
          // A third of their statuses at once, 20,000 changes: the first fold places 5,000, the
          // second, with fewer changes left than half the list's entries, the rest.
          expect(await foldCalls(flipStatus(`status = 'confirmed'`))).toEqual({ list_fold: 2, list_apply: 2 })
          // All of them, 60,000 changes: after the first 5,000, the list is counted again from its rows.
          expect(await foldCalls(flipStatus('true'))).toEqual({ list_fold: 2, list_apply: 1, list_build: 1 })
          const { rows } = await client.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM list_changes WHERE org_id = 'org_bulk'`,
          )
          expect(rows[0]?.n).toBe(0)
        } finally {
          await client.end()
        }
        expect(await bucketFaults(store)).toEqual([])
        // 110,000 rows written: 11 s alone on 2 cores, over 30 s beside two other test files.
      },
      patience(120_000),
    )

    it("lets a member of openbook_writer write customers and appointments of any organization, with the lists kept, and read none of openbook's keys or lists", async () => {
      const writer = new pg.Client({ connectionString: url().replace('root@', `${writerRole.name}@`) })
      await writer.connect()
      try {
        for (const org of [SMALL, LARGE]) {
          await writer.query(
            `INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ($1, 'cus_w1', true, now(), now())`,
            [org],
          )
          await writer.query(
            `INSERT INTO appointments (org_id, id, customer_id, start_at, end_at, status, is_active, created_at, updated_at)
           VALUES ($1, 'apt_w1', 'cus_w1', now(), now() + interval '1 hour', 'scheduled', true, now(), now())`,
            [org],
          )
          await writer.query(
            `UPDATE appointments SET status = 'confirmed' WHERE org_id = $1 AND id = 'apt_w1'`,
            [org],
          )
          await writer.query(`UPDATE customers SET is_active = false WHERE org_id = $1 AND id = 'cus_1'`, [
            org,
          ])
          await writer.query(`DELETE FROM appointments WHERE org_id = $1 AND id = 'apt_5'`, [org])
        }
        // Enough entries written that folds run at the writer's commits, through list_fold.
        const folded = async () =>
          (
            await asOwner<{ n: number }>(
              `SELECT changes::int AS n FROM list_folds WHERE org_id = $1 AND list = 'appointments'`,
              [LARGE],
            )
          )[0]?.n ?? 0
        const foldedBefore = await folded()
        for (let i = 0; i < 600; i++)
          await writer.query(`UPDATE appointments SET status = 'completed' WHERE org_id = $1 AND id = $2`, [
            LARGE,
            `apt_${700 + i}`,
          ])
        const { rows } = await writer.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM appointments WHERE id = 'apt_w1'`,
        )
        expect(rows[0]?.n).toBe(2)
        expect(await folded()).toBeGreaterThan(foldedBefore)
        for (const table of ['api_keys', 'buckets', 'list_changes', 'list_folds', 'memberships', 'users'])
          await expect(writer.query(`SELECT 1 FROM ${table} LIMIT 1`), table).rejects.toThrow(
            /permission denied/,
          )
        await expect(writer.query('SELECT list_rebuild($1)', ['customers'])).rejects.toThrow(
          /permission denied/,
        )
      } finally {
        await writer.end()
      }
      expect(await bucketFaults(store)).toEqual([])
    })
  },
)
