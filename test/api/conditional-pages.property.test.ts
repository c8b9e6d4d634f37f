import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AdminSql } from '../../src/store/types.js'
import { bearer, buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, postgresAvailable, type TestStore } from '../helpers/stores.js'

// Exactness of the list pages' ETags under a concurrent writer, on real PostgreSQL.
//
// The writer is the only one to write organization org_p. Each of its transactions makes one
// random change (insert, insert inactive, change a field, deactivate, reactivate, delete, move in
// the order, rewrite a row as it is) and, before it commits, reads its list's version and the
// whole active list as it leaves it: the truth of that version. Meanwhile random pages of both
// lists are asked for, with and without If-None-Match. Afterwards:
// - every 200 is its query's slice of the truth of the version its ETag names, total included
//   (the version and the page come from one snapshot, so the tag describes the body);
// - every 304 answered a tag first sent with such a 200, and names the version the server read:
//   the page it stands for is the truth of that version, so no 304 hides a change;
// - with the writer moved to another organization and org_p's other list, every held tag is
//   answered 304 (nothing changed, so nothing is sent).

type List = 'customers' | 'appointments'
interface Row {
  readonly id: string
  readonly at: string
  readonly label: string | null
  readonly status: string | null
}
interface Query {
  readonly list: List
  readonly limit: number
  readonly offset: number
  readonly status?: string
  readonly range?: readonly [string, string]
}
interface Observation {
  readonly query: Query
  readonly status: number
  readonly etag: string
  readonly sent?: string
  readonly body?: { data: Record<string, unknown>[]; pagination: { total: number; hasMore: boolean } }
}

const ORG = 'org_p'
const STATUSES = ['scheduled', 'confirmed', 'completed'] as const
const DAY = 86_400_000
const BASE = Date.parse('2025-01-01T00:00:00.000Z')
const versionOf = (etag: string) => /^"(\d+)-/.exec(etag)?.[1] ?? 'none'

/** The active list as the page statement orders it, read by the writer before it commits. */
async function truthOf(sql: AdminSql, list: List): Promise<{ version: string; rows: Row[] }> {
  const [v] = await sql.query<{ version: string }>(
    `SELECT (coalesce((SELECT changes FROM list_folds WHERE org_id = $1 AND list = $2), 0)
       + (SELECT count(*) FROM list_changes WHERE org_id = $1 AND list = $2))::text AS version`,
    [ORG, list],
  )
  const rows =
    list === 'customers'
      ? await sql.query<Row>(
          `SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at,
                  first_name AS label, NULL AS status
             FROM customers WHERE org_id = $1 AND is_active ORDER BY created_at DESC, id DESC`,
          [ORG],
        )
      : await sql.query<Row>(
          `SELECT id, to_char(start_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at,
                  note AS label, status
             FROM appointments WHERE org_id = $1 AND is_active ORDER BY start_at DESC, id DESC`,
          [ORG],
        )
  return { version: String(v?.version), rows }
}

function expectedPage(rows: readonly Row[], query: Query) {
  const selected = rows.filter(
    (row) =>
      (query.status === undefined || row.status === query.status) &&
      (query.range === undefined || (row.at >= query.range[0] && row.at <= query.range[1])),
  )
  return {
    total: selected.length,
    page: selected.slice(query.offset, query.offset + query.limit),
  }
}

function pathOf(query: Query): string {
  const params = new URLSearchParams({ limit: String(query.limit), offset: String(query.offset) })
  if (query.status) params.set('status', query.status)
  if (query.range) {
    params.set('startDate', query.range[0])
    params.set('endDate', query.range[1])
  }
  return `/${query.list}?${params}`
}

const iso = (day: number) => new Date(BASE + day * DAY).toISOString()

