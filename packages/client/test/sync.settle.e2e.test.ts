import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'
import { switchableProxy, sync } from './helpers/sync.js'

/**
 * A writer changes the list while a pass reads it (writes made between two pages, through a
 * proxy that holds the request meanwhile), so no check of the whole list finds it standing still:
 * the rows the pass missed are still settled in that pass. Deleted ones are marked deleted; one
 * whose start moved across the cursor, one whose status and staff member changed with it, are
 * written again; one that cannot be looked up (no customer) waits; the check costs a few requests.
 */

const ORG = 'org_settle'
const OWNER = 'owner@settle.test'
const BASE = Date.parse('2030-03-01T09:00:00.000Z')
const DAY = 86_400_000
const at = (day: number) => new Date(BASE + day * DAY).toISOString()
const aptId = (day: number) => `apt_settle_${day}`
/** Day 8's appointment has no customer. */
const CUSTOMERLESS = 8

let database: TestDatabase
let server: ServerProcess
let key: string
let directory: string

function appointment(day: number, change: Record<string, unknown> = {}): object {
  return {
    type: 'appointment',
    id: aptId(day),
    orgId: ORG,
    ...(day === CUSTOMERLESS ? {} : { customerId: `cus_settle_${day % 10}` }),
    staffId: 'stf_settle_a',
    start: at(day),
    end: new Date(Date.parse(at(day)) + 3_600_000).toISOString(),
    status: 'confirmed',
    isActive: true,
    createdAt: '2030-01-01T00:00:00.000Z',
    updatedAt: '2030-01-01T00:00:00.000Z',
    ...change,
  }
}

function customer(n: number, change: Record<string, unknown> = {}): object {
  return {
    type: 'customer',
    id: `cus_settle_${n}`,
    orgId: ORG,
    isActive: true,
    createdAt: new Date(BASE - 1000 * DAY + n * 3_600_000).toISOString(),
    updatedAt: '2030-01-01T00:00:00.000Z',
    ...change,
  }
}

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_settle')
  server = await startPostgresServer(database.url)
  await server.importLines([
    { type: 'organization', id: ORG, name: 'Settle', plan: 'enterprise' },
    { type: 'user', id: 'usr_settle', email: OWNER },
    { type: 'membership', orgId: ORG, userId: 'usr_settle', role: 'owner' },
    { type: 'staff', id: 'stf_settle_a', orgId: ORG, name: 'A' },
    { type: 'staff', id: 'stf_settle_b', orgId: ORG, name: 'B' },
    ...Array.from({ length: 10 }, (_, n) => customer(n)),
    ...Array.from({ length: 60 }, (_, day) => appointment(day)),
  ])
  const out = await server.cli(['keys', 'create', '--org', ORG, '--as', OWNER, '--env', 'test', '--json'])
  key = (JSON.parse(out) as { key: string }).key
  directory = mkdtempSync(join(tmpdir(), 'openbook-settle-'))
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

const run = (resource: string, out: string, baseUrl: string, pageSize: number) =>
  sync(
    [
      resource,
      '--out',
      out,
      '--page-size',
      String(pageSize),
      '--key-env',
      'KEY',
      '--base-url',
      baseUrl,
      '--json',
    ],
    { cwd: directory, env: { KEY: key } },
  ).done

/** The last line of each row of an NDJSON copy, by id. */
function lastLines(out: string): Map<string, Record<string, unknown>> {
  const rows = new Map<string, Record<string, unknown>>()
  for (const line of readFileSync(out, 'utf8').split('\n').filter(Boolean)) {
    const row = JSON.parse(line) as Record<string, unknown>
    rows.set(String(row.id), row)
  }
  return rows
}

const offsetOf = (url: string) => Number(new URL(url, 'http://x').searchParams.get('offset') ?? 0)

