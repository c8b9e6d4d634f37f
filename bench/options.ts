import { parseArgs } from 'node:util'

export interface BenchOptions {
  /** Server of PostgreSQL, without a database name; loopback only. */
  readonly pgUrl: string
  readonly database: string
  readonly fresh: boolean
  readonly build: boolean
  readonly orgs: number
  readonly customers: number
  readonly appointments: number
  readonly seed: number
  /** Seconds of each measurement; undefined: as long as the time budget allows (2–5 s). */
  readonly duration: number | undefined
  /** Minutes the whole run should take at most, seeding included (sets the duration). */
  readonly budgetMinutes: number
  /** Seconds of load before each saturation measurement. */
  readonly warmup: number
  /** Concurrent HTTP connections at saturation. */
  readonly connections: number
  /** pgbench clients, also the servers' pool size. */
  readonly poolSize: number
  /** Only mixes whose id contains this text (development). */
  readonly only: string | undefined
  /** Write RESULTS.md and the README section. */
  readonly write: boolean
  /** Only write RESULTS.md and the README section again from bench/results/latest.json. */
  readonly renderOnly: boolean
}

const USAGE = `npm run bench -- [--fresh] [--no-build] [--no-write | --render-only] [--db NAME] [--pg URL]
  [--orgs N --customers N --appointments N --seed S] [--duration S | --budget MIN] [--warmup S]
  [--connections N] [--only TEXT]`

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

/** The benchmark creates and drops databases: it talks to a PostgreSQL on this machine only. */
export function assertLoopbackUrl(url: string): void {
  const host = new URL(url).hostname
  if (!LOOPBACK.has(host)) throw new Error(`refusing a non-loopback host: ${host}`)
}

function whole(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < min)
    throw new Error(`--${name} must be a whole number ≥ ${min}`)
  return Number(value)
}

export function parseOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      fresh: { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      'render-only': { type: 'boolean', default: false },
      db: { type: 'string', default: 'openbook_bench' },
      pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
      orgs: { type: 'string' },
      customers: { type: 'string' },
      appointments: { type: 'string' },
      seed: { type: 'string' },
      duration: { type: 'string' },
      budget: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(values.db)) throw new Error('--db must be a plain lowercase identifier')
  assertLoopbackUrl(values.pg)
  return {
    pgUrl: values.pg.replace(/\/+$/, ''),
    database: values.db,
    fresh: values.fresh,
    build: !values['no-build'],
    write: !values['no-write'],
    renderOnly: values['render-only'],
    orgs: whole('orgs', values.orgs, 200, 1),
    customers: whole('customers', values.customers, 1_000_000),
    appointments: whole('appointments', values.appointments, 2_000_000),
    seed: whole('seed', values.seed, 7),
    duration: values.duration === undefined ? undefined : whole('duration', values.duration, 5, 1),
    budgetMinutes: whole('budget', values.budget, 14, 1),
    warmup: whole('warmup', values.warmup, 1),
    connections: whole('connections', values.connections, 16, 1),
    poolSize: 10,
    only: values.only,
  }
}
