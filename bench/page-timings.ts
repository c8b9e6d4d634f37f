/**
 * The page statement's execution time by offset, for the largest organization of a bench
 * database: EXPLAIN (ANALYZE, TIMING OFF) of the prepared statement's generic plan, in the request
 * path's transaction (openbook_reader, the reader preamble), median of 7 runs per offset. Shows
 * where reading from an end gives way to the seek by day (SEEK_FROM) and what the middle and last
 * pages cost. Run it alone on the machine.
 *
 * node --import tsx bench/page-timings.ts [database (openbook_bench)] [offsets: 0,999,1000,mid,last]
 *
 * PAGE_TIMINGS_DATES=start,end sets the date range of the filtered shapes (by default the mixes':
 * 120 to 30 days ago, 365 to 1 day ago), e.g. around the instant of a `--shape one-instant` data set.
 *
 * PAGE_TIMINGS_PENDING=n first folds the organization's appointments, then leaves n changes pending
 * beside them (n/2 status changes of random appointments, written where no fold runs: REPEATABLE
 * READ), as many as readers meet between two folds. It writes to the database.
 */
import pg from 'pg'
import { appointmentsPage } from '../src/queries/appointments.js'
import { customersPage } from '../src/queries/customers.js'
import { type PageStatement, pageParams } from '../src/queries/page-statement.js'
import { readerPreamble } from '../src/store/reader-settings.js'
import { PAGE_SIZE } from './mixes.js'

const DAY = 86_400_000
const RUNS = 7
const database = process.argv[2] ?? 'openbook_bench'
const offsetList = process.argv[3] ?? `0,500,999,1000,2000,mid,last`

const literal = (value: unknown) => `'${String(value).replaceAll("'", "''")}'`

async function main(): Promise<void> {
  const client = new pg.Client({ connectionString: `postgres://root@127.0.0.1:5432/${database}` })
  await client.connect()
  try {
    const [largest] = (
      await client.query<{ org_id: string }>('SELECT org_id FROM customer_counts ORDER BY n DESC LIMIT 1')
    ).rows
    if (!largest) throw new Error(`${database} holds no customers`)
    const org = largest.org_id
    const pending = Number(process.env.PAGE_TIMINGS_PENDING ?? 0)
    if (pending > 0) await leavePending(client, org, pending)
    const daysAgo = (days: number) => new Date(Date.now() - days * DAY).toISOString()
    const [startDate, endDate] = process.env.PAGE_TIMINGS_DATES?.split(',') ?? []
    // The filters of the benchmark's mixes of the largest organization (bench/mixes.ts).
    const shapes: [string, PageStatement][] = [
      ['customers', customersPage(org)],
      ['appointments', appointmentsPage(org, {})],
      ['status', appointmentsPage(org, { status: 'completed' })],
      [
        'dates',
        appointmentsPage(org, { startDate: startDate ?? daysAgo(120), endDate: endDate ?? daysAgo(30) }),
      ],
      [
        'status+dates',
        appointmentsPage(org, {
          status: 'completed',
          startDate: startDate ?? daysAgo(365),
          endDate: endDate ?? daysAgo(1),
        }),
      ],
    ]
    const { rows: waiting } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = 'appointments'`,
      [org],
    )
    console.log(
      `${database}, ${org}: execution ms (median of ${RUNS}) at each offset, limit ${PAGE_SIZE}; ` +
        `appointments' changes pending: ${waiting[0]?.n ?? 0}`,
    )
    for (const [index, [name, statement]] of shapes.entries()) {
      await client.query(`BEGIN; ${readerPreamble(true, 60_000)}`)
      await client.query("SELECT set_config('openbook.org_id', $1, true)", [org])
      const total =
        (await client.query<{ total: number }>(statement.countText, [...statement.params])).rows[0]?.total ??
        0
      const last = Math.max(0, Math.floor((total - 1) / PAGE_SIZE) * PAGE_SIZE)
      const mid = Math.floor(last / PAGE_SIZE / 2) * PAGE_SIZE
      const offsets = offsetList
        .split(',')
        .map((text) => (text === 'mid' ? mid : text === 'last' ? last : Number(text)))
      await client.query(`PREPARE page_${index} AS ${statement.jsonText}`)
      const cells: string[] = []
      for (const offset of offsets) {
        const args = pageParams(statement, { limit: PAGE_SIZE, offset }).map(literal).join(', ')
        const times: number[] = []
        for (let run = 0; run < RUNS; run++) {
          const result = await client.query(
            `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE page_${index}(${args})`,
          )
          times.push(result.rows[0]['QUERY PLAN'][0]['Execution Time'])
        }
        times.sort((a, b) => a - b)
        cells.push(`${offset}: ${times[Math.floor(RUNS / 2)]?.toFixed(2)}`)
      }
      await client.query('COMMIT')
      console.log(`${name} (total ${total}) | ${cells.join(' | ')}`)
    }
  } finally {
    await client.end()
  }
}

/** The organization's appointments folded, then `changes` changes left pending beside them. */
async function leavePending(client: pg.Client, org: string, changes: number): Promise<void> {
  await client.query(`SELECT list_fold($1, 'appointments', true, NULL)`, [org])
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
  await client.query(
    `UPDATE appointments SET status = CASE status WHEN 'confirmed' THEN 'completed' ELSE 'confirmed' END
     WHERE org_id = $1 AND id IN (SELECT id FROM appointments WHERE org_id = $1 AND is_active ORDER BY random() LIMIT $2)`,
    [org, Math.floor(changes / 2)],
  )
  await client.query('COMMIT')
}

await main()
