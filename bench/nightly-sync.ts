/**
 * npm run bench:nightly-sync: what `openbook-sync appointments --pg` costs night after night on a
 * salon of the size integrators run (40,000 customers, 150,000 appointments by default).
 *
 * One organization is seeded with the real CLI into a fresh PostgreSQL database and served by the
 * current build (dist/server.js); its appointments are copied with the package's openbook-sync
 * (packages/client, built) into a table of a second database, with a fixed window (`--since-days`
 * back from today to 400 days ahead). Then:
 *
 * 1. the first pass;
 * 2. `--nights` nights, each after a writer made `--changes` changes (notes, statuses, starts
 *    moved by a day) through SQL, as the salon software does: each pass's requests, the rows it
 *    inserted and updated in the copy (pg_stat_user_tables) and the copy's size;
 * 3. a purge: the `--purge` oldest no-shows in the window deactivated at once, then one pass:
 *    its requests, and how many of them the deletion check made.
 *
 * With `--rate N` (operations a second), nights under steady writes instead: a writer runs all the
 * time, through plain SQL as the salon software writes (inserts, updates, status changes,
 * deactivations, deletes, moves of an appointment's start and of a customer's createdAt), and each
 * of `--nights` nights syncs both resources, appointments then customers, each into its own
 * table. After each pass, against the database: the rows deleted or deactivated before the pass
 * began that the copy still holds live (the goal is 0), the active rows the copy marks deleted
 * (must be 0), the rows unchanged since before the pass that the copy misses or holds stale, the
 * rows kept undecided, and the pass's requests beside a plain read of the list (⌈total / 99⌉).
 *
 * `--client-dir DIR` runs the openbook-sync of another build of packages/client (a checkout of
 * another commit, built), to compare two on the same data.
 *
 * Prints a Markdown table; writes nothing else.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { assertLoopbackUrl } from './options.js'
import { ROOT, runFromRoot } from './paths.js'
import { killAll, run } from './proc.js'
import { startOpenbook } from './servers.js'
import { seedOrganization, withDatabase } from './sync-setup.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    customers: { type: 'string', default: '40000' },
    appointments: { type: 'string', default: '150000' },
    nights: { type: 'string', default: '10' },
    changes: { type: 'string', default: '200' },
    purge: { type: 'string', default: '9870' },
    'since-days': { type: 'string', default: '1500' },
    rate: { type: 'string', default: '0' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    db: { type: 'string', default: 'openbook_bench_nightly' },
    'client-dir': { type: 'string', default: join(ROOT, 'packages/client') },
  },
})
const wholeNumber = (name: string, text: string, min: number): number => {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < min)
    throw new Error(`--${name} must be a whole number ≥ ${min}`)
  return value
}
const CUSTOMERS = wholeNumber('customers', values.customers, 100)
const APPOINTMENTS = wholeNumber('appointments', values.appointments, 100)
const NIGHTS = wholeNumber('nights', values.nights, 0)
const CHANGES = wholeNumber('changes', values.changes, 0)
const PURGE = wholeNumber('purge', values.purge, 0)
const SINCE_DAYS = wholeNumber('since-days', values['since-days'], 1)
const RATES = values.rate.split(',').map((rate) => wholeNumber('rate', rate, 0))
const RATE = Math.max(...RATES)
if (!/^[a-z_][a-z0-9_]{0,50}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${values.db}`
const COPY_URL = `${SERVER}/${values.db}_copy`
const TABLE = 'appointments_copy'
const CUSTOMERS_TABLE = 'customers_copy'
const log = (line: string) => process.stderr.write(`${line}\n`)

interface Summary {
  readonly rows: number
  readonly requests: number
  readonly tombstones: number
  readonly checked: number
  readonly leftWindow: number
  readonly deferred: number
  readonly recovered: number
  readonly rereads: number
  readonly complete: boolean
  readonly durationMs: number
}

/** The copy's writes so far and its size, once the sync's session has ended (its stats flushed). */
async function copyStats(): Promise<{ inserts: number; updates: number; bytes: number }> {
  await new Promise((resolve) => setTimeout(resolve, 1_500))
  return withDatabase(COPY_URL, async (client) => {
    const { rows } = await client.query<{ ins: string; upd: string; bytes: string }>(
      `select n_tup_ins::text as ins, n_tup_upd::text as upd,
              pg_total_relation_size(relid)::text as bytes
       from pg_stat_user_tables where relname = $1`,
      [TABLE],
    )
    const row = rows[0]
    return { inserts: Number(row?.ins ?? 0), updates: Number(row?.upd ?? 0), bytes: Number(row?.bytes ?? 0) }
  })
}

