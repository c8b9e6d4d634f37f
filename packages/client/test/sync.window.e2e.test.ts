import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'
import { integratorProject, switchableProxy, sync } from './helpers/sync.js'

/**
 * A nightly rolling window (`--window -90d..+30d`), two nights apart (`--now`), against a real
 * server on PostgreSQL: rows that age out of the window or are moved out of it are marked
 * left-window, never deleted; an appointment moved during the pass ahead of the cursor (so the
 * pass misses it) is found again and kept; one moved behind the cursor after it was read is met
 * again and counted, not written twice; only a deactivated one is marked deleted, in that pass.
 */

const ORG = 'org_window'
const OWNER = 'owner@window.test'
const NIGHT_1 = Date.parse('2030-06-01T12:00:00.000Z')
const NIGHT_2 = NIGHT_1 + 5 * 86_400_000
const DAY = 86_400_000
const at = (day: number) => new Date(NIGHT_1 + day * DAY).toISOString()
const id = (day: number) => `apt_day_${day < 0 ? `m${-day}` : day}`

let database: TestDatabase
let target: TestDatabase
let server: ServerProcess
let key: string
let db: pg.Client
let directory: string

function appointment(day: number, start = at(day), active = true): object {
  return {
    type: 'appointment',
    id: id(day),
    orgId: ORG,
    customerId: `cus_w_${((day % 7) + 7) % 7}`,
    start,
    end: new Date(Date.parse(start) + 3_600_000).toISOString(),
    status: 'confirmed',
    isActive: active,
    createdAt: '2030-01-01T00:00:00.000Z',
    updatedAt: '2030-01-01T00:00:00.000Z',
  }
}

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_window')
  target = await createDatabase('openbook_window_crm')
  server = await startPostgresServer(database.url)
  await server.importLines([
    { type: 'organization', id: ORG, name: 'Window', plan: 'enterprise' },
    { type: 'user', id: 'usr_window', email: OWNER },
    { type: 'membership', orgId: ORG, userId: 'usr_window', role: 'owner' },
    ...Array.from({ length: 7 }, (_, n) => ({
      type: 'customer',
      id: `cus_w_${n}`,
      orgId: ORG,
      isActive: true,
      createdAt: '2030-01-01T00:00:00.000Z',
      updatedAt: '2030-01-01T00:00:00.000Z',
    })),
    // One appointment a day, from 120 days before the first night to 45 days after it.
    ...Array.from({ length: 166 }, (_, n) => appointment(n - 120)),
  ])
  const out = await server.cli(['keys', 'create', '--org', ORG, '--as', OWNER, '--env', 'test', '--json'])
  key = (JSON.parse(out) as { key: string }).key
  db = new pg.Client({ connectionString: target.url })
  await db.connect()
  directory = integratorProject('openbook-sync-window-')
}, patience(180_000))

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
  await target?.drop()
})

const run = (args: readonly string[], baseUrl = server.baseUrl) =>
  sync(
    ['appointments', '--window', '-90d..+30d', ...args, '--key-env', 'KEY', '--base-url', baseUrl, '--json'],
    {
      cwd: directory,
      env: { KEY: key },
    },
  )

/** The active appointments of the window as of `now`, whole, by id, as the API serves them. */
async function windowRows(now: number): Promise<Map<string, unknown>> {
  const api = new Openbook({ apiKey: key, baseUrl: server.baseUrl })
  const rows = new Map<string, unknown>()
  const window = { startDate: new Date(now - 90 * DAY), endDate: new Date(now + 30 * DAY) }
  for await (const row of api.appointments.all(window)) rows.set(row.id, row)
  return rows
}

const sorted = (ids: Iterable<string>) => [...ids].sort()

