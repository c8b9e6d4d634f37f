/**
 * npm run bench:folds: the pages of one organization before and after many one-row SERIALIZABLE
 * inserts (which never fold at their commit), with the server's background fold running
 * (ListFolder, migration 017) or, with --no-folder, without it.
 *
 * One organization seeded by `openbook seed`; the page statements' median execution times at the
 * middle offset (page-times.ts) before the writes and once they are done; the folds' own times
 * and the most changes pending on one list meanwhile.
 */
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { ListFolder } from '../src/domain/list-folder.js'
import { createPostgresStore } from '../src/store/postgres/postgres.js'
import type { FoldReport } from '../src/store/types.js'
import { assertLoopbackUrl } from './options.js'
import { type PageTimes, timePages } from './page-times.js'
import { runFromRoot } from './paths.js'
import { runOk } from './proc.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_folds' },
    appointments: { type: 'string', default: '200000' },
    inserts: { type: 'string', default: '50000' },
    writers: { type: 'string', default: '4' },
    'every-ms': { type: 'string', default: '1000' },
    'no-folder': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
})
if (values.help) {
  process.stdout.write(
    'npm run bench:folds -- [--appointments 200000] [--inserts 50000] [--writers 4] [--every-ms 1000] [--no-folder] [--keep-db] [--pg URL] [--db NAME]\n',
  )
  process.exit(0)
}
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const APPOINTMENTS = Number(values.appointments)
const INSERTS = Number(values.inserts)
const WRITERS = Number(values.writers)
const log = (line: string) => process.stderr.write(`${line}\n`)

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

async function prepare(): Promise<void> {
  await withClient(`${SERVER}/postgres`, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
    await client.query(`CREATE DATABASE ${values.db}`)
  })
  const env = { ...process.env, DATABASE_URL }
  await runOk(process.execPath, ['bin/openbook.js', 'migrate', '--json'], { env })
  await runOk(
    process.execPath,
    [
      'bin/openbook.js',
      'seed',
      '--orgs',
      '1',
      '--customers',
      String(Math.ceil(APPOINTMENTS / 4)),
      '--appointments',
      String(APPOINTMENTS),
      '--seed',
      '7',
    ],
    { env, timeoutMs: 600_000 },
  )
  await withClient(DATABASE_URL, (client) => client.query('VACUUM ANALYZE'))
}