/** A writer's night: `count` changes to random active appointments of the organization. */
async function changeSome(orgId: string, count: number, night: number): Promise<void> {
  await withDatabase(DATABASE_URL, async (client) => {
    const { rows } = await client.query<{ id: string }>(
      `select id from appointments where org_id = $1 and is_active order by md5(id || $2) limit $3`,
      [orgId, String(night), count],
    )
    for (const [index, { id }] of rows.entries()) {
      const change =
        index % 4 === 0
          ? `start_at = start_at + interval '1 day', end_at = end_at + interval '1 day'`
          : index % 4 === 1
            ? `status = 'confirmed'`
            : `note = 'night ${night}'`
      await client.query(
        `update appointments set ${change}, updated_at = now() where org_id = $1 and id = $2`,
        [orgId, id],
      )
    }
  })
}

/** What the writer did that a check needs: when each row it deleted (DELETE) went. */
interface Writer {
  readonly deletedAt: Map<string, number>
  readonly ops: () => number
  stop(): Promise<void>
}

/**
 * The salon software at `rate` operations a second, through SQL, until stopped. Appointments:
 * inserts (a copy of a row, at another start), notes, status changes, starts moved by one to
 * three days either way, deactivations, deletes; customers: notes, createdAt moved by up to a
 * month either way, deactivations, inserts. Nothing is ever reactivated, so a row active now was
 * active all along.
 */
async function startWriter(orgId: string, since: string, until: string, rate: number): Promise<Writer> {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  const ids = async (table: string) =>
    (
      await client.query<{ id: string }>(`select id from ${table} where org_id = $1 and is_active`, [orgId])
    ).rows.map((row) => row.id)
  const appointments = await ids('appointments')
  const customers = await ids('customers')
  const deletedAt = new Map<string, number>()
  let random = 42
  const next = () => {
    random = (random * 1_103_515_245 + 12_345) % 2_147_483_648
    return random / 2_147_483_648
  }
  const pick = (list: string[]) => list[Math.floor(next() * list.length)] as string
  const windowDays = (Date.parse(until) - Date.parse(since)) / 86_400_000
  let ops = 0
  // Ids of earlier writers' rows are not made again.
  let inserted = rate * 1_000_000
  const statuses = ['scheduled', 'confirmed', 'checked_in', 'no_show', 'cancelled', 'completed']
  const set = (table: string, change: string, id: string, values: unknown[] = []) =>
    client.query(`update ${table} set ${change}, updated_at = now() where org_id = $1 and id = $2`, [
      orgId,
      id,
      ...values,
    ])
  const operation = async () => {
    const roll = next()
    if (roll < 0.12) {
      const id = `apt_w_${++inserted}`
      const start = new Date(Date.parse(since) + Math.floor(next() * windowDays) * 86_400_000 + 36_000_000)
      await client.query(
        `insert into appointments select (jsonb_populate_record(null::appointments, to_jsonb(a) ||
           jsonb_build_object('id', $3::text, 'start_at', $4::timestamptz, 'end_at', $4::timestamptz + interval '1 hour',
             'day_key', to_char($4::timestamptz at time zone 'UTC', 'YYYY-MM-DD'), 'is_active', true,
             'created_at', now(), 'updated_at', now()))).*
         from appointments a where a.org_id = $1 and a.id = $2`,
        [orgId, pick(appointments), id, start.toISOString()],
      )
      appointments.push(id)
    } else if (roll < 0.3) await set('appointments', `note = 'w ${ops}'`, pick(appointments))
    else if (roll < 0.4)
      await set('appointments', 'status = $3', pick(appointments), [statuses[Math.floor(next() * 6)]])
    else if (roll < 0.58) {
      const days = (next() < 0.5 ? -1 : 1) * (1 + Math.floor(next() * 3))
      await set(
        'appointments',
        `start_at = start_at + $3 * interval '1 day', end_at = end_at + $3 * interval '1 day',
         day_key = to_char((start_at + $3 * interval '1 day') at time zone 'UTC', 'YYYY-MM-DD')`,
        pick(appointments),
        [days],
      )
    } else if (roll < 0.68) await set('appointments', 'is_active = false', pick(appointments))
    else if (roll < 0.73) {
      const index = Math.floor(next() * appointments.length)
      const id = appointments[index] as string
      appointments[index] = appointments.at(-1) as string
      appointments.pop()
      await client.query('delete from appointments where org_id = $1 and id = $2', [orgId, id])
      deletedAt.set(id, Date.now())
    } else if (roll < 0.83) await set('customers', `notes = 'w ${ops}'`, pick(customers))
    else if (roll < 0.91)
      await set('customers', `created_at = created_at + $3 * interval '1 hour'`, pick(customers), [
        Math.round((next() - 0.5) * 1_440),
      ])
    else if (roll < 0.96) await set('customers', 'is_active = false', pick(customers))
    else {
      const id = `cus_w_${++inserted}`
      await client.query(
        `insert into customers select (jsonb_populate_record(null::customers, to_jsonb(c) ||
           jsonb_build_object('id', $3::text, 'is_active', true, 'created_at', now(), 'updated_at', now()))).*
         from customers c where c.org_id = $1 and c.id = $2`,
        [orgId, pick(customers), id],
      )
      customers.push(id)
    }
    ops++
  }
  let running = true
  const loop = (async () => {
    const began = Date.now()
    while (running) {
      // Behind schedule (a slow statement), it catches up; ahead, it waits.
      const due = Math.floor(((Date.now() - began) / 1000) * rate)
      if (ops < due) await operation()
      else await new Promise((resolve) => setTimeout(resolve, Math.max(1, 1000 / rate / 2)))
    }
  })()
  return {
    deletedAt,
    ops: () => ops,
    async stop() {
      running = false
      await loop
      await client.end()
    },
  }
}