describe.skipIf(!hasPostgres)('openbook-sync under writes during the pass', () => {
  it(
    'settles the appointments it missed in the same pass: deleted ones marked, moved ones written again',
    async () => {
      const out = join(directory, 'appointments.ndjson')
      const first = await run('appointments', out, server.baseUrl, 10)
      expect(first.code, first.stderr).toBe(0)

      // Deleted before the pass began.
      await server.importLines([appointment(30, { isActive: false })])
      const urls: string[] = []
      let wrote = false
      let wroteDuringCheck = false
      const proxy = await switchableProxy(server.baseUrl, async (_n, url) => {
        urls.push(url)
        const query = new URL(url, 'http://x').searchParams
        // The third page of the pass (the latest days, 59 down to about 41, are read): days not
        // read yet move behind the cursor, one is deactivated.
        if (!wrote && query.get('limit') === '10' && offsetOf(url) >= 18 && !query.has('customerId')) {
          wrote = true
          await server.importLines([
            appointment(5, { start: at(58), end: at(58) }),
            appointment(12, {
              start: at(57),
              end: at(57),
              status: 'completed',
              staffId: 'stf_settle_b',
            }),
            appointment(20, { isActive: false }),
            appointment(CUSTOMERLESS, { start: at(56), end: at(56) }),
          ])
        }
        // The writer goes on while the missing rows are looked up.
        if (!wroteDuringCheck && query.has('customerId')) {
          wroteDuringCheck = true
          await server.importLines([appointment(40, { updatedAt: '2030-02-01T00:00:00.000Z' })])
        }
      })
      let second: Record<string, unknown>
      try {
        const result = await run('appointments', out, proxy.url, 10)
        expect(result.code, result.stderr).toBe(0)
        second = JSON.parse(result.stdout)
      } finally {
        await proxy.close()
      }
      expect(wrote).toBe(true)
      expect(second).toMatchObject({
        complete: true,
        checked: 5,
        recovered: 2,
        tombstones: 2,
        deferred: 1,
        deferredSince: 2,
      })
      expect(wroteDuringCheck).toBe(true)
      const rows = lastLines(out)
      const deleted = [...rows.values()].filter((row) => 'deletedAt' in row).map((row) => row.id)
      expect(deleted.sort()).toEqual([aptId(20), aptId(30)].sort())
      expect(rows.get(aptId(5))).toMatchObject({ start: at(58) })
      expect(rows.get(aptId(12))).toMatchObject({
        start: at(57),
        status: 'completed',
        staffId: 'stf_settle_b',
      })
      expect(rows.get(aptId(CUSTOMERLESS))).toMatchObject({ start: at(CUSTOMERLESS) })

      // The check: one request to ask whether the list stood still, then one list per customer of
      // a missing row (3) and one per last known start of the rows not found there (20, 30, 8).
      const lookups = urls.filter((url) => url.includes('customerId=') || url.includes('startDate='))
      expect(lookups.filter((url) => url.includes('customerId='))).toHaveLength(3)
      expect(lookups.filter((url) => url.includes('startDate='))).toHaveLength(3)
      // All told: a plain read of the rows (10, then 9 new a page), one more page to see the end,
      // the run's first question (unchanged since the last pass?), the check's, and the 6 lookups.
      const rowsRead = Number(second.rows) - Number(second.recovered)
      const plainRead = 1 + Math.ceil((rowsRead - 10) / 9)
      expect(Number(second.requests)).toBeLessThanOrEqual(plainRead + Number(second.rereads) + 1 + 1 + 1 + 6)

      // The next pass, nothing written meanwhile, finds the row without a customer at its new start.
      const third = await run('appointments', out, server.baseUrl, 10)
      expect(third.code, third.stderr).toBe(0)
      expect(JSON.parse(third.stdout)).toMatchObject({ complete: true, deferred: 0, tombstones: 0 })
      expect(lastLines(out).get(aptId(CUSTOMERLESS))).toMatchObject({ start: at(56) })
    },
    patience(240_000),
  )

  it(
    'settles the customers it missed in the same pass by reading the list again inside a still window',
    async () => {
      const out = join(directory, 'customers.ndjson')
      const first = await run('customers', out, server.baseUrl, 4)
      expect(first.code, first.stderr).toBe(0)
      // A change before the pass, so that it reads the list rather than finding it unchanged.
      await server.importLines([customer(9, { updatedAt: '2030-02-01T00:00:00.000Z' })])
      let wrote = false
      const proxy = await switchableProxy(server.baseUrl, async (_n, url) => {
        // The second page (the newest customers, 9 down to 6, are read): customer 1 is
        // deactivated, customer 2 moves to the top, behind the cursor.
        if (!wrote && url.startsWith('/api/public/v1/customers') && offsetOf(url) >= 3) {
          wrote = true
          await server.importLines([
            customer(1, { isActive: false }),
            customer(2, { createdAt: new Date(BASE).toISOString() }),
          ])
        }
      })
      let second: Record<string, unknown>
      try {
        const result = await run('customers', out, proxy.url, 4)
        expect(result.code, result.stderr).toBe(0)
        second = JSON.parse(result.stdout)
      } finally {
        await proxy.close()
      }
      expect(wrote).toBe(true)
      expect(second).toMatchObject({ complete: true, checked: 2, recovered: 1, tombstones: 1, deferred: 0 })
      const rows = lastLines(out)
      expect([...rows.values()].filter((row) => 'deletedAt' in row).map((row) => row.id)).toEqual([
        'cus_settle_1',
      ])
      expect(rows.get('cus_settle_2')).toMatchObject({ createdAt: new Date(BASE).toISOString() })
    },
    patience(120_000),
  )
})
