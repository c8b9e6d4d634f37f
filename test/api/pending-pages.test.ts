import { afterAll, beforeAll, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { type AppointmentFilters, appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { type PageStatement, pageParams, rowsTextFor, SEEK_FROM } from '../../src/queries/page-statement.js'
import { bucketFaults } from '../helpers/buckets.js'
import { fetchPage } from '../helpers/pages.js'
import { describeEachStore } from '../helpers/stores.js'

// Pages and totals read the folded buckets plus the changes not folded yet (docs/design/lists.md).
// Here the folds are held off while a few hundred writes move, add, remove, restate and move rows
// between lists, so that every bucket has changes pending beside it; every page at offsets on both
// sides of SEEK_FROM, in both halves, near the ends and past them, must still be its slice of the
// list in the contract's order. Then the changes are folded and the same holds.

const ORG = 'org_pending'
/** An organization whose changes are all of its newest rows, or all of its oldest. */
const ENDS = 'org_pending_ends'
/** An organization whose customers were all created at one instant. */
const INSTANT = 'org_pending_instant'
/** A date range from before the list's first entry to after its last. */
const WHOLE_LIST = { startDate: '2025-04-01T00:00:00Z', endDate: '2025-07-01T00:00:00Z' }
const STATUSES = ['scheduled', 'confirmed', 'completed'] as const
const STAFF = ['stf_a', 'stf_b']

describeEachStore('pages with changes pending on %s', (testStore) => {
  beforeAll(async () => {
    await testStore.store.admin(async (sql) => {
      await sql.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [ORG])
      await sql.query(`INSERT INTO staff (org_id, id) SELECT $1, unnest($2::text[])`, [ORG, STAFF])
      // 6,000 customers over a few days, a third on one instant; 7,000 appointments likewise.
      await sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT $1, 'cus_' || lpad(g::text, 5, '0'), g % 17 <> 3,
                CASE WHEN g % 3 = 0 THEN timestamptz '2025-05-01 09:00' ELSE timestamptz '2025-05-01' + g * interval '61 seconds' END, now()
         FROM generate_series(1, 6000) g`,
        [ORG],
      )
      await sql.query(
        `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
         SELECT $1, 'apt_' || lpad(g::text, 5, '0'), CASE WHEN g % 5 = 0 THEN NULL ELSE ($2::text[])[1 + g % 2] END,
                CASE WHEN g % 3 = 0 THEN timestamptz '2025-05-01 09:00' ELSE timestamptz '2025-05-01' + g * interval '53 seconds' END,
                timestamptz '2025-06-01', ($3::text[])[1 + g % 3], g % 19 <> 5, now(), now()
         FROM generate_series(1, 7000) g`,
        [ORG, STAFF, STATUSES],
      )
    })
    // 5,000 customers and 5,000 appointments, a minute apart: no two entries share a time.
    await testStore.store.admin(async (sql) => {
      await sql.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [ENDS])
      await sql.query(`INSERT INTO staff (org_id, id) SELECT $1, unnest($2::text[])`, [ENDS, STAFF])
      await sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT $1, 'cus_' || lpad(g::text, 5, '0'), true, timestamptz '2025-05-01' + g * interval '1 minute', now()
         FROM generate_series(1, 5000) g`,
        [ENDS],
      )
      await sql.query(
        `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
         SELECT $1, 'apt_' || lpad(g::text, 5, '0'), ($2::text[])[1 + g % 2],
                timestamptz '2025-05-01' + g * interval '1 minute', timestamptz '2025-06-01', 'scheduled', true, now(), now()
         FROM generate_series(1, 5000) g`,
        [ENDS, STAFF],
      )
    })
    // 6,000 customers at one instant: every bucket's bound and every change share its time.
    await testStore.store.admin(async (sql) => {
      await sql.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [INSTANT])
      await sql.query(
        `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
         SELECT $1, 'cus_' || lpad(g::text, 5, '0'), true, timestamptz '2025-05-01 09:00', now()
         FROM generate_series(1, 6000) g`,
        [INSTANT],
      )
    })
    await testStore.store.admin((sql) => sql.query('SELECT list_fold_all()'))
    // From here on no fold runs until the test says so.
    await testStore.store.admin((sql) =>
      sql.query('ALTER TABLE list_changes DISABLE TRIGGER list_fold_at_commit'),
    )
    // Writes one at a time, as a booking screen makes them.
    const writes: string[] = []
    for (let i = 1; i <= 240; i++) {
      const apt = `apt_${String((i * 97) % 7000).padStart(5, '0')}`
      const cus = `cus_${String((i * 89) % 6000).padStart(5, '0')}`
      switch (i % 8) {
        case 0:
          writes.push(
            `UPDATE appointments SET status = 'completed' WHERE org_id = '${ORG}' AND id = '${apt}'`,
          )
          break
        case 1:
          writes.push(
            `UPDATE appointments SET start_at = start_at - interval '${i} minutes' WHERE org_id = '${ORG}' AND id = '${apt}'`,
          )
          break
        case 2:
          writes.push(
            `UPDATE appointments SET is_active = NOT is_active WHERE org_id = '${ORG}' AND id = '${apt}'`,
          )
          break
        case 3:
          writes.push(
            `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
             VALUES ('${ORG}', 'apt_new_${i}', 'stf_b', timestamptz '2025-05-01 09:00', now(), 'scheduled', true, now(), now())`,
          )
          break
        case 4:
          writes.push(`UPDATE appointments SET staff_id = 'stf_a' WHERE org_id = '${ORG}' AND id = '${apt}'`)
          break
        case 5:
          writes.push(
            `UPDATE customers SET created_at = created_at + interval '1 day' WHERE org_id = '${ORG}' AND id = '${cus}'`,
          )
          break
        case 6:
          writes.push(
            `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
             VALUES ('${ORG}', 'cus_new_${i}', true, timestamptz '2025-05-01 09:00', now())`,
          )
          break
        default:
          writes.push(`DELETE FROM appointments WHERE org_id = '${ORG}' AND id = '${apt}'`)
      }
    }
    for (const write of writes) await testStore.store.admin((sql) => sql.query(write))
  }, patience(180_000))

  afterAll(async () => {
    await testStore.store.admin((sql) =>
      sql.query('ALTER TABLE list_changes ENABLE TRIGGER list_fold_at_commit'),
    )
  })

  /** The list as the contract orders it, from the rows. */
  async function truth(
    list: 'customers' | 'appointments',
    filters: AppointmentFilters,
    org = ORG,
  ): Promise<string[]> {
    const where: string[] = ['org_id = $1', 'is_active']
    const params: unknown[] = [org]
    const add = (condition: string, value: unknown) => {
      params.push(value)
      where.push(condition.replace('?', `$${params.length}`))
    }
    if (filters.status) add('status = ?', filters.status)
    if (filters.staffId) add('staff_id = ?', filters.staffId)
    if (filters.startDate) add('start_at >= ?::timestamptz', filters.startDate)
    if (filters.endDate) add('start_at <= ?::timestamptz', filters.endDate)
    const at = list === 'customers' ? 'created_at' : 'start_at'
    const rows = await testStore.store.admin((sql) =>
      sql.query<{ id: string }>(
        `SELECT id FROM ${list} WHERE ${where.join(' AND ')} ORDER BY ${at} DESC, id DESC`,
        params,
      ),
    )
    return rows.map((row) => row.id)
  }

  async function check(
    list: 'customers' | 'appointments',
    filters: AppointmentFilters,
    org = ORG,
    more: readonly number[] = [],
  ): Promise<void> {
    const expected = await truth(list, filters, org)
    const statement: PageStatement =
      list === 'customers' ? customersPage(org) : appointmentsPage(org, filters)
    const total = expected.length
    const offsets = [
      0,
      SEEK_FROM - 1,
      SEEK_FROM,
      SEEK_FROM + 7,
      Math.floor(total / 2) - 3,
      Math.floor(total / 2) + 2,
      total - SEEK_FROM - 30,
      total - SEEK_FROM + 5,
      total - 31,
      total - 1,
      total,
      total + 10,
      ...more,
    ].filter((offset) => offset >= 0)
    // Under SEEK_FROM the page runs its statement without the seek; the whole one, which the
    // seek's conditions leave to the same branches there, must read the same slice.
    const whole: PageStatement = { ...statement, nearRowsText: statement.rowsText }
    for (const offset of offsets) {
      for (const read of offset < SEEK_FROM ? [statement, whole] : [statement]) {
        const page = await testStore.store.read(async (sql) => {
          await sql.query("SELECT set_config('openbook.org_id', $1, true)", [org])
          return fetchPage(testStore.store.adapter, sql, read, { limit: 30, offset })
        })
        const what = `${list} ${JSON.stringify(filters)} at ${offset}${read === whole ? ', whole statement' : ''}`
        expect(page.pagination.total, what).toBe(total)
        const ids =
          page.items.length === 0 ? [] : (JSON.parse(`[${page.items}]`) as { id: string }[]).map((i) => i.id)
        expect(ids, what).toEqual(expected.slice(offset, offset + 30))
      }
    }
  }

  const cases: ['customers' | 'appointments', AppointmentFilters][] = [
    ['customers', {}],
    ['appointments', {}],
    ['appointments', { status: 'completed' }],
    ['appointments', { staffId: 'stf_a' }],
    ['appointments', { staffId: 'stf_b', status: 'scheduled' }],
    ['appointments', { startDate: '2025-05-01T09:00:00Z', endDate: '2025-05-03T12:00:00Z' }],
    ['appointments', { status: 'completed', startDate: '2025-05-01T20:00:00Z' }],
    ['appointments', { staffId: 'stf_a', endDate: '2025-05-02T00:00:00Z' }],
    // Ends in the upper and lower parts of their buckets' time, and past both ends of the list.
    ['appointments', { startDate: '2025-05-02T07:00:00Z', endDate: '2025-05-04T01:00:00Z' }],
    ['appointments', { status: 'confirmed', startDate: '2025-05-03T20:00:00Z' }],
    ['appointments', { startDate: WHOLE_LIST.startDate, endDate: '2025-05-01T10:00:00Z' }],
    ['appointments', { status: 'completed', ...WHOLE_LIST }],
  ]

  it('every page is its slice of the list while changes are pending', async () => {
    const [pending] = await testStore.store.admin((sql) =>
      sql.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1', [ORG]),
    )
    expect(pending?.n).toBeGreaterThan(200)
    for (const [list, filters] of cases) await check(list, filters)
  })

  /**
   * The entries of list_changes the statement's scans read (rows returned and filtered out), and
   * by how many that may be off: EXPLAIN gives a scan run several times its rows per run, rounded.
   */
  async function changesRead(
    statement: PageStatement,
    offset: number,
    org = ORG,
  ): Promise<{ read: number; rounding: number; sorts: number; conditions: string[] }> {
    type Node = { 'Node Type': string; 'Relation Name'?: string; 'Actual Rows'?: number } & {
      'Actual Loops'?: number
      'Rows Removed by Filter'?: number
      'Index Cond'?: string
      Plans?: Node[]
    }
    const [row] = await testStore.store.read(async (sql) => {
      await sql.query("SELECT set_config('openbook.org_id', $1, true)", [org])
      return sql.query<{ 'QUERY PLAN': { Plan: Node }[] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${rowsTextFor(statement, { offset })}`,
        pageParams(statement, { limit: 30, offset }),
      )
    })
    let read = 0
    let rounding = 0
    let sorts = 0
    const conditions: string[] = []
    const walk = (node: Node) => {
      if (node['Relation Name'] === 'list_changes' && (node['Actual Loops'] ?? 0) > 0)
        conditions.push(node['Index Cond'] ?? '')
      if (node['Node Type'] === 'Sort' && (node['Actual Rows'] ?? 0) > 0) sorts++
      if (node['Relation Name'] === 'list_changes' && (node['Actual Loops'] ?? 1) > 1)
        rounding += node['Actual Loops'] ?? 1
      if (node['Relation Name'] === 'list_changes')
        read +=
          ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1)
      for (const child of node.Plans ?? []) walk(child)
    }
    const plan = row?.['QUERY PLAN'][0]?.Plan
    if (!plan) throw new Error('EXPLAIN returned no plan')
    walk(plan)
    return { read, rounding, sorts, conditions }
  }

  /** The changes at the instant of a bucket's bound of `list`, once for each such bound. */
  async function atBounds(org: string, list: string): Promise<number> {
    const [row] = await testStore.store.admin((sql) =>
      sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM buckets b
         JOIN list_changes c ON c.org_id = b.org_id AND c.list = b.list AND c.at = b.lo_at
         WHERE b.org_id = $1 AND b.list = $2`,
        [org, list],
      ),
    )
    return row?.n ?? 0
  }

  it("reads the list's pending changes in one pass, a sought page's too", async () => {
    let soughtLists = 0
    for (const [list, filters] of cases) {
      const statement: PageStatement =
        list === 'customers' ? customersPage(ORG) : appointmentsPage(ORG, filters)
      const [changes] = await testStore.store.admin((sql) =>
        sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = $2',
          [ORG, list],
        ),
      )
      const pending = changes?.n ?? 0
      const total = (await truth(list, filters)).length
      const what = `${list} ${JSON.stringify(filters)}`
      // The version, the total, the seek's slack and the keys of the changes the seek sums, from
      // one scan of the list's changes, in the index's order: no sort of them.
      const sought = total >= 2 * SEEK_FROM + 60
      if (sought) soughtLists++
      for (const [page, offset] of [
        ['first page', 0],
        ...(sought ? [['middle page', Math.floor(total / 2)] as const] : []),
        ['last page', total - 30],
      ] as const) {
        const { read, sorts, conditions } = await changesRead(statement, offset)
        // Read again, by a seek, only the changes at a piece's bound's own instant below its id,
        // each bound's at most twice (the end of one piece and the start of the next).
        const [pass, ...again] = conditions
        expect(pass, `${what}, ${page}`).not.toMatch(/\bat\b/)
        for (const condition of again) expect(condition, `${what}, ${page}`).toMatch(/\(at = .*\(id [<>]=? /)
        expect(read, `${what}, ${page}`).toBeGreaterThanOrEqual(pending)
        expect(read, `${what}, ${page}`).toBeLessThanOrEqual(pending + 2 * (await atBounds(ORG, list)))
        // The pieces are summed in their index's order, and the sums stop at the offset's piece:
        // the one sort that sorts anything is the page's own rows.
        expect(sorts, `${what}, ${page}: sorts`).toBeLessThanOrEqual(1)
      }
    }
    expect(soughtLists).toBeGreaterThanOrEqual(6)
  })

  it("counts a range's ends on the smaller side of their buckets: none of a range past both ends of the list", async () => {
    type Node = { 'Relation Name'?: string; 'Actual Rows'?: number; 'Actual Loops'?: number; Plans?: Node[] }
    for (const filters of [{}, { status: 'completed' }, { staffId: 'stf_a' }] as const) {
      const statement = appointmentsPage(ORG, { ...filters, ...WHOLE_LIST })
      const [row] = await testStore.store.read(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [ORG])
        return sql.query<{ 'QUERY PLAN': { Plan: Node }[] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.countText}`,
          [...statement.params],
        )
      })
      let entries = 0
      const walk = (node: Node) => {
        if (node['Relation Name'] === 'appointments')
          entries += (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1)
        for (const child of node.Plans ?? []) walk(child)
      }
      const plan = row?.['QUERY PLAN'][0]?.Plan
      if (!plan) throw new Error('EXPLAIN returned no plan')
      walk(plan)
      // The list's oldest and newest entries, which place the ends in their buckets' time; a
      // bucket's entries (about 1,000 here) when an end is counted from its bucket's bound.
      expect(entries, JSON.stringify(filters)).toBeLessThanOrEqual(2)
    }
  })

  it("carries the page's total, version and organization on its first row only", async () => {
    for (const [list, filters] of cases) {
      const statement: PageStatement =
        list === 'customers' ? customersPage(ORG) : appointmentsPage(ORG, filters)
      const rows = await testStore.store.read(async (sql) => {
        await sql.query("SELECT set_config('openbook.org_id', $1, true)", [ORG])
        return sql.query<{ id: string; total: number | null; version: string | null; org: string | null }>(
          rowsTextFor(statement, { offset: 60 }),
          pageParams(statement, { limit: 30, offset: 60 }),
        )
      })
      const what = `${list} ${JSON.stringify(filters)}`
      expect(rows, what).toHaveLength(30)
      const [first, ...rest] = rows
      expect(first?.total, what).toBe((await truth(list, filters)).length)
      expect(first?.version, what).toMatch(/^\d+$/)
      expect(first?.org, what).toBe(ORG)
      for (const row of rest)
        expect([row.total, row.version, row.org], `${what} ${row.id}`).toEqual([null, null, null])
    }
  })

  it('and once they are folded', async () => {
    await testStore.store.admin((sql) => sql.query('SELECT list_fold_all()'))
    expect(await bucketFaults(testStore.store)).toEqual([])
    for (const [list, filters] of cases) await check(list, filters)
  })

  it("sums the changes where all lie on one side of a sought page's pieces: a list's newest rows, or its oldest", async () => {
    const lists: ['customers' | 'appointments', AppointmentFilters][] = [
      ['customers', {}],
      ['appointments', {}],
      ['appointments', { staffId: 'stf_b' }],
    ]
    for (const end of ['newest', 'oldest'] as const) {
      // 150 rows of each list at that end moved by a microsecond, 20 of them removed, 40 of the
      // appointments given the other staff member, and 30 rows added beyond that end.
      const order = end === 'newest' ? 'DESC' : 'ASC'
      const beyond =
        end === 'newest'
          ? `'2025-06-01'::timestamptz + g * interval '1 minute'`
          : `'2025-04-01'::timestamptz + g * interval '1 minute'`
      await testStore.store.admin(async (sql) => {
        for (const list of ['customers', 'appointments'])
          await sql.query(`SELECT list_fold($1, $2, true, NULL)`, [ENDS, list])
        const ends = (list: string, at: string, n: number) =>
          `SELECT id FROM ${list} WHERE org_id = $1 AND is_active ORDER BY ${at} ${order}, id ${order} LIMIT ${n}`
        await sql.query(
          `UPDATE customers SET created_at = created_at + interval '1 microsecond' WHERE org_id = $1 AND id IN (${ends('customers', 'created_at', 150)})`,
          [ENDS],
        )
        await sql.query(
          `UPDATE appointments SET start_at = start_at + interval '1 microsecond' WHERE org_id = $1 AND id IN (${ends('appointments', 'start_at', 150)})`,
          [ENDS],
        )
        await sql.query(
          `UPDATE appointments SET staff_id = CASE staff_id WHEN 'stf_a' THEN 'stf_b' ELSE 'stf_a' END
           WHERE org_id = $1 AND id IN (${ends('appointments', 'start_at', 40)})`,
          [ENDS],
        )
        await sql.query(
          `DELETE FROM customers WHERE org_id = $1 AND id IN (${ends('customers', 'created_at', 20)})`,
          [ENDS],
        )
        await sql.query(
          `DELETE FROM appointments WHERE org_id = $1 AND id IN (${ends('appointments', 'start_at', 20)})`,
          [ENDS],
        )
        await sql.query(
          `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
           SELECT $1, 'cus_${end}_' || g, true, ${beyond}, now() FROM generate_series(1, 30) g`,
          [ENDS],
        )
        await sql.query(
          `INSERT INTO appointments (org_id, id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
           SELECT $1, 'apt_${end}_' || g, 'stf_b', ${beyond}, timestamptz '2025-07-01', 'scheduled', true, now(), now()
           FROM generate_series(1, 30) g`,
          [ENDS],
        )
      })
      for (const [list, filters] of lists) {
        const what = `${end}: ${list} ${JSON.stringify(filters)}`
        await check(list, filters, ENDS)
        const statement = list === 'customers' ? customersPage(ENDS) : appointmentsPage(ENDS, filters)
        const [changes] = await testStore.store.admin((sql) =>
          sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = $2',
            [ENDS, list],
          ),
        )
        const pending = changes?.n ?? 0
        expect(pending, what).toBeGreaterThan(300)
        const total = (await truth(list, filters, ENDS)).length
        expect(total, what).toBeGreaterThanOrEqual(2 * SEEK_FROM + 60)
        // Sought pages in both halves, each its slice (`check`), read the changes once: their
        // pieces' sums take them from the pass's keys, all or none of them in each piece.
        expect(await atBounds(ENDS, list), what).toBe(0)
        for (const offset of [Math.floor(total / 2) - 3, Math.floor(total / 2) + 2])
          expect((await changesRead(statement, offset, ENDS)).read, `${what} at ${offset}`).toBe(pending)
      }
    }
  })
  it("sums one instant's changes between a piece's ids, from the pass's keys", async () => {
    // 300 of the instant's customers deactivated, one at a time: changes spread over its ids.
    for (let g = 7; g <= 6000; g += 20)
      await testStore.store.admin((sql) =>
        sql.query(`UPDATE customers SET is_active = false WHERE org_id = $1 AND id = $2`, [
          INSTANT,
          `cus_${String(g).padStart(5, '0')}`,
        ]),
      )
    const [changes] = await testStore.store.admin((sql) =>
      sql.query<{ n: number }>('SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1', [INSTANT]),
    )
    const pending = changes?.n ?? 0
    expect(pending).toBe(300)
    const total = (await truth('customers', {}, INSTANT)).length
    // Every bucket's bound and every change share the instant, so that no piece's sum is a slice
    // of the pass's times: each is read between two ids, each scan bounded by the instant and
    // the ids (a row comparison ends a scan only where its first column decides, and here the
    // time never does). Every page its slice, sought pages a quarter from either end too: the pass
    // reads every change once, the seek those on the near side of its first candidate's bound
    // (about a quarter) and those inside each piece after it.
    const quarters = [Math.floor(total / 4), Math.floor((total * 3) / 4)]
    await check('customers', {}, INSTANT, quarters)
    const between: string[] = []
    for (const offset of quarters) {
      const { read, rounding, conditions } = await changesRead(customersPage(INSTANT), offset, INSTANT)
      expect(read, `at ${offset}`).toBeGreaterThan(pending)
      expect(read, `at ${offset}`).toBeLessThanOrEqual(pending + pending / 2 + rounding)
      const [pass, ...again] = conditions
      expect(pass, `at ${offset}`).not.toMatch(/\bat\b/)
      expect(again.length, `at ${offset}`).toBeGreaterThan(0)
      for (const condition of again) expect(condition, `at ${offset}`).toMatch(/\(at = .*\(id [<>]=? /)
      between.push(...again.filter((condition) => /\(id >= .*\(id < /.test(condition)))
    }
    expect(between.length).toBeGreaterThan(0)
  })
})