interface NightCheck {
  /** Rows deleted or deactivated before the pass began that the copy still holds live. */
  readonly staleLive: number
  /** Rows active now (so all along) that the copy marks deleted. */
  readonly activeDeleted: number
  /** Rows active and unchanged since before the pass that the copy does not hold live. */
  readonly missed: number
  /** Rows unchanged since before the pass whose copy differs (start, status, customer, createdAt). */
  readonly stale: number
  /** Active rows of the list now (for the plain read's pages). */
  readonly total: number
}

/** The copy of `resource` against the database, after a pass that began at `began`. */
async function checkNight(
  orgId: string,
  resource: 'appointments' | 'customers',
  began: number,
  writer: Writer,
  since: string,
  until: string,
): Promise<NightCheck> {
  const appointments = resource === 'appointments'
  const source = await withDatabase(DATABASE_URL, async (client) => {
    const { rows } = await client.query<{
      id: string
      active: boolean
      updated: Date
      key: Date
      status: string | null
      customer: string | null
    }>(
      appointments
        ? `select id, is_active as active, updated_at as updated, start_at as key, status, customer_id as customer
           from appointments where org_id = $1`
        : `select id, is_active as active, updated_at as updated, created_at as key, null as status, null as customer
           from customers where org_id = $1`,
      [orgId],
    )
    return new Map(rows.map((row) => [row.id, row]))
  })
  const copy = await withDatabase(COPY_URL, async (client) => {
    const { rows } = await client.query<{
      id: string
      data: Record<string, unknown>
      deleted: boolean
      left: boolean
    }>(
      `select id, data, deleted_at is not null as deleted, left_window_at is not null as left from ${appointments ? TABLE : CUSTOMERS_TABLE}`,
    )
    return rows
  })
  const from = Date.parse(since)
  const to = Date.parse(until)
  const listed = (row: { active: boolean; key: Date }) =>
    row.active && (!appointments || (row.key.getTime() >= from && row.key.getTime() <= to))
  let staleLive = 0
  let activeDeleted = 0
  let stale = 0
  const live = new Set<string>()
  for (const row of copy) {
    const now = source.get(row.id)
    if (row.deleted) {
      if (now?.active) activeDeleted++
      continue
    }
    if (row.left) continue
    live.add(row.id)
    const goneAt =
      now === undefined ? writer.deletedAt.get(row.id) : now.active ? undefined : now.updated.getTime()
    if (goneAt !== undefined && goneAt < began) staleLive++
    if (now?.active && now.updated.getTime() < began) {
      const key = Date.parse(String(appointments ? row.data.start : row.data.createdAt))
      if (
        key !== now.key.getTime() ||
        (appointments && (row.data.status !== now.status || (row.data.customerId ?? null) !== now.customer))
      )
        stale++
    }
  }
  let missed = 0
  let total = 0
  for (const row of source.values()) {
    if (!listed(row)) continue
    total++
    if (row.updated.getTime() < began && !live.has(row.id)) missed++
  }
  return { staleLive, activeDeleted, missed, stale, total }
}

