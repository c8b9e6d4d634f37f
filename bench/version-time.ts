/**
 * npm run bench:version-time -w @openbook/bench -- --before URL --after URL: what the time kept
 * with each pending change (migration 018) costs a one-row write. Two databases with the same
 * data, one migrated before 018 and one after; the same one-row statements alternate between them,
 * each alone in autocommit with synchronous_commit off, so that load on the machine falls on both
 * alike. Prints p50 and p99 of each, in ms, and their ratio.
 *
 * Then what a page's version costs to read with `--pending` changes of the organization's list
 * pending (and 100,000 of 20 other organizations), vacuumed, on the `after` database: the count
 * alone (as before 018), the count and the latest time with the index as 018 leaves it (the time
 * included), and the same without the time in the index. The `after` database is left as it was.
 */
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { assertLoopbackUrl } from './options.js'

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    iterations: { type: 'string', default: '4000' },
    pending: { type: 'string', default: '5000' },
  },
})
if (!values.before || !values.after) throw new Error('--before URL and --after URL are required')
assertLoopbackUrl(values.before)
assertLoopbackUrl(values.after)
const ITERATIONS = Number(values.iterations)
const ORG = 'org_version_time'

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query('SET synchronous_commit = off')
  await client.query(
    `INSERT INTO organizations (id, name, plan) VALUES ($1, 'version time', 'professional') ON CONFLICT DO NOTHING`,
    [ORG],
  )
  return client
}

const statements: { name: string; sql: (i: number) => [string, unknown[]] }[] = [
  {
    name: 'INSERT a customer',
    sql: (i) => [
      `INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES ($1, $2, true, now() - $3 * interval '1 s', now())`,
      [ORG, `cus_vt_${i}`, i],
    ],
  },
  {
    name: 'UPDATE a customer (in place)',
    sql: (i) => [
      `UPDATE customers SET notes = $3 WHERE org_id = $1 AND id = $2`,
      [ORG, `cus_vt_${i}`, `note ${i}`],
    ],
  },
]

const before = await connect(values.before)
const after = await connect(values.after)
for (const client of [before, after]) await client.query('DELETE FROM customers WHERE org_id = $1', [ORG])
console.log(`${ITERATIONS} of each statement, alternating; ms, client side`)
console.log('| one-row statement | p50 before | p50 after | × | p99 before | p99 after | × |')
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
for (const statement of statements) {
  const times = { before: [] as number[], after: [] as number[] }
  for (let i = 0; i < ITERATIONS; i++) {
    const [text, params] = statement.sql(i)
    // Each turn starts with the other database, so that neither always goes first.
    const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const)
    for (const which of order) {
      const client = which === 'before' ? before : after
      const start = performance.now()
      await client.query(text, params)
      times[which].push(performance.now() - start)
    }
  }
  const b = times.before.sort((x, y) => x - y)
  const a = times.after.sort((x, y) => x - y)
  const row = [0.5, 0.99].flatMap((q) => {
    const x = quantile(b, q)
    const y = quantile(a, q)
    return [x.toFixed(3), y.toFixed(3), (y / x).toFixed(2)]
  })
  console.log(`| ${statement.name} | ${row.join(' | ')} |`)
}
for (const client of [before, after]) await client.query('DELETE FROM customers WHERE org_id = $1', [ORG])
await before.end()

// The version's two reads, as the page statement makes them (src/queries/page-statement.ts).
const fold = `(SELECT f.changes, f.latest_written_at FROM list_folds f WHERE f.org_id = $1 AND f.list = 'customers' LIMIT 1)`
const versionReads = {
  'count alone': `SELECT coalesce((SELECT f.changes FROM list_folds f WHERE f.org_id = $1 AND f.list = 'customers' LIMIT 1), 0)
    + (SELECT count(*) FROM list_changes c WHERE c.org_id = $1 AND c.list = 'customers')`,
  'count and latest': `SELECT coalesce(f.changes, 0) + p.n, (extract(epoch FROM greatest(f.latest_written_at, p.latest)) * 1000000)::bigint::text
    FROM (SELECT count(*) AS n, max(c.written_at) AS latest FROM list_changes c WHERE c.org_id = $1 AND c.list = 'customers') p
    LEFT JOIN ${fold} f ON true`,
}
const PENDING = Number(values.pending)
await after.query(
  `INSERT INTO list_changes (org_id, list, at, id, attrs, delta)
   SELECT $1, 'customers', now() - g * interval '1 min', 'p' || g, '{}', 0 FROM generate_series(1, $2::int) g`,
  [ORG, PENDING],
)
await after.query(
  `INSERT INTO list_changes (org_id, list, at, id, attrs, delta)
   SELECT 'org_vt_other_' || (g % 20), 'customers', now() - g * interval '1 min', 'q' || g, '{}', 0
   FROM generate_series(1, 100000) g`,
)
const primaryKey = (include: string) =>
  `ALTER TABLE list_changes DROP CONSTRAINT list_changes_pkey,
     ADD CONSTRAINT list_changes_pkey PRIMARY KEY (org_id, list, at, id, seq)${include}`
async function timeReads(label: string, names: (keyof typeof versionReads)[]) {
  await after.query('VACUUM ANALYZE list_changes')
  const times = new Map(names.map((name) => [name, [] as number[]]))
  for (let i = 0; i < ITERATIONS / 4; i++)
    for (const name of i % 2 === 0 ? names : [...names].reverse()) {
      const start = performance.now()
      await after.query(versionReads[name], [ORG])
      times.get(name)?.push(performance.now() - start)
    }
  for (const [name, list] of times) {
    const sorted = list.sort((x, y) => x - y)
    console.log(
      `| ${name}, ${label} | ${quantile(sorted, 0.5).toFixed(3)} | ${quantile(sorted, 0.99).toFixed(3)} |`,
    )
  }
}
console.log(`\nA page's version with ${PENDING} changes pending, vacuumed; ms, client side`)
console.log('| read | p50 | p99 |')
console.log('| --- | ---: | ---: |')
try {
  await timeReads('time in the index (018)', ['count alone', 'count and latest'])
  await after.query(primaryKey(''))
  await timeReads('time not in the index', ['count and latest'])
} finally {
  await after.query(primaryKey(' INCLUDE (written_at)'))
  await after.query(`DELETE FROM list_changes WHERE org_id = $1 OR org_id LIKE 'org_vt_other_%'`, [ORG])
  await after.end()
}
