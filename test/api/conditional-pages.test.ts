import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appointmentsPage } from '../../src/queries/appointments.js'
import { customersPage } from '../../src/queries/customers.js'
import { pageParams, rowsTextFor } from '../../src/queries/page-statement.js'
import { MAX_IF_NONE_MATCH_TAGS } from '../../src/routes/public/v1/etag.js'
import { bearer, buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

// Conditional list pages (RFC 9110): a strong ETag on every page, If-None-Match answered 304
// without the page, and a new tag after any write to the organization's list. Over real HTTP.

const STRONG_TAG = /^"(0|[1-9]\d*)-[A-Za-z0-9_-]{22}"$/

describeEachStore('conditional list pages on %s', (testStore) => {
  let app: FastifyInstance
  let base: string
  let key: string
  let otherKey: string

  beforeAll(async () => {
    const { store } = testStore
    const org = await createOrg(store, 'org_c')
    const other = await createOrg(store, 'org_o')
    await addCustomers(store, org.id, [
      { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z', firstName: 'Ann' },
      { id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' },
      { id: 'cus_3', createdAt: '2025-01-03T00:00:00.000Z', isActive: false },
    ])
    await addAppointments(store, org.id, [
      { id: 'apt_1', start: '2025-03-01T10:00:00.000Z', status: 'confirmed' },
      { id: 'apt_2', start: '2025-03-02T10:00:00.000Z', status: 'completed' },
    ])
    await addCustomers(store, other.id, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
    key = (await createKey(store, org)).key
    otherKey = (await createKey(store, other)).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    base = `http://127.0.0.1:${await listenOnLoopback(app)}/api/public/v1`
  })

  afterAll(async () => {
    await app?.close()
  })

  const get = (path: string, headers: Record<string, string> = {}, apiKey = key, method = 'GET') =>
    fetch(`${base}${path}`, { method, headers: { ...bearer(apiKey), ...headers } })
  const tagOf = async (path: string, apiKey = key) => {
    const response = await get(path, {}, apiKey)
    expect(response.status).toBe(200)
    await response.text()
    return String(response.headers.get('etag'))
  }
  const customers = (sql: string) => testStore.store.admin((s) => s.exec(sql))

  it('sends a strong ETag with every page, the same for the same page and query however spelt', async () => {
    const tag = await tagOf('/customers')
    expect(tag).toMatch(STRONG_TAG)
    expect(await tagOf('/customers')).toBe(tag)
    // The query as checked: an offset of 0 and none, the default limit and 50, are one query.
    expect(await tagOf('/customers?offset=0&limit=50')).toBe(tag)
    expect(await tagOf('/appointments')).toMatch(STRONG_TAG)
  })

  it('a tag names one query, one list and one organization', async () => {
    const tags = await Promise.all(
      [
        '/customers',
        '/customers?limit=1',
        '/customers?offset=1',
        '/appointments',
        '/appointments?status=confirmed',
      ]
        .map((path) => tagOf(path))
        .concat(tagOf('/customers', otherKey)),
    )
    expect(new Set(tags).size).toBe(tags.length)
  })

  it('gives each content-coding of a page its own tag, and answers any of them 304 with that tag', async () => {
    // A page over the compression threshold (1 KiB): 30 customers of an organization of its own.
    const { store } = testStore
    const big = await createOrg(store, 'org_coded')
    await addCustomers(
      store,
      big.id,
      Array.from({ length: 30 }, (_, i) => ({
        id: `cus_${i}`,
        createdAt: `2025-01-${String(i + 1).padStart(2, '0')}T00:00:00.000Z`,
        firstName: `Name ${i}`,
      })),
    )
    const bigKey = (await createKey(store, big)).key
    const answers = new Map<string, { tag: string; body: string }>()
    for (const coding of ['identity', 'gzip', 'br']) {
      const response = await get('/customers', { 'accept-encoding': coding }, bigKey)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-encoding') ?? 'identity').toBe(coding)
      answers.set(coding, { tag: String(response.headers.get('etag')), body: await response.text() })
    }
    const tags = [...answers.values()].map((answer) => answer.tag)
    for (const tag of tags) expect(tag).toMatch(STRONG_TAG)
    expect(new Set(tags).size).toBe(3)
    // The same page in each coding (fetch decodes it).
    expect(new Set([...answers.values()].map((answer) => answer.body)).size).toBe(1)
    for (const [coding, { tag }] of answers) {
      const again = await get('/customers', { 'accept-encoding': coding, 'if-none-match': tag }, bigKey)
      expect(again.status).toBe(304)
      expect(again.headers.get('etag')).toBe(tag)
    }
  })

  it('answers If-None-Match with its tag 304: no body, the tag and the contract headers', async () => {
    const tag = await tagOf('/appointments?status=completed')
    for (const method of ['GET', 'HEAD']) {
      const response = await get('/appointments?status=completed', { 'if-none-match': tag }, key, method)
      expect(response.status).toBe(304)
      expect(await response.text()).toBe('')
      expect(response.headers.get('etag')).toBe(tag)
      expect(response.headers.get('cache-control')).toBe('no-store')
      expect(response.headers.get('x-request-id')).toBeTruthy()
      expect(response.headers.get('x-content-type-options')).toBe('nosniff')
      expect(response.headers.get('content-length')).toBeNull()
    }
  })

  it(`compares the first ${MAX_IF_NONE_MATCH_TAGS} tags of If-None-Match, ignores the rest, and says so in the OpenAPI document`, async () => {
    const tag = await tagOf('/customers')
    const others = Array.from(
      { length: MAX_IF_NONE_MATCH_TAGS - 1 },
      (_, i) => `"0-${String(i).padStart(22, 'x')}"`,
    )
    const status = async (tags: readonly string[]) => {
      const response = await get('/customers', { 'if-none-match': tags.join(', ') })
      await response.text()
      return response.status
    }
    // The matching tag as the last one compared: 304; one place later, past the bound: the page.
    expect(await status([...others, tag])).toBe(304)
    expect(await status([...others, '"0-yyyyyyyyyyyyyyyyyyyyyy"', tag])).toBe(200)
    const document = (await (await fetch(`${base.replace('/api/public/v1', '')}/openapi.json`)).json()) as {
      components: { parameters: { IfNoneMatch: { description: string } } }
    }
    expect(document.components.parameters.IfNoneMatch.description).toContain(
      `Only the first ${MAX_IF_NONE_MATCH_TAGS} tags of the header are compared; any after them are ignored`,
    )
  })

  it('matches per RFC 9110: *, a list of tags, weak comparison; anything else is an unconditional GET', async () => {
    const tag = await tagOf('/customers')
    const status = async (ifNoneMatch: string) => {
      const response = await get('/customers', { 'if-none-match': ifNoneMatch })
      const body = await response.text()
      if (response.status === 200) expect(JSON.parse(body).data.length).toBe(2)
      else expect(response.headers.get('etag')).toBe(tag)
      return response.status
    }
    expect(await status('*')).toBe(304)
    expect(await status(`"x", ${tag}, W/"y"`)).toBe(304)
    expect(await status(`W/${tag}`)).toBe(304)
    expect(await status('"other"')).toBe(200)
    expect(await status('not a tag')).toBe(200)
    expect(await status(tag.slice(1, -1))).toBe(200)
    // This version's tag of another query: the version matches, the tag does not; the page is sent.
    expect(await status(await tagOf('/customers?limit=1'))).toBe(200)
    // Another organization's tag.
    expect(await status(await tagOf('/customers', otherKey))).toBe(200)
  })

  it('a wrong key or a bad query is answered as without the condition (401, 400), never 304', async () => {
    const tag = await tagOf('/customers')
    const wrongKey = `svc_test_${'0'.repeat(64)}`
    expect((await get('/customers', { 'if-none-match': tag }, wrongKey)).status).toBe(401)
    expect((await get('/customers', { 'if-none-match': '*' }, wrongKey)).status).toBe(401)
    expect((await get('/customers?limit=0', { 'if-none-match': '*' })).status).toBe(400)
  })

  it("any write to the organization's list changes its tags; another organization's or list's, or an inactive row's, does not", async () => {
    const writes: [string, string][] = [
      [
        'an update of one field',
        "UPDATE customers SET first_name = 'Bea' WHERE org_id = 'org_c' AND id = 'cus_1'",
      ],
      ['a deactivation', "UPDATE customers SET is_active = false WHERE org_id = 'org_c' AND id = 'cus_2'"],
      ['a reactivation', "UPDATE customers SET is_active = true WHERE org_id = 'org_c' AND id = 'cus_2'"],
      [
        'an insert',
        "INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ('org_c', 'cus_4', true, now(), now())",
      ],
      ['a delete', "DELETE FROM customers WHERE org_id = 'org_c' AND id = 'cus_4'"],
    ]
    for (const [what, sql] of writes) {
      const paths = ['/customers', '/customers?limit=1&offset=1']
      const before = await Promise.all(paths.map((path) => tagOf(path)))
      // Writes elsewhere: another organization's customers, this organization's appointments.
      await customers("UPDATE customers SET first_name = first_name || 'x' WHERE org_id = 'org_o'")
      await customers("UPDATE appointments SET note = coalesce(note, '') || 'x' WHERE org_id = 'org_c'")
      for (const [i, path] of paths.entries()) {
        const response = await get(path, { 'if-none-match': String(before[i]) })
        expect(response.status, `${path} after writes elsewhere`).toBe(304)
      }
      await customers(sql)
      for (const [i, path] of paths.entries()) {
        const response = await get(path, { 'if-none-match': String(before[i]) })
        expect(response.status, `${path} after ${what}`).toBe(200)
        expect(response.headers.get('etag')).not.toBe(before[i])
        expect(JSON.parse(await response.text()).pagination).toBeDefined()
      }
    }
    // A row no page shows: its change leaves every page, and so every tag, as it was.
    const paths = ['/customers', '/customers?limit=1&offset=1']
    const before = await Promise.all(paths.map((path) => tagOf(path)))
    const inactive: [string, string][] = [
      [
        'an update of an inactive row',
        "UPDATE customers SET city = 'Oslo' WHERE org_id = 'org_c' AND id = 'cus_3'",
      ],
      [
        'an insert of an inactive row',
        "INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ('org_c', 'cus_5', false, now(), now())",
      ],
      ['a delete of an inactive row', "DELETE FROM customers WHERE org_id = 'org_c' AND id = 'cus_5'"],
    ]
    for (const [what, sql] of inactive) {
      await customers(sql)
      for (const [i, path] of paths.entries()) {
        const response = await get(path, { 'if-none-match': String(before[i]) })
        expect(response.status, `${path} after ${what}`).toBe(304)
        expect(response.headers.get('etag'), `${path} after ${what}`).toBe(before[i])
      }
    }
  })

  it('an import of rows as they are (nothing changes) keeps the tags', async () => {
    const tag = await tagOf('/customers')
    await addCustomers(testStore.store, 'org_c', [
      { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z', firstName: 'Bea' },
    ])
    expect((await get('/customers', { 'if-none-match': tag })).status).toBe(304)
    await addCustomers(testStore.store, 'org_c', [
      { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z', firstName: 'Cid' },
    ])
    expect((await get('/customers', { 'if-none-match': tag })).status).toBe(200)
  })

  it('TRUNCATE changes every tag of the list', async () => {
    const tag = await tagOf('/appointments')
    await customers('TRUNCATE appointments')
    const response = await get('/appointments', { 'if-none-match': tag })
    expect(response.status).toBe(200)
    expect(JSON.parse(await response.text()).pagination.total).toBe(0)
  })

  describe('304 without reading the page', () => {
    const readTables = ['customers', 'appointments', 'buckets']
    const statements = [
      ['customers', customersPage('org_c')],
      [
        'appointments by status and dates',
        appointmentsPage('org_c', {
          status: 'completed',
          startDate: '2025-01-01T00:00:00Z',
          endDate: '2026-01-01T00:00:00Z',
        }),
      ],
      ['appointments by customer', appointmentsPage('org_c', { customerId: 'cus_1' })],
    ] as const
    it.each(statements)(
      "%s: only the list's version is read when the client holds the version",
      async (_name, statement) => {
        const executed = await testStore.store.read(async (sql) => {
          await sql.query("SELECT set_config('openbook.org_id', 'org_c', true)")
          const list = statement.rowsText.includes('appointments k') ? 'appointments' : 'customers'
          const [current] = await sql.query<{ version: string }>(
            `SELECT (coalesce((SELECT changes FROM list_folds WHERE org_id = 'org_c' AND list = $1), 0)
               + (SELECT count(*) FROM list_changes WHERE org_id = 'org_c' AND list = $1))::text AS version`,
            [list],
          )
          const run = async (text: string, known: readonly string[]) => {
            const [row] = await sql.query<{ 'QUERY PLAN': unknown }>(
              `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
              pageParams(statement, { limit: 10, offset: 0 }, known),
            )
            const plan = row?.['QUERY PLAN']
            const found: string[] = []
            const walk = (node: Record<string, unknown>) => {
              const relation = node['Relation Name']
              if (typeof relation === 'string' && Number(node['Actual Loops']) > 0) found.push(relation)
              for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child)
            }
            const [explained] = (typeof plan === 'string' ? JSON.parse(plan) : plan) as {
              Plan: Record<string, unknown>
            }[]
            if (!explained) throw new Error('EXPLAIN returned no plan')
            walk(explained.Plan)
            return found
          }
          // The statement a first page runs, and the one for any offset.
          const texts = [rowsTextFor(statement, { offset: 0 }), statement.rowsText]
          const runs = []
          for (const text of texts)
            runs.push({ held: await run(text, [String(current?.version)]), other: await run(text, ['0']) })
          return runs
        })
        expect(executed).toHaveLength(2)
        for (const { held, other } of executed) {
          expect(held.filter((table) => readTables.includes(table))).toEqual([])
          expect(held).toContain('list_folds')
          // The control: with another version the same statement reads the page.
          expect(other.some((table) => readTables.includes(table))).toBe(true)
        }
      },
    )
  })
})