/** `--nights` nights of both resources while the writer runs; the table's lines. */
async function underWrites(
  orgId: string,
  since: string,
  until: string,
  syncOnce: (resource?: string) => Promise<Summary>,
): Promise<string[]> {
  const lines = [
    '| Rate | Night | Resource | Rows read | Requests | Plain read | Checked | Recovered | Deferred | Marked deleted | Gone before the pass, still live | Active marked deleted | Missed | Stale | Wall time |',
    '| ---: | ----- | -------- | --------: | -------: | ---------: | ------: | --------: | -------: | -------------: | -------------------------------: | --------------------: | -----: | ----: | --------: |',
  ]
  for (const resource of ['appointments', 'customers'] as const) {
    const first = await syncOnce(resource)
    log(`first pass of ${resource}: ${JSON.stringify(first)}`)
  }
  for (const rate of RATES) {
    const writer = await startWriter(orgId, since, until, rate)
    const started = Date.now()
    try {
      for (let n = 1; n <= NIGHTS; n++)
        for (const resource of ['appointments', 'customers'] as const) {
          const began = Date.now()
          const summary = await syncOnce(resource)
          const check = await checkNight(orgId, resource, began, writer, since, until)
          log(
            `night ${n} ${resource}: ${JSON.stringify(summary)} ${JSON.stringify(check)} (${writer.ops()} writes so far)`,
          )
          lines.push(
            `| ${rate}/s | ${n} | ${resource} | ${summary.rows} | ${summary.requests} | ${Math.ceil(check.total / 99)} | ${summary.checked} | ${summary.recovered} | ${summary.deferred} | ${summary.tombstones} | ${check.staleLive} | ${check.activeDeleted} | ${check.missed} | ${check.stale} | ${(summary.durationMs / 1000).toFixed(1)} s |`,
          )
        }
    } finally {
      await writer.stop()
    }
    log(
      `the writer at ${rate}/s made ${writer.ops()} operations in ${((Date.now() - started) / 1000).toFixed(0)} s`,
    )
  }
  return lines
}

