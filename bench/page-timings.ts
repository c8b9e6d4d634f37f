/**
 * The page statement's execution time by offset, for the largest organization of a bench
 * database (bench/page-times.ts). Shows where reading from an end gives way to the seek by day
 * (SEEK_FROM) and what the middle and last pages cost. Run it alone on the machine.
 *
 * node --import tsx bench/page-timings.ts [database (openbook_bench)] [offsets: 0,999,1000,mid,last]
 *
 * PAGE_TIMINGS_DATES=start,end sets the date range of the filtered shapes (by default the mixes':
 * 120 to 30 days ago, 365 to 1 day ago), e.g. around the instant of a `--shape one-instant` data set.
 *
 * PAGE_TIMINGS_PENDING=n first folds the organization's appointments and customers, then leaves n
 * changes pending beside each list, as many as readers meet between two folds. It writes to the
 * database. PAGE_TIMINGS_ROWS=newest leaves them on the newest rows of each list (moved by a
 * microsecond), as new bookings and the day's status changes are, instead of random rows.
 *
 * PAGE_TIMINGS_AGAINST=dir times another checkout's statements too (a worktree of another commit,
 * with its node_modules), each run in turn with this tree's: `this ms (that ms)` at each offset.
 */
import pg from 'pg'
import { PAGE_SIZE } from './mixes.js'
import { buildersOf, leaveMovesPending, leavePending, pendingOf, timePages } from './page-times.js'

const DAY = 86_400_000
const database = process.argv[2] ?? 'openbook_bench'
const offsets = (process.argv[3] ?? `0,500,999,1000,2000,mid,last`).split(',')

const client = new pg.Client({ connectionString: `postgres://root@127.0.0.1:5432/${database}` })
await client.connect()
try {
  const [largest] = (
    await client.query<{ org_id: string }>('SELECT org_id FROM customer_counts ORDER BY n DESC LIMIT 1')
  ).rows
  if (!largest) throw new Error(`${database} holds no customers`)
  const org = largest.org_id
  const pending = Number(process.env.PAGE_TIMINGS_PENDING ?? 0)
  const rows = process.env.PAGE_TIMINGS_ROWS ?? 'random'
  if (rows !== 'random' && rows !== 'newest') throw new Error('PAGE_TIMINGS_ROWS: random or newest')
  if (pending > 0 && rows === 'random') {
    await leavePending(client, org, pending)
    await leaveMovesPending(client, org, 'customers', pending, '1 day')
  } else if (pending > 0)
    for (const list of ['customers', 'appointments'] as const)
      await leaveMovesPending(client, org, list, pending, '1 microsecond', rows)
  const daysAgo = (days: number) => new Date(Date.now() - days * DAY).toISOString()
  const [start, end] = process.env.PAGE_TIMINGS_DATES?.split(',') ?? []
  const range = (from: number, to: number): [string, string] => [start ?? daysAgo(from), end ?? daysAgo(to)]
  console.log(
    `${database}, ${org}: execution ms (median of 7) at each offset, limit ${PAGE_SIZE}; ` +
      `appointments' changes pending: ${await pendingOf(client, org)}, customers': ${await pendingOf(client, org, 'customers')}`,
  )
  const against = process.env.PAGE_TIMINGS_AGAINST
  const dates = { narrow: range(120, 30), wide: range(365, 1) }
  for (const page of await timePages(
    client,
    org,
    offsets,
    dates,
    against ? await buildersOf(against) : undefined,
  )) {
    const cell = (c: (typeof page.cells)[number]) =>
      `${c.offset}: ${c.ms.toFixed(2)}${c.againstMs === undefined ? '' : ` (${c.againstMs.toFixed(2)})`}`
    console.log(`${page.name} (total ${page.total}) | ${page.cells.map(cell).join(' | ')}`)
  }
} finally {
  await client.end()
}
