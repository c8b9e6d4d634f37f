/**
 * The page statements' execution time by offset for one organization: EXPLAIN (ANALYZE, TIMING
 * OFF) of each prepared statement's generic plan, in the request path's transaction
 * (openbook_reader, the reader preamble), median of 7 runs per offset. Used by page-timings.ts on
 * a bench database and by the writer bench beside the changes its writers leave pending.
 */
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type pg from 'pg'
import { appointmentsPage } from '../src/queries/appointments.js'
import { customersPage } from '../src/queries/customers.js'
import { type PageStatement, pageParams } from '../src/queries/page-statement.js'
import { readerPreamble } from '../src/store/reader-settings.js'
import { PAGE_SIZE } from './mixes.js'

const RUNS = 7
/** Prepared statements outlive their transaction: each gets a name of its own. */
let prepared = 0

export interface PageTimes {
  readonly name: string
  readonly total: number
  /**
   * Median execution ms at each offset, in the order asked; `againstMs`, the other checkout's
   * statement's, timed in turn with this one's (`timePages`' `against`).
   */
  readonly cells: { readonly offset: number; readonly ms: number; readonly againstMs?: number }[]
}

/** The page statements' builders of a checkout (src/queries/). */
export interface PageBuilders {
  readonly customersPage: typeof customersPage
  readonly appointmentsPage: typeof appointmentsPage
}

/** The builders of another checkout of openbook (a worktree of another commit), to time against. */
export async function buildersOf(dir: string): Promise<PageBuilders> {
  const module = (name: string) => import(pathToFileURL(join(resolve(dir), 'src', 'queries', name)).href)
  const [customers, appointments] = await Promise.all([module('customers.ts'), module('appointments.ts')])
  return { customersPage: customers.customersPage, appointmentsPage: appointments.appointmentsPage }
}

/**
 * The mixes' page shapes of `org` (bench/mixes.ts): both lists, a status, a date range and both,
 * at `offsets` (numbers, `mid` or `last`). With `against`, that checkout's statements too, each
 * run of one followed by a run of the other, so that both meet the same moment of the machine.
 */
export async function timePages(
  client: pg.Client,
  org: string,
  offsets: string[],
  dates: { readonly wide: [string, string]; readonly narrow: [string, string] },
  against?: PageBuilders,
): Promise<PageTimes[]> {
  const shapesOf = (builders: PageBuilders): [string, PageStatement][] => [
    ['customers', builders.customersPage(org)],
    ['appointments', builders.appointmentsPage(org, {})],
    ['status', builders.appointmentsPage(org, { status: 'completed' })],
    ['dates', builders.appointmentsPage(org, { startDate: dates.narrow[0], endDate: dates.narrow[1] })],
    [
      'status+dates',
      builders.appointmentsPage(org, {
        status: 'completed',
        startDate: dates.wide[0],
        endDate: dates.wide[1],
      }),
    ],
  ]
  const shapes = shapesOf({ customersPage, appointmentsPage })
  const others = against ? shapesOf(against) : []
  const literal = (value: unknown) => `'${String(value).replaceAll("'", "''")}'`
  const median = (runs: number[]) => runs.sort((a, b) => a - b)[Math.floor(runs.length / 2)] ?? 0
  const times: PageTimes[] = []
  for (const [index, [name, statement]] of shapes.entries()) {
    await client.query(`BEGIN; ${readerPreamble(true, 60_000)}`)
    try {
      await client.query("SELECT set_config('openbook.org_id', $1, true)", [org])
      const total =
        (await client.query<{ total: number }>(statement.countText, [...statement.params])).rows[0]?.total ??
        0
      const last = Math.max(0, Math.floor((total - 1) / PAGE_SIZE) * PAGE_SIZE)
      const mid = Math.floor(last / PAGE_SIZE / 2) * PAGE_SIZE
      const timed: { statement: PageStatement; name: string }[] = []
      for (const each of [statement, others[index]?.[1]]) {
        if (!each) continue
        const statementName = `page_times_${++prepared}`
        await client.query(`PREPARE ${statementName} AS ${each.jsonText}`)
        timed.push({ statement: each, name: statementName })
      }
      const cells = []
      for (const text of offsets) {
        const offset = text === 'mid' ? mid : text === 'last' ? last : Number(text)
        const runs: number[][] = timed.map(() => [])
        // The order flips each run: timed against itself, the statement run first in each pair was
        // 2-4 % slower on most pages.
        for (let run = 0; run < RUNS; run++)
          for (const [which, { statement, name }] of run % 2
            ? [...timed.entries()].reverse()
            : timed.entries()) {
            const args = pageParams(statement, { limit: PAGE_SIZE, offset }).map(literal).join(', ')
            const result = await client.query(
              `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE ${name}(${args})`,
            )
            runs[which]?.push(result.rows[0]['QUERY PLAN'][0]['Execution Time'])
          }
        const [ms = [], againstMs] = runs
        cells.push({ offset, ms: median(ms), ...(againstMs ? { againstMs: median(againstMs) } : {}) })
      }
      times.push({ name, total, cells })
    } finally {
      await client.query('ROLLBACK')
    }
  }
  return times
}

/**
 * `org`'s appointments folded, then `changes` changes left pending beside them: status changes
 * of random appointments (two changes each), written where no fold runs (REPEATABLE READ).
 */
export async function leavePending(client: pg.Client, org: string, changes: number): Promise<void> {
  await client.query(`SELECT list_fold($1, 'appointments', true, NULL)`, [org])
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
  await client.query(
    `UPDATE appointments SET status = CASE status WHEN 'confirmed' THEN 'completed' ELSE 'confirmed' END
     WHERE org_id = $1 AND id IN (SELECT id FROM appointments WHERE org_id = $1 AND is_active ORDER BY random() LIMIT $2)`,
    [org, Math.floor(changes / 2)],
  )
  await client.query('COMMIT')
}

/**
 * Which rows the pending changes are of: `random` ones, spread over the whole list, or the
 * `newest` in the list's order, as new bookings and the day's status changes are.
 */
export type PendingRows = 'random' | 'newest'

/**
 * `org`'s `list` folded, then `changes` changes left pending beside it: rows moved by `interval`
 * (each move two changes: the entry out and in again), written where no fold runs (REPEATABLE
 * READ). By a microsecond, a row stays on its page, in its date ranges and in its status.
 */
export async function leaveMovesPending(
  client: pg.Client,
  org: string,
  list: 'customers' | 'appointments',
  changes: number,
  interval: string,
  rows: PendingRows = 'random',
): Promise<void> {
  const at = list === 'customers' ? 'created_at' : 'start_at'
  const set =
    list === 'customers'
      ? 'created_at = created_at + $3::interval'
      : 'start_at = start_at + $3::interval, end_at = end_at + $3::interval'
  const order = rows === 'random' ? 'random()' : `${at} DESC, id DESC`
  await client.query(`SELECT list_fold($1, $2, true, NULL)`, [org, list])
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
  await client.query(
    `UPDATE ${list} SET ${set}
     WHERE org_id = $1 AND id IN (SELECT id FROM ${list} WHERE org_id = $1 AND is_active ORDER BY ${order} LIMIT $2)`,
    [org, Math.floor(changes / 2), interval],
  )
  await client.query('COMMIT')
}

/** The organization's changes pending now in one list. */
export async function pendingOf(
  client: pg.Client,
  org: string,
  list: 'appointments' | 'customers' = 'appointments',
): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = $2`,
    [org, list],
  )
  return rows[0]?.n ?? 0
}
