import { join } from 'node:path'
import pg from 'pg'
import { APPOINTMENT_LIST, filterColumn } from '../src/schemas/filters.js'
import type { BenchOrg, OrgSize } from './mixes.js'
import type { Crowd, Scale } from './options.js'
import { runOk } from './proc.js'
import { captureStatements, type ListRequest } from './sql.js'

export interface SeedInfo {
  /** False when an earlier run's data was reused. */
  readonly fresh: boolean
  readonly seconds: number
  readonly rowsPerSecond: number
  /** Wall time of the whole `openbook seed` process, start-up included. */
  readonly wallSeconds: number
  readonly vacuumSeconds: number
  readonly counts: { organizations: number; customers: number; appointments: number }
}

/** One scale's database on one PostgreSQL server, and the build whose command line fills it. */
export interface DataSet {
  readonly pgUrl: string
  readonly scale: Scale
  /** Directory of the openbook build whose bin/openbook.js seeds and makes keys. */
  readonly cliDir: string
  readonly fresh: boolean
}

export function databaseUrl(options: DataSet, applicationName?: string): string {
  const url = `${options.pgUrl}/${options.scale.database}`
  return applicationName ? `${url}?application_name=${applicationName}` : url
}

/** Runs the real command line (the built one) against the benchmark database. */
export async function openbook<T>(options: DataSet, args: readonly string[]): Promise<T> {
  const result = await runOk(process.execPath, [join(options.cliDir, 'bin/openbook.js'), ...args, '--json'], {
    env: { ...process.env, DATABASE_URL: databaseUrl(options), LOG_LEVEL: 'warn' },
    timeoutMs: 30 * 60_000,
  })
  return JSON.parse(result.stdout) as T
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

interface SeedNote {
  readonly seconds: number
  readonly rowsPerSecond: number
  readonly wallSeconds: number
}

async function existingCounts(options: DataSet): Promise<SeedInfo['counts'] | undefined> {
  const exists = await withClient(`${options.pgUrl}/postgres`, async (client) => {
    const { rows } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      options.scale.database,
    ])
    return rows.length > 0
  })
  if (!exists) return undefined
  return withClient(databaseUrl(options), async (client) => {
    const { rows } = await client.query<{ ready: boolean }>(
      "SELECT to_regclass('public.appointments') IS NOT NULL AS ready",
    )
    if (!rows[0]?.ready) return undefined
    // The crowded organization of a data shape (addCrowd) is not the seed's.
    const { rows: counts } = await client.query<SeedInfo['counts']>(
      `SELECT (SELECT count(*)::int FROM organizations WHERE id LIKE $1) AS organizations,
              (SELECT count(*)::int FROM customers WHERE org_id <> $2) AS customers,
              (SELECT count(*)::int FROM appointments WHERE org_id <> $2) AS appointments`,
      [`org\\_${options.scale.seed}\\_%`, CROWD_ORG],
    )
    return counts[0]
  })
}

/** The seed's figures are kept with the database, so that a run reusing it can still report them. */
async function seedNote(options: DataSet): Promise<SeedNote | undefined> {
  return withClient(databaseUrl(options), async (client) => {
    const { rows } = await client.query<{ note: string | null }>(
      'SELECT shobj_description(oid, $1) AS note FROM pg_database WHERE datname = current_database()',
      ['pg_database'],
    )
    try {
      return rows[0]?.note ? (JSON.parse(rows[0].note) as SeedNote) : undefined
    } catch {
      return undefined
    }
  })
}

/**
 * Reuses the benchmark database when it holds exactly the data asked for;
 * otherwise (or with --fresh) creates it, migrates and seeds it with the real CLI.
 * Either way ends with VACUUM ANALYZE, so counts are index-only with no heap fetches.
 */