describe.skipIf(!hasPostgres)('openbook-sync --window, night after night', () => {
  it(
    'marks rows that leave the window as such, keeps moved ones, deletes only deactivated ones, while the list moves',
    async () => {
      const table = `openbook_appointments_${ORG}`
      const out = join(directory, 'appointments.ndjson')
      // Night 1, into PostgreSQL and into a file.
      for (const args of [
        ['--pg', target.url],
        ['--out', out],
      ]) {
        const first = await run([...args, '--now', at(0)]).done
        expect(first.code, first.stderr).toBe(0)
        expect(JSON.parse(first.stdout)).toMatchObject({
          complete: true,
          rows: 121,
          window: { since: at(-90), until: at(30) },
        })
      }

      // Between the nights: one appointment cancelled (deactivated), one moved out of the window.
      await server.importLines([appointment(-10, at(-10), false), appointment(-50, at(-200))])

      // Night 2, five days later. After three pages (days 35 … 9 read), day -60 (not read yet) is
      // moved to day 20 (read already: the pass misses it), and day 25 (read) to day -70 (not read
      // yet: the pass meets it again).
      const proxy = await switchableProxy(server.baseUrl, async (n) => {
        if (n === 5) await server.importLines([appointment(-60, at(20)), appointment(25, at(-70))])
      })
      let night2: Record<string, unknown>
      try {
        const second = await run(['--pg', target.url, '--now', at(5), '--page-size', '10'], proxy.url).done
        expect(second.code, second.stderr).toBe(0)
        night2 = JSON.parse(second.stdout)
      } finally {
        await proxy.close()
      }
      const aged = [-90, -89, -88, -87, -86].map(id)
      // The list changed while the pass read it: the rows it missed inside the window (day -60,
      // moved behind the cursor; day -10, cancelled; day -50, moved out) are looked up by their
      // customers' lists and their last known starts, in this pass: day -60 is written at its new
      // start, day -50 found outside the window, day -10 gone. The aged ones left by their start.
      expect(night2).toMatchObject({
        complete: true,
        window: { since: at(-85), until: at(35) },
        moved: 1,
        checked: aged.length + 3,
        recovered: 1,
        leftWindow: aged.length + 1,
        tombstones: 1,
        deferred: 0,
      })
      // The next pass (the same night again, nothing written meanwhile) has nothing left to settle.
      const again = await run(['--pg', target.url, '--now', at(5), '--page-size', '10']).done
      expect(again.code, again.stderr).toBe(0)
      expect(JSON.parse(again.stdout)).toMatchObject({ complete: true, checked: 0, deferred: 0 })

      const rows = (
        await db.query<{
          id: string
          data: { start: string }
          deleted_at: Date | null
          left_window_at: Date | null
        }>(`select id, data, deleted_at, left_window_at from "${table}"`)
      ).rows
      const live = new Map(
        rows
          .filter((row) => row.deleted_at === null && row.left_window_at === null)
          .map((row) => [row.id, row.data]),
      )
      expect(live).toEqual(await windowRows(NIGHT_2))
      expect(live.get(id(-60))?.start).toBe(at(20))
      expect(live.get(id(25))?.start).toBe(at(-70))
      expect(sorted(rows.filter((row) => row.left_window_at !== null).map((row) => row.id))).toEqual(
        sorted([...aged, id(-50)]),
      )
      expect(rows.filter((row) => row.left_window_at !== null).every((row) => row.deleted_at === null)).toBe(
        true,
      )
      expect(rows.filter((row) => row.deleted_at !== null).map((row) => row.id)).toEqual([id(-10)])

      // The file, night 2 (the moves are made by now): the same outcome, in lines.
      const file = await run(['--out', out, '--now', at(5)]).done
      expect(file.code, file.stderr).toBe(0)
      expect(JSON.parse(file.stdout)).toMatchObject({
        complete: true,
        leftWindow: aged.length + 1,
        tombstones: 1,
      })
      const last = new Map<string, Record<string, unknown>>()
      for (const line of readFileSync(out, 'utf8').split('\n').filter(Boolean)) {
        const row = JSON.parse(line) as Record<string, unknown>
        last.set(String(row.id), row)
      }
      const marked = (field: string) =>
        sorted([...last.values()].filter((row) => field in row).map((row) => String(row.id)))
      expect(marked('leftWindowAt')).toEqual(sorted([...aged, id(-50)]))
      expect(marked('deletedAt')).toEqual([id(-10)])
      const fileLive = new Map(
        [...last].filter(([, row]) => !('leftWindowAt' in row) && !('deletedAt' in row)),
      )
      expect(fileLive).toEqual(await windowRows(NIGHT_2))
    },
    patience(240_000),
  )

  it(
    'decides appointments without a customer too: deleted when deactivated, left-window when moved out',
    async () => {
      const out = join(directory, 'no-customer.ndjson')
      const orphan = (name: string, start: string, active = true) => ({
        ...appointment(0, start, active),
        id: `apt_no_customer_${name}`,
        customerId: undefined,
      })
      await server.importLines([orphan('gone', at(10)), orphan('moved', at(11))])
      const first = await run(['--out', out, '--now', at(5)]).done
      expect(first.code, first.stderr).toBe(0)
      // One deactivated, one moved out of the window; nothing else changes before the next pass.
      await server.importLines([orphan('gone', at(10), false), orphan('moved', at(-200))])
      const second = await run(['--out', out, '--now', at(5)]).done
      expect(second.code, second.stderr).toBe(0)
      expect(JSON.parse(second.stdout)).toMatchObject({
        complete: true,
        checked: 2,
        tombstones: 1,
        leftWindow: 1,
      })
      const lines = readFileSync(out, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
      expect(lines.filter((row) => 'deletedAt' in row).map((row) => row.id)).toEqual(['apt_no_customer_gone'])
      expect(lines.filter((row) => 'leftWindowAt' in row).map((row) => row.id)).toEqual([
        'apt_no_customer_moved',
      ])
    },
    patience(120_000),
  )

  it(
    'refuses --window with --since, for customers, or malformed',
    async () => {
      for (const args of [
        ['--since', at(0), '--out', join(directory, 'x.ndjson')],
        ['--window', '90 days', '--out', join(directory, 'x.ndjson')],
        ['--window', '+30d..-90d', '--out', join(directory, 'x.ndjson')],
      ]) {
        const result = await run(args).done
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2)
      }
      const customers = await sync(
        [
          'customers',
          '--window',
          '-90d..+30d',
          '--key-env',
          'KEY',
          '--base-url',
          server.baseUrl,
          '--out',
          join(directory, 'c.ndjson'),
        ],
        { cwd: directory, env: { KEY: key } },
      ).done
      expect(customers.code).toBe(2)
      expect(customers.stderr).toContain('appointments only')
    },
    patience(60_000),
  )
})
