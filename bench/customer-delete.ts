/**
 * node --import tsx bench/customer-delete.ts: what deleting a customer costs through an ORM's
 * cascade (its collector reads the customer's appointments, deletes them, then the customer, in
 * one transaction, as Django's or TypeORM's do), against the bare DELETE of a customer without
 * appointments and against deactivating one; on openbook's tables and on plain copies without its
 * triggers (same columns, indexes, checks and foreign keys), alternating.
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
    db: { type: 'string', default: 'openbook_bench_customer_delete' },
    appointments: { type: 'string', default: '200000' },
    iterations: { type: 'string', default: '200' },
  },
})
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const SIZE = Number(values.appointments)
const CUSTOMERS = Math.ceil(SIZE / 4)
const ITERATIONS = Number(values.iterations)
const ORG = 'org_big'

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
  await runOk(process.execPath, ['bin/openbook.js', 'migrate', '--json'], {
    env: { ...process.env, DATABASE_URL },
  })
  await withClient(DATABASE_URL, async (client) => {
    await client.query("SET openbook.fold = 'now'")
    await client.query(`INSERT INTO organizations (id, name, plan) VALUES ($1, $1, 'professional')`, [ORG])
    await client.query(
      `INSERT INTO staff (org_id, id) SELECT $1, 'stf_' || g FROM generate_series(1, 40) g`,
      [ORG],
    )
    await client.query(
      `INSERT INTO customers (org_id, id, first_name, is_active, created_at, updated_at)
       SELECT $1, 'cus_' || g, 'Name', true, timestamptz '2019-01-01' + g * interval '28 minutes', now()
       FROM generate_series(1, ${CUSTOMERS}) g`,
      [ORG],
    )
    // Every customer has four appointments, spread over years.
    await client.query(
      `INSERT INTO appointments (org_id, id, customer_id, staff_id, start_at, end_at, status, is_active, created_at, updated_at)
       SELECT $1, 'apt_' || g, 'cus_' || (1 + g % ${CUSTOMERS}), 'stf_' || (1 + g % 40),
              timestamptz '2019-01-01' + g * interval '7 minutes', timestamptz '2019-01-01' + g * interval '7 minutes' + interval '45 minutes',
              (ARRAY['scheduled','confirmed','completed'])[1 + g % 3], g % 13 <> 0, now(), now()
       FROM generate_series(1, ${SIZE}) g`,
      [ORG],
    )
    await client.query('RESET openbook.fold')
    await client.query('SELECT list_fold_all()')
    for (const table of ['customers', 'appointments']) {
      await client.query(`CREATE TABLE plain_${table} (LIKE ${table} INCLUDING ALL)`)
      await client.query(`INSERT INTO plain_${table} SELECT * FROM ${table}`)
    }
    await client.query(`ALTER TABLE plain_customers ADD FOREIGN KEY (org_id) REFERENCES organizations (id)`)
    await client.query(`ALTER TABLE plain_appointments ADD FOREIGN KEY (org_id) REFERENCES organizations (id),
      ADD FOREIGN KEY (org_id, customer_id) REFERENCES plain_customers (org_id, id),
      ADD FOREIGN KEY (org_id, staff_id) REFERENCES staff (org_id, id)`)
    await client.query('VACUUM ANALYZE')
    await client.query('CHECKPOINT')
  })
}

type Way = (client: pg.Client, prefix: string, i: number) => Promise<void>

const WAYS: [string, Way][] = [
  [
    'an ORM cascade: read the customer’s appointments, delete them, then the customer',
    async (client, p, i) => {
      const customer = `cus_${1 + i * 97}`
      await client.query('BEGIN')
      const { rows } = await client.query<{ id: string }>(
        `SELECT * FROM ${p}appointments WHERE org_id = $1 AND customer_id = $2`,
        [ORG, customer],
      )
      await client.query(`DELETE FROM ${p}appointments WHERE org_id = $1 AND id = ANY ($2)`, [
        ORG,
        rows.map((row) => row.id),
      ])
      await client.query(`DELETE FROM ${p}customers WHERE org_id = $1 AND id = $2`, [ORG, customer])
      await client.query('COMMIT')
    },
  ],
  [
    'the bare DELETE of a customer without appointments',
    async (client, p, i) => {
      await client.query(
        `INSERT INTO ${p}customers (org_id, id, is_active, created_at, updated_at) VALUES ($1, $2, true, now(), now())`,
        [ORG, `cus_new_${i}`],
      )
      const started = performance.now()
      await client.query(`DELETE FROM ${p}customers WHERE org_id = $1 AND id = $2`, [ORG, `cus_new_${i}`])
      timedFrom = started
    },
  ],
  [
    'deactivating a customer (is_active = false)',
    async (client, p, i) => {
      await client.query(`UPDATE ${p}customers SET is_active = false WHERE org_id = $1 AND id = $2`, [
        ORG,
        `cus_${2 + i * 97}`,
      ])
    },
  ],
]

/** Where a way's own timing starts, when it prepares something first (else its start). */
let timedFrom: number | undefined

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] ?? Number.NaN

async function main(): Promise<void> {
  await prepare()
  await withClient(DATABASE_URL, async (client) => {
    const rows: string[] = []
    for (const [name, way] of WAYS) {
      const times = { openbook: [] as number[], plain: [] as number[] }
      for (let i = 0; i < ITERATIONS; i++) {
        const order = i % 2 === 0 ? (['', 'plain_'] as const) : (['plain_', ''] as const)
        for (const prefix of order) {
          timedFrom = undefined
          const started = performance.now()
          await way(client, prefix, i)
          times[prefix === '' ? 'openbook' : 'plain'].push(performance.now() - (timedFrom ?? started))
        }
      }
      rows.push(`| ${name} | ${median(times.openbook).toFixed(1)} | ${median(times.plain).toFixed(1)} |`)
      process.stderr.write(`${rows.at(-1)}\n`)
    }
    process.stdout.write(
      [
        `${SIZE.toLocaleString('en-US')} appointments, ${CUSTOMERS.toLocaleString('en-US')} customers (four appointments each), ${ITERATIONS} runs each, medians:`,
        '',
        '| way | openbook, ms | plain tables, ms |',
        '| --- | ---: | ---: |',
        ...rows,
        '',
      ].join('\n'),
    )
  })
  await withClient(`${SERVER}/postgres`, (client) =>
    client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`),
  )
}

await main()