export async function prepareDatabase(
  data: DataSet,
  log: (line: string) => void,
  crowd?: Crowd,
): Promise<SeedInfo> {
  const options = { ...data, ...data.scale }
  const wanted = {
    organizations: options.orgs,
    customers: options.customers,
    appointments: options.appointments,
  }
  const found = options.fresh ? undefined : await existingCounts(data)
  const reusable =
    found !== undefined &&
    found.organizations === wanted.organizations &&
    found.customers === wanted.customers &&
    found.appointments === wanted.appointments
  let note = reusable ? await seedNote(data) : undefined
  // A reused database still gets migrations added since it was seeded.
  if (reusable) await openbook(data, ['migrate'])
  if (!reusable) {
    log(`creating database ${options.database} and seeding ${options.customers + options.appointments} rows`)
    await withClient(`${options.pgUrl}/postgres`, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${options.database} WITH (FORCE)`)
      await client.query(`CREATE DATABASE ${options.database}`)
    })
    await openbook(data, ['migrate'])
    const started = performance.now()
    // One transaction: nothing to count until it ends, so only a sign of life meanwhile.
    const heartbeat = setInterval(
      () => log(`seeding… ${Math.round((performance.now() - started) / 1000)} s`),
      60_000,
    )
    const seeded = await openbook<{ seconds: number; rowsPerSecond: number }>(data, [
      'seed',
      '--orgs',
      String(options.orgs),
      '--customers',
      String(options.customers),
      '--appointments',
      String(options.appointments),
      '--seed',
      String(options.seed),
    ]).finally(() => clearInterval(heartbeat))
    note = {
      seconds: seeded.seconds,
      rowsPerSecond: seeded.rowsPerSecond,
      wallSeconds: Math.round((performance.now() - started) / 100) / 10,
    }
    await withClient(databaseUrl(data), (client) =>
      client.query(`COMMENT ON DATABASE ${options.database} IS '${JSON.stringify(note)}'`),
    )
  } else {
    log(
      `reusing database ${options.database} (${found.customers} customers, ${found.appointments} appointments)`,
    )
  }
  if (crowd) await addCrowd(data, crowd, log)
  const vacuumStarted = performance.now()
  await withClient(databaseUrl(data), (client) => client.query('VACUUM (ANALYZE)'))
  return {
    fresh: !reusable,
    seconds: note?.seconds ?? Number.NaN,
    rowsPerSecond: note?.rowsPerSecond ?? Number.NaN,
    wallSeconds: note?.wallSeconds ?? Number.NaN,
    vacuumSeconds: Math.round((performance.now() - vacuumStarted) / 100) / 10,
    counts: wanted,
  }
}

/** Drops a scale's database (at the end of a run with --drop-databases). */
export async function dropDatabase(data: DataSet): Promise<void> {
  await withClient(`${data.pgUrl}/postgres`, (client) =>
    client.query(`DROP DATABASE IF EXISTS ${data.scale.database} WITH (FORCE)`),
  )
}

interface ListedOrg {
  readonly id: string
  readonly plan: string
  readonly customers: number
  readonly appointments: number
}

const API_PLANS = new Set(['professional', 'enterprise'])

function closest(orgs: readonly ListedOrg[], target: number): ListedOrg | undefined {
  return [...orgs].sort(
    (a, b) => Math.abs(Math.log(a.customers / target)) - Math.abs(Math.log(b.customers / target)),
  )[0]
}

/**
 * Picks from `orgs list` the largest organization, a typical small one (the median size)
 * and a medium one (closest to ten times the median), each on a plan with API access.
 */
export function pickOrganizations(listed: readonly ListedOrg[]): Record<OrgSize, ListedOrg> {
  const sizes = listed.map((org) => org.customers).sort((a, b) => a - b)
  const median = Math.max(1, sizes[Math.floor(sizes.length / 2)] ?? 1)
  const api = listed.filter((org) => API_PLANS.has(org.plan) && org.customers > 0)
  const large = [...api].sort((a, b) => b.customers - a.customers)[0]
  const rest = api.filter((org) => org !== large)
  const medium = closest(rest, median * 10)
  const small = closest(
    rest.filter((org) => org !== medium),
    median,
  )
  if (!large || !medium || !small) throw new Error('the data set needs three organizations on an API plan')
  return { small, medium, large }
}

/** An owner or admin of the organization: who may create its keys. */
async function keyManager(client: pg.Client, orgId: string): Promise<string> {
  const { rows } = await client.query<{ email: string }>(
    `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.org_id = $1 AND m.role IN ('owner', 'admin') ORDER BY m.role DESC, u.email LIMIT 1`,
    [orgId],
  )
  const email = rows[0]?.email
  if (!email) throw new Error(`organization ${orgId} has no owner or admin`)
  return email
}

const KEY_NAME = 'bench'

/**
 * Picks the organizations and gives each a fresh test key with the real CLI;
 * the previous run's benchmark keys are revoked first (plans limit active keys).
 */
export async function prepareOrganizations(options: DataSet): Promise<Record<OrgSize, BenchOrg>> {
  const listed = await openbook<ListedOrg[]>(options, ['orgs', 'list'])
  const picked = pickOrganizations(listed)
  return withClient(databaseUrl(options), async (client) => {
    const result: Partial<Record<OrgSize, BenchOrg>> = {}
    for (const size of ['small', 'medium', 'large'] as const) {
      const org = picked[size]
      const keys = await openbook<{ id: string; name: string | null; status: string }[]>(options, [
        'keys',
        'list',
        '--org',
        org.id,
      ])
      for (const key of keys.filter((k) => k.name === KEY_NAME && k.status === 'active')) {
        await openbook(options, ['keys', 'revoke', key.id])
      }
      const email = await keyManager(client, org.id)
      const created = await openbook<{ key: string }>(options, [
        'keys',
        'create',
        '--org',
        org.id,
        '--as',
        email,
        '--env',
        'test',
        '--name',
        KEY_NAME,
      ])
      result[size] = { size, ...org, key: created.key }
    }
    return result as Record<OrgSize, BenchOrg>
  })
}

/** A customer of the organization with the most active appointments (for the customerId filter). */
/**
 * The busiest value of each value filter (schemas/filters.ts) in an organization: the customer,
 * staff member, status… with the most active appointments, which the largest organization's
 * filtered mixes ask for.
 */
export async function busiestValues(client: pg.Client, orgId: string): Promise<Record<string, string>> {
  const values: Record<string, string> = {}
  for (const filter of APPOINTMENT_LIST.filters) {
    if (filter.compare !== 'equals') continue
    const column = filterColumn(APPOINTMENT_LIST, filter)
    const { rows } = await client.query<{ value: string }>(
      `SELECT ${column} AS value FROM appointments WHERE org_id = $1 AND is_active AND ${column} IS NOT NULL
       GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`,
      [orgId],
    )
    if (!rows[0]) throw new Error(`organization ${orgId} has no appointments with a ${filter.field}`)
    values[filter.param] = rows[0].value
  }
  return values
}

/** The exact total a request's filter matches: the service's own count statement. */
export async function countOf(
  client: pg.Client,
  key: string,
  orgId: string,
  request: ListRequest,
): Promise<number> {
  const { count } = await captureStatements(key, orgId, request)
  const { rows } = await client.query<{ total: number }>(count.text, [...count.params])
  return rows[0]?.total ?? 0
}

export interface CountPlan {
  /** What was counted: the resource, and the filter when there is one. */
  readonly label: string
  /** The plan's scans, as EXPLAIN names them ("Index Only Scan using … on …"). */
  readonly scans: string[]
  /** Some scan reads the table's rows themselves (a sequential or plain index scan of it). */
  readonly readsTable: boolean
  /** Heap fetches of the index-only scans, summed; null when there is none. */
  readonly heapFetches: number | null
  readonly ms: number | null
  /** The plan's lines, as EXPLAIN printed them. */
  readonly text: string
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the service's count statement, run as the request path
 * runs it: read-only, as openbook_reader, with the organization set for row-level security.
 */
export async function explainCount(
  client: pg.Client,
  key: string,
  orgId: string,
  request: ListRequest,
  label: string = request.resource,
): Promise<CountPlan> {
  const { count } = await captureStatements(key, orgId, request)
  await client.query('BEGIN READ ONLY; SET LOCAL ROLE openbook_reader')
  try {
    await client.query("SELECT set_config('openbook.org_id', $1, true)", [orgId])
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS) ${count.text}`,
      [...count.params],
    )
    const text = rows.map((row) => row['QUERY PLAN']).join('\n')
    const fetches = [...text.matchAll(/Heap Fetches: (\d+)/g)].map((match) => Number(match[1]))
    const ms = /Execution Time: ([\d.]+) ms/.exec(text)?.[1]
    const scans = [
      ...new Set(
        [
          ...text.matchAll(
            /(?:Parallel )?(Seq Scan|Index Only Scan|Index Scan|Bitmap Heap Scan)(?: Backward)?(?: using \S+)? on \S+/g,
          ),
        ].map((match) => match[0]),
      ),
    ]
    const table = request.resource
    return {
      label,
      scans,
      readsTable: scans.some((scan) => !scan.includes('Index Only Scan') && scan.endsWith(` on ${table}`)),
      heapFetches: fetches.length === 0 ? null : fetches.reduce((a, b) => a + b, 0),
      ms: ms === undefined ? null : Number(ms),
      text,
    }
  } finally {
    await client.query('ROLLBACK')
  }
}