async function main(): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), 'openbook-bench-nightly-'))
  try {
    log(`seeding ${CUSTOMERS} customers, ${APPOINTMENTS} appointments of one organization into ${values.db}`)
    const keyFile = join(directory, 'key')
    const orgId = await seedOrganization({
      server: SERVER,
      db: values.db,
      customers: CUSTOMERS,
      appointments: APPOINTMENTS,
      keyFile,
    })
    await withDatabase(`${SERVER}/postgres`, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${values.db}_copy WITH (FORCE)`)
      await client.query(`CREATE DATABASE ${values.db}_copy`)
    })
    const server = await startOpenbook('nightly', ROOT, DATABASE_URL)
    const day = 86_400_000
    const today = Math.floor(Date.now() / day) * day
    const since = new Date(today - SINCE_DAYS * day).toISOString()
    const until = new Date(today + 400 * day).toISOString()
    const inWindow = await withDatabase(DATABASE_URL, async (client) => {
      const { rows } = await client.query<{ n: string }>(
        'select count(*)::text as n from appointments where org_id = $1 and is_active and start_at between $2 and $3',
        [orgId, since, until],
      )
      return Number(rows[0]?.n)
    })
    log(`window ${since}..${until}: ${inWindow} active appointments`)

    const syncOnce = async (resource = 'appointments'): Promise<Summary> => {
      const appointments = resource === 'appointments'
      const result = await run(
        process.execPath,
        [
          join(values['client-dir'], 'bin/openbook-sync.js'),
          resource,
          '--key-file',
          keyFile,
          '--base-url',
          server.baseUrl,
          '--pg',
          COPY_URL,
          '--table',
          appointments ? TABLE : CUSTOMERS_TABLE,
          '--state',
          join(directory, `${resource}.state.json`),
          ...(appointments ? ['--since', since, '--until', until] : []),
          '--json',
        ],
        { timeoutMs: 1_800_000 },
      )
      // Exit 5: deletions unsettled for --max-deferred-passes passes; the pass itself is written.
      if (result.code !== 0 && result.code !== 5)
        throw new Error(`openbook-sync failed (${result.code}): ${result.stderr}`)
      const summary = JSON.parse(result.stdout) as Summary
      if (!summary.complete) throw new Error('a pass did not complete')
      return summary
    }

    if (RATE > 0) {
      const lines = await underWrites(orgId, since, until, syncOnce)
      process.stdout.write(
        `${CUSTOMERS} customers, ${APPOINTMENTS} appointments; window ${since.slice(0, 10)}..${until.slice(0, 10)} (${inWindow} active in it); writer at ${RATES.join(' then ')} operations/s\n\n${lines.join('\n')}\n`,
      )
      return
    }

    const table: string[] = [
      '| Night | Rows read | Requests | Of which the deletion check | Marked deleted | Rows inserted | Rows updated | Copy size | Wall time |',
      '| ----- | --------: | -------: | --------------------------: | -------------: | ------------: | -----------: | --------: | --------: |',
    ]
    let before = await copyStats()
    const night = async (what: string, pages: () => Promise<number>) => {
      const expectedPages = await pages()
      const summary = await syncOnce()
      const after = await copyStats()
      const check = summary.requests - expectedPages
      table.push(
        `| ${what} | ${summary.rows} | ${summary.requests} | ${summary.checked > 0 ? check : 0} | ${summary.tombstones} | ${after.inserts - before.inserts} | ${after.updates - before.updates} | ${(after.bytes / 1048576).toFixed(1)} MB | ${(summary.durationMs / 1000).toFixed(1)} s |`,
      )
      log(`${what}: ${JSON.stringify(summary)}`)
      before = after
    }
    // The requests of a pass that nothing moves under: 100 rows first, then 99 new rows a request.
    const passPages = async () =>
      withDatabase(DATABASE_URL, async (client) => {
        const { rows } = await client.query<{ n: string }>(
          'select count(*)::text as n from appointments where org_id = $1 and is_active and start_at between $2 and $3',
          [orgId, since, until],
        )
        return 1 + Math.max(0, Math.ceil((Number(rows[0]?.n) - 100) / 99))
      })
    await night('first pass', passPages)
    for (let n = 1; n <= NIGHTS; n++) {
      await changeSome(orgId, CHANGES, n)
      await night(`night ${n}, ${CHANGES} changes`, passPages)
    }
    if (PURGE > 0) {
      const purged = await withDatabase(DATABASE_URL, async (client) => {
        const { rowCount } = await client.query(
          `update appointments set is_active = false, updated_at = now()
           where org_id = $1 and id in (
             select id from appointments where org_id = $1 and is_active and status = 'no_show'
               and start_at between $2 and $3 order by start_at limit $4)`,
          [orgId, since, until, PURGE],
        )
        return rowCount ?? 0
      })
      await night(`after a purge of ${purged} old no-shows`, passPages)
    }
    process.stdout.write(
      `${CUSTOMERS} customers, ${APPOINTMENTS} appointments; window ${since.slice(0, 10)}..${until.slice(0, 10)} (${inWindow} active in it)\n\n${table.join('\n')}\n`,
    )
  } finally {
    killAll()
    rmSync(directory, { recursive: true, force: true })
    await withDatabase(`${SERVER}/postgres`, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${values.db} WITH (FORCE)`)
      await client.query(`DROP DATABASE IF EXISTS ${values.db}_copy WITH (FORCE)`)
    }).catch(() => {})
  }
}

main().catch((error) => {
  killAll()
  log(String(error?.stack ?? error))
  process.exit(1)
})