describe.skipIf(!postgresAvailable())('ETag exactness under a concurrent writer (PostgreSQL)', () => {
  let testStore: TestStore
  let app: FastifyInstance
  let base: string
  let key: string
  /** Per list, the truth of each version the writer committed. */
  const truths: Record<List, Map<string, Row[]>> = { customers: new Map(), appointments: new Map() }
  let serial = 0

  beforeAll(async () => {
    testStore = await createTestStore('postgres', { maxConnections: 6 })
    const { store } = testStore
    const org = await createOrg(store, ORG)
    await createOrg(store, 'org_elsewhere')
    await addCustomers(
      store,
      ORG,
      Array.from({ length: 60 }, (_, i) => ({ id: `cus_${i}`, createdAt: iso(i % 40), firstName: `n${i}` })),
    )
    await addAppointments(
      store,
      ORG,
      Array.from({ length: 80 }, (_, i) => ({
        id: `apt_${i}`,
        start: iso(i % 50),
        status: STATUSES[i % 3],
        note: `n${i}`,
      })),
    )
    for (const list of ['customers', 'appointments'] as const) {
      const truth = await store.admin((sql) => truthOf(sql, list))
      truths[list].set(truth.version, truth.rows)
    }
    key = (await createKey(store, org)).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    base = `http://127.0.0.1:${await listenOnLoopback(app)}/api/public/v1`
  }, 60_000)

  afterAll(async () => {
    await app?.close()
    await testStore?.close()
  })

  /** One random change of `org`'s `list` in one transaction; for org_p, its truth recorded. */
  async function write(list: List, org: string, random: () => number): Promise<void> {
    const table = list
    const pick = Math.floor(random() * 8)
    const n = Math.floor(random() * 70)
    const id = `${list === 'customers' ? 'cus' : 'apt'}_${n}`
    const label = list === 'customers' ? 'first_name' : 'note'
    const at = list === 'customers' ? 'created_at' : 'start_at'
    const truth = await testStore.store.admin(async (sql) => {
      const statements = [
        // Insert (or, when the id is taken, change it): a new row of the list, active or not.
        () =>
          list === 'customers'
            ? `INSERT INTO customers (org_id, id, first_name, is_active, created_at, updated_at)
               VALUES ('${org}', 'cus_new${++serial}', 'new', ${random() < 0.8}, '${iso(n % 45)}', now())`
            : `INSERT INTO appointments (org_id, id, start_at, end_at, status, note, is_active, created_at, updated_at)
               VALUES ('${org}', 'apt_new${++serial}', '${iso(n % 55)}', '${iso((n % 55) + 1)}',
                       '${STATUSES[n % 3]}', 'new', ${random() < 0.8}, now(), now())`,
        () => `UPDATE ${table} SET ${label} = 'w${++serial}' WHERE org_id = '${org}' AND id = '${id}'`,
        () => `UPDATE ${table} SET is_active = false WHERE org_id = '${org}' AND id = '${id}'`,
        () => `UPDATE ${table} SET is_active = true WHERE org_id = '${org}' AND id = '${id}'`,
        () =>
          `UPDATE ${table} SET ${at} = '${iso(n % 60)}'${list === 'appointments' ? `, end_at = '${iso((n % 60) + 1)}'` : ''}
           WHERE org_id = '${org}' AND id = '${id}'`,
        () =>
          list === 'appointments'
            ? `UPDATE appointments SET status = '${STATUSES[(n + 1) % 3]}' WHERE org_id = '${org}' AND id = '${id}'`
            : `UPDATE customers SET updated_at = updated_at WHERE org_id = '${org}' AND id = '${id}'`,
        // A row rewritten as it is (an import of the same record): no change.
        () => `UPDATE ${table} SET ${label} = ${label} WHERE false`,
        () =>
          list === 'appointments'
            ? `DELETE FROM appointments WHERE org_id = '${org}' AND id = '${id}'`
            : `DELETE FROM customers c WHERE org_id = '${org}' AND id = '${id}'
                 AND NOT EXISTS (SELECT 1 FROM appointments a WHERE a.org_id = c.org_id AND a.customer_id = c.id)`,
      ]
      await sql.exec(statements[pick]?.() ?? 'SELECT 1')
      return org === ORG ? truthOf(sql, list) : undefined
    })
    if (truth) truths[list].set(truth.version, truth.rows)
  }

  /** Writes until `stop`; `where` picks the organization and list of each write. */
  function writer(stop: () => boolean, where: (random: () => number) => [List, string], seed: number) {
    let state = seed
    const random = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31
      return state / 2 ** 31
    }
    let writes = 0
    const done = (async () => {
      while (!stop()) {
        const [list, org] = where(random)
        await write(list, org, random)
        writes++
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 4)))
      }
    })()
    return { done, writes: () => writes }
  }

  const request = async (query: Query, ifNoneMatch?: string): Promise<Observation> => {
    const response = await fetch(`${base}${pathOf(query)}`, {
      headers: { ...bearer(key), ...(ifNoneMatch ? { 'if-none-match': ifNoneMatch } : {}) },
    })
    const text = await response.text()
    const etag = String(response.headers.get('etag'))
    return {
      query,
      status: response.status,
      etag,
      ...(ifNoneMatch ? { sent: ifNoneMatch } : {}),
      ...(response.status === 200 ? { body: JSON.parse(text) } : {}),
    }
  }

  const queries = fc.record(
    {
      list: fc.constantFrom<List>('customers', 'appointments'),
      limit: fc.integer({ min: 1, max: 30 }),
      offset: fc.integer({ min: 0, max: 90 }),
      status: fc.constantFrom(...STATUSES),
      range: fc
        .tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 20 }))
        .map(([from, days]) => [iso(from), iso(from + days)] as const),
    },
    { requiredKeys: ['list', 'limit', 'offset'] },
  )

  it('no 304 when anything changed the page or its total, and every 200 is the truth of its tag', async () => {
    let stopped = false
    const background = writer(
      () => stopped,
      (random) => [random() < 0.5 ? 'customers' : 'appointments', random() < 0.8 ? ORG : 'org_elsewhere'],
      7,
    )
    const observations: Observation[] = []
    const held = new Map<string, string>()
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(queries, { minLength: 1, maxLength: 6 }), async (batch) => {
          for (const raw of batch) {
            const query: Query =
              raw.list === 'customers' ? { list: 'customers', limit: raw.limit, offset: raw.offset } : raw
            const path = pathOf(query)
            const first = await request(query, held.get(path))
            observations.push(first)
            if (first.status === 200) held.set(path, first.etag)
            // Again at once with the tag just sent: 304 unless the writer changed the list since.
            observations.push(await request(query, first.etag))
          }
        }),
        { numRuns: 150, seed: 31 },
      )
    } finally {
      stopped = true
      await background.done
    }
    const sentWith200 = new Set<string>()
    let checked200 = 0
    let checked304 = 0
    for (const seen of observations) {
      const version = versionOf(seen.etag)
      const rows = truths[seen.query.list].get(version)
      expect(rows, `${pathOf(seen.query)}: version ${version} is one the writer committed`).toBeDefined()
      const expected = expectedPage(rows ?? [], seen.query)
      if (seen.status === 200) {
        checked200++
        sentWith200.add(seen.etag)
        const body = seen.body
        expect(body?.pagination.total, `${pathOf(seen.query)} at version ${version}`).toBe(expected.total)
        expect(
          body?.data.map((item) => [item.id, item.firstName ?? item.note ?? null]),
          `${pathOf(seen.query)} at version ${version}`,
        ).toEqual(expected.page.map((row) => [row.id, row.label]))
        if (seen.query.list === 'appointments')
          expect(body?.data.map((item) => [item.start, item.status])).toEqual(
            expected.page.map((row) => [row.at, row.status]),
          )
      } else {
        checked304++
        expect(seen.status).toBe(304)
        expect(seen.etag).toBe(seen.sent)
      }
    }
    // A 304 only ever confirms a tag that came with a 200 checked above.
    for (const seen of observations.filter((o) => o.status === 304))
      expect(sentWith200.has(seen.etag)).toBe(true)
    // The run met both answers many times, and the writer changed both lists under it (a write
    // takes tens to hundreds of milliseconds on a loaded machine: 37 writes, 9 and 18 versions, in
    // one run of 13 s at a load average of 7 on 2 cores).
    expect(checked200).toBeGreaterThan(100)
    expect(checked304).toBeGreaterThan(50)
    expect(truths.customers.size).toBeGreaterThan(3)
    expect(truths.appointments.size).toBeGreaterThan(3)
    expect(background.writes()).toBeGreaterThan(10)
  }, 240_000)

  it('a 304 whenever nothing changed: writes to another organization and the other list only', async () => {
    for (const list of ['customers', 'appointments'] as const) {
      let stopped = false
      const other: List = list === 'customers' ? 'appointments' : 'customers'
      const background = writer(
        () => stopped,
        (random) => (random() < 0.5 ? [other, ORG] : [list, 'org_elsewhere']),
        11,
      )
      try {
        await fc.assert(
          fc.asyncProperty(queries, async (raw) => {
            const query: Query =
              list === 'customers' ? { list, limit: raw.limit, offset: raw.offset } : { ...raw, list }
            const first = await request(query)
            expect(first.status).toBe(200)
            const again = await request(query, first.etag)
            expect(again.status, pathOf(query)).toBe(304)
            expect(again.etag).toBe(first.etag)
          }),
          { numRuns: 60, seed: 32 },
        )
      } finally {
        stopped = true
        await background.done
      }
      expect(background.writes()).toBeGreaterThan(0)
    }
  }, 240_000)
})