// ---------------------------------------------------------------------------------------------
// Data shapes: one organization whose createdAt and start crowd one instant or one day,
// or spread a few rows a day over decades, beside (PostgreSQL) or inside (the embedded demo) the
// seeded data. `openbook seed` spreads every organization's rows over years; a migration import
// gives them one createdAt.
// ---------------------------------------------------------------------------------------------

/** The crowded organization added to a PostgreSQL data set; on the embedded store, the demo's. */
export const CROWD_ORG = 'org_crowd'

/** Staff members of the crowd, its appointments shared among them in turn. */
const CROWD_STAFF = 200

/** The crowd's instant: 09:00 UTC 60 days before `now`, inside the date ranges of the mixes (bench/mixes.ts). */
export function crowdInstant(now: Date): Date {
  const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - 60 * 86_400_000
  return new Date(day + 9 * 3_600_000)
}

/**
 * SQL that adds the crowd's customers and appointments to `orgId` (all active; ids from md5, so
 * that one instant's rows are in no particular order of insertion), and with `create` the
 * organization itself, its owner (who may make keys) and a service; its staff in either case. Set-based, as
 * an import's statements are, so that the statement-level triggers keep the counts and buckets.
 */
export function crowdStatements(orgId: string, crowd: Crowd, now: Date, create: boolean): string[] {
  const instant = crowdInstant(now).toISOString()
  const day = `timestamptz '${instant}' - interval '9 hours'`
  const time = (n: string) => {
    const hash = `abs(('x' || substr(md5('${orgId}/' || ${n}), 1, 8))::bit(32)::int::bigint)`
    switch (crowd.shape) {
      case 'instant':
        return `timestamptz '${instant}'`
      case 'ninety':
        return `CASE WHEN ${n} % 10 = 0 THEN ${day} - (1 + ${hash} % 1095) * interval '1 day' - (${hash} % 86400) * interval '1 second'
          WHEN ${n} % 3 = 0 THEN timestamptz '${instant}' ELSE ${day} + (${hash} % 86400) * interval '1 second' END`
      case 'sparse':
        return `timestamptz '${instant}' - ${n} * interval '8 hours'`
    }
  }
  const statuses = `(ARRAY['completed','completed','completed','completed','completed','completed','cancelled','no_show','scheduled','confirmed','checked_in'])`
  const created = [
    `INSERT INTO organizations (id, name, plan) VALUES ('${orgId}', 'Crowded (${crowd.shape})', 'professional')`,
    `INSERT INTO users (id, email, name) VALUES ('usr_${orgId}', 'owner@${orgId.replaceAll('_', '-')}.example', 'Owner')`,
    `INSERT INTO memberships (org_id, user_id, role) VALUES ('${orgId}', 'usr_${orgId}', 'owner')`,
    `INSERT INTO services (org_id, id, name, is_active) VALUES ('${orgId}', 'srv_crowd', 'Service', true)`,
  ]
  return [
    ...(create ? created : []),
    // A staff member per 3,000 appointments (at the shapes' sizes): a staff filter's rows stay
    // few (schemas/filters.ts), as in a salon whose history spans years and a team.
    `INSERT INTO staff (org_id, id, name, is_active)
     SELECT '${orgId}', 'stf_crowd_' || s, 'Staff ' || s, true FROM generate_series(0, ${CROWD_STAFF - 1}) s
     ON CONFLICT DO NOTHING`,
    `INSERT INTO customers (org_id, id, first_name, last_name, display_name, email, is_active, created_at, updated_at)
     SELECT '${orgId}', 'cus_' || left(md5('${orgId}/' || g), 16), 'Ada', 'Crowd', 'Ada Crowd',
       'ada.' || g || '@crowd.example', true, t.at, t.at
     FROM generate_series(1, ${crowd.customers}) g CROSS JOIN LATERAL (SELECT ${time('g')} AS at) t`,
    `INSERT INTO appointments (org_id, id, customer_id, staff_id, start_at, end_at, status, location_type, price_cents,
       currency, payment_status, requires_payment, day_key, is_active, created_at, updated_at)
     SELECT '${orgId}', 'apt_' || left(md5('${orgId}:' || g), 16),
       'cus_' || left(md5('${orgId}/' || (1 + g % ${Math.max(1, crowd.customers)})), 16), 'stf_crowd_' || g % ${CROWD_STAFF},
       t.at, t.at + interval '45 minutes', ${statuses}[1 + g % 11], 'in_person', 4500, 'EUR', 'unpaid', false,
       to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), true, t.at - interval '7 days', t.at - interval '7 days'
     FROM generate_series(1, ${crowd.appointments}) g CROSS JOIN LATERAL (SELECT ${time('g')} AS at) t`,
  ]
}

