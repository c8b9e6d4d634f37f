/**
 * npm run bench:index-cost: what a candidate index of the appointments would cost a booking
 * application's writes. Two copies of openbook's appointments table (its columns, checks and
 * indexes, no trigger), one with the index --definition adds; the same one-row statements
 * alternate between them, each alone in autocommit with synchronous_commit off. Also times the
 * index's build at each size.
 */
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { assertLoopbackUrl } from './options.js'
import { runFromRoot } from './paths.js'
import { runOk } from './proc.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_index' },
    // The candidate, after `CREATE INDEX … ON appointments`: by default one that would serve the
    // foreign key to customers (deleting a customer reads the organization's appointments without it).
    definition: { type: 'string', default: '(org_id, customer_id) WHERE customer_id IS NOT NULL' },
    sizes: { type: 'string', default: '200000,1000000' },
    iterations: { type: 'string', default: '3000' },
  },
})
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const ITERATIONS = Number(values.iterations)

/** The one-row statements of a booking screen, on table `t`, the i-th time. */
const STATEMENTS: Record<string, (t: string, i: number) => [string, unknown[]]> = {
  'INSERT an appointment': (t, i) => [
    `INSERT INTO ${t} (org_id, id, customer_id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
     VALUES ('org', 'new_' || $1::text, 'cus_' || ($1::int % 1000), 'stf_3', now(), now() + interval '1 hour',
             'scheduled', true, now(), now())`,
    [i],
  ],
  'UPDATE its status': (t, i) => [
    `UPDATE ${t} SET status = 'confirmed' WHERE org_id = 'org' AND id = 'apt_' || $1::text`,
    [1 + i * 97],
  ],
  'UPDATE its start (a move)': (t, i) => [
    `UPDATE ${t} SET start_at = start_at + interval '1 day', end_at = end_at + interval '1 day'
     WHERE org_id = 'org' AND id = 'apt_' || $1::text`,
    [2 + i * 89],
  ],
  'UPDATE its note': (t, i) => [
    `UPDATE ${t} SET note = 'n' WHERE org_id = 'org' AND id = 'apt_' || $1::text`,
    [3 + i * 83],
  ],
}

const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length * q)] ?? Number.NaN
const median = (values: number[]) => quantile(values, 0.5)
const p99 = (values: number[]) => quantile(values, 0.99)

/** Drops the bench's database and, with `create`, makes it again, empty. */
async function freshDatabase({ create = true } = {}): Promise<void> {
  const admin = new pg.Client({ connectionString: `${SERVER}/postgres` })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
    if (create) await admin.query(`CREATE DATABASE ${values.db}`)
  } finally {
    await admin.end()
  }
}

async function measure(size: number): Promise<string[]> {
  await freshDatabase()
  await runOk(process.execPath, ['bin/openbook.js', 'migrate', '--json'], {
    env: { ...process.env, DATABASE_URL },
  })
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    for (const t of ['with_index', 'without_index']) {
      await client.query(`CREATE TABLE ${t} (LIKE appointments INCLUDING ALL)`)
      await client.query(
        `INSERT INTO ${t} (org_id, id, customer_id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
         SELECT 'org', 'apt_' || g, CASE WHEN g % 5 <> 0 THEN 'cus_' || (g % ${Math.ceil(size / 4)}) END,
                'stf_' || (g % 12), timestamptz '2019-01-01' + g * interval '7 minutes',
                timestamptz '2019-01-01' + g * interval '7 minutes' + interval '45 minutes',
                'scheduled', g % 13 <> 0, now(), now()
         FROM generate_series(1, ${size}) g`,
      )
    }
    // Its build on the loaded copy, as a migration would build it.
    const built = performance.now()
    await client.query(`CREATE INDEX candidate ON with_index ${values.definition}`)
    const buildMs = performance.now() - built
    await client.query('VACUUM ANALYZE with_index, without_index')
    await client.query('CHECKPOINT')
    await client.query('SET synchronous_commit = off')
    const rows = [
      `| ${size.toLocaleString('en-US')} | the index's build | ${(buildMs / 1000).toFixed(2)} s | | | | |`,
    ]
    for (const [name, statement] of Object.entries(STATEMENTS)) {
      const times: Record<string, number[]> = { with_index: [], without_index: [] }
      for (let i = 0; i < ITERATIONS; i++) {
        for (const t of i % 2 ? ['with_index', 'without_index'] : ['without_index', 'with_index']) {
          const [sql, params] = statement(t, i)
          const start = performance.now()
          await client.query(sql, params)
          times[t]?.push(performance.now() - start)
        }
      }
      const withIndex = times.with_index ?? []
      const without = times.without_index ?? []
      rows.push(
        `| ${size.toLocaleString('en-US')} | ${name} | ${median(withIndex).toFixed(3)} | ${median(without).toFixed(3)} | ` +
          `${(median(withIndex) / median(without)).toFixed(2)} | ${p99(withIndex).toFixed(3)} | ${p99(without).toFixed(3)} |`,
      )
    }
    return rows
  } finally {
    await client.end()
  }
}

const rows: string[] = []
for (const size of values.sizes.split(',').map(Number)) {
  process.stderr.write(`${size} appointments\n`)
  rows.push(...(await measure(size)))
}
await freshDatabase({ create: false })
process.stdout.write(
  [
    `Command: \`npm run bench:index-cost -- --definition '${values.definition}' --sizes ${values.sizes} --iterations ${ITERATIONS}\`.`,
    '',
    '| appointments | one-row statement | p50 with (ms) | p50 without (ms) | × | p99 with | p99 without |',
    '|---:|---|---:|---:|---:|---:|---:|',
    ...rows,
    '',
  ].join('\n'),
)