/** Page shapes' dates: the middle half and the middle tenth of the organization's appointments. */
async function datesOf(client: pg.Client, org: string) {
  const { rows } = await client.query<{ a: Date; b: Date }>(
    'SELECT min(start_at) AS a, max(start_at) AS b FROM appointments WHERE org_id = $1',
    [org],
  )
  const a = rows[0]?.a.getTime() ?? 0
  const b = rows[0]?.b.getTime() ?? 0
  const at = (f: number) => new Date(a + (b - a) * f).toISOString()
  return {
    range: [a, b] as const,
    wide: [at(0.25), at(0.75)] as [string, string],
    narrow: [at(0.45), at(0.55)] as [string, string],
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

async function main(): Promise<void> {
  const started = performance.now()
  await prepare()
  log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s`)
  await withClient(DATABASE_URL, async (client) => {
    const [org] = (await client.query<{ id: string }>('SELECT id FROM organizations')).rows
    if (!org) throw new Error('seed made no organization')
    const dates = await datesOf(client, org.id)
    const before = await timePages(client, org.id, ['mid'], dates)

    const store = createPostgresStore({ connectionString: DATABASE_URL, maxConnections: 1 })
    const foldTimes: number[] = []
    let mostPending = 0
    const foldLists = store.foldLists
    if (!foldLists) throw new Error('the PostgreSQL store folds')
    const folder = new ListFolder(
      async () => {
        const t = performance.now()
        const report = await foldLists()
        foldTimes.push(performance.now() - t)
        return report
      },
      { info: log, warn: log, error: log } as unknown as ConstructorParameters<typeof ListFolder>[1],
      {
        everyMs: Number(values['every-ms']),
        observer: {
          listsFolded: (report: FoldReport) => {
            mostPending = Math.max(mostPending, report.mostPending)
          },
          listFoldFailed: () => log('a fold failed'),
        },
      },
    )
    if (!values['no-folder']) folder.start()

    // One-row SERIALIZABLE inserts at times spread over the organization's, by WRITERS clients.
    const writing = performance.now()
    let retries = 0
    await Promise.all(
      Array.from({ length: WRITERS }, (_, w) =>
        withClient(DATABASE_URL, async (writer) => {
          for (let i = w; i < INSERTS; i += WRITERS) {
            const at = new Date(
              dates.range[0] + ((i * 7919) % INSERTS) * ((dates.range[1] - dates.range[0]) / INSERTS),
            )
            for (;;) {
              try {
                await writer.query(
                  `BEGIN ISOLATION LEVEL SERIALIZABLE;
                   INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
                   VALUES ('${org.id}', 'apt_bench_${i}', '${at.toISOString()}', '${at.toISOString()}', 'scheduled', true, now(), now());
                   COMMIT`,
                )
                break
              } catch (error) {
                await writer.query('ROLLBACK')
                if ((error as { code?: string }).code !== '40001') throw error
                retries++
              }
            }
          }
        }),
      ),
    )
    const writeSeconds = (performance.now() - writing) / 1000
    // The folds catch up: at most a few seconds.
    const waiting = performance.now()
    while (!values['no-folder'] && performance.now() - waiting < 15_000) {
      const { rows } = await client.query<{ n: number }>(
        'SELECT coalesce(max(n), 0)::int AS n FROM (SELECT count(*) AS n FROM list_changes GROUP BY org_id, list) p',
      )
      if ((rows[0]?.n ?? 0) < 256) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    const caughtUp = (performance.now() - waiting) / 1000
    await folder.stop()
    await store.close()
    const { rows: pendingRows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM list_changes WHERE org_id = $1 AND list = 'appointments'`,
      [org.id],
    )
    const after = await timePages(client, org.id, ['mid'], dates)

    const sorted = [...foldTimes].sort((a, b) => a - b)
    const line = (t: PageTimes, b: PageTimes | undefined) => {
      const was = b?.cells[0]?.ms ?? 0
      const now = t.cells[0]?.ms ?? 0
      const bound = was * 1.5 + 3
      return `| ${t.name} | ${t.total.toLocaleString('en-US')} | ${was.toFixed(1)} | ${now.toFixed(1)} | ${bound.toFixed(1)} | ${now <= bound ? 'yes' : 'no'} |`
    }
    process.stdout.write(
      [
        `${INSERTS.toLocaleString('en-US')} one-row SERIALIZABLE inserts by ${WRITERS} writers in ${writeSeconds.toFixed(0)} s ` +
          `(${retries} serialization failures run again), folder ${values['no-folder'] ? 'off' : `every ${values['every-ms']} ms`}; ` +
          `pending appointments changes after: ${pendingRows[0]?.n ?? 0}` +
          (values['no-folder'] ? '' : `, below 256 per list ${caughtUp.toFixed(1)} s after the last write`),
        values['no-folder']
          ? ''
          : `folds: ${foldTimes.length} calls, p50 ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${percentile(sorted, 0.99).toFixed(1)} ms, ` +
            `max ${(sorted.at(-1) ?? 0).toFixed(1)} ms; most changes pending on one list after a fold: ${mostPending}`,
        '',
        '| page (middle offset) | total after | before, ms | after, ms | 1.5× before + 3 ms | within |',
        '| --- | ---: | ---: | ---: | ---: | --- |',
        ...after.map((t) =>
          line(
            t,
            before.find((b) => b.name === t.name),
          ),
        ),
        '',
      ].join('\n'),
    )
  })
  if (!values['keep-db'])
    await withClient(`${SERVER}/postgres`, (client) =>
      client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`),
    )
}

await main()