/**
 * Adds the crowded organization to a PostgreSQL data set unless it is there with its sizes and
 * staff (a shape's data set has a database of its own, `--shape` in options.ts); a database with
 * another crowd is refused. The crowd's customers are the `large` organization's of every mix: the
 * largest.
 */
export async function addCrowd(data: DataSet, crowd: Crowd, log: (line: string) => void): Promise<void> {
  await withClient(databaseUrl(data), async (client) => {
    const { rows } = await client.query<{ customers: number; appointments: number; staff: number }>(
      `SELECT (SELECT count(*)::int FROM customers WHERE org_id = $1) AS customers,
              (SELECT count(*)::int FROM appointments WHERE org_id = $1) AS appointments,
              (SELECT count(*)::int FROM staff WHERE org_id = $1) AS staff`,
      [CROWD_ORG],
    )
    const found = rows[0]
    if (
      found?.customers === crowd.customers &&
      found.appointments === crowd.appointments &&
      found.staff === CROWD_STAFF
    )
      return
    if ((found?.customers ?? 0) + (found?.appointments ?? 0) + (found?.staff ?? 0) > 0) {
      // Deleting them would take many minutes: nothing in openbook deletes customers or staff, so
      // the appointments' foreign keys to them have no index of their own (only partial ones).
      throw new Error(
        `${data.scale.database} holds another ${CROWD_ORG} (${found?.customers} customers, ${found?.appointments} ` +
          `appointments, ${found?.staff} staff): drop the database (DROP DATABASE ${data.scale.database}) and run again`,
      )
    }
    log(
      `adding ${CROWD_ORG}: ${crowd.customers} customers, ${crowd.appointments} appointments (${crowd.shape})`,
    )
    const started = performance.now()
    await client.query('BEGIN')
    try {
      for (const statement of crowdStatements(CROWD_ORG, crowd, new Date(), true))
        await client.query(statement)
      await client.query('COMMIT')
    } catch (error) {
      await client.query('ROLLBACK')
      throw error
    }
    log(`added ${CROWD_ORG} in ${Math.round((performance.now() - started) / 100) / 10} s`)
  })
}
