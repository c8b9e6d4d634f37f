import { resolve } from 'node:path'
import { parseArgs } from 'node:util'

/**
 * `spread`: the seed's data alone. `instant`: every row of the crowded organization at one instant;
 * `ninety`: 90 % of them on one day (a third of those at one instant), the rest over three years;
 * `sparse`: one row every 8 hours, back over decades.
 */
export type DataShape = 'spread' | 'instant' | 'ninety' | 'sparse'
export const DATA_SHAPES: readonly DataShape[] = ['spread', 'instant', 'ninety', 'sparse']

export interface Crowd {
  readonly shape: Exclude<DataShape, 'spread'>
  readonly customers: number
  readonly appointments: number
}

export type ScaleName = 'full' | '100k'

/** One data set of the benchmark, made by `openbook seed` with these arguments in its own database. */
export interface Scale {
  readonly name: ScaleName
  readonly database: string
  readonly orgs: number
  readonly customers: number
  readonly appointments: number
  readonly seed: number
}

/**
 * The benchmark's two scales: the benchmark's original data set, and ten times smaller with one
 * dominant organization, where the old page statements' plans flipped to whole-table scans.
 */
export const SCALES: Readonly<Record<ScaleName, Scale>> = {
  full: {
    name: 'full',
    database: 'openbook_bench',
    orgs: 200,
    customers: 1_000_000,
    appointments: 2_000_000,
    seed: 7,
  },
  '100k': {
    name: '100k',
    database: 'openbook_bench_100k',
    orgs: 100,
    customers: 100_000,
    appointments: 200_000,
    seed: 1,
  },
}

export interface BenchOptions {
  /** Server of PostgreSQL, without a database name; loopback only. */
  readonly pgUrl: string
  readonly scales: readonly Scale[]
  readonly fresh: boolean
  readonly build: boolean
  /** The openbook build measured (dist/ and bin/ in it); the repository's root by default. */
  readonly openbookDir: string
  /** An older build measured beside it on the same databases (e.g. a git worktree of a58049a). */
  readonly previousDir: string | undefined
  /** Load pgbench (the SQL alone) too. */
  readonly pgbench: boolean
  /** Drop the benchmark's databases at the end. */
  readonly dropDatabases: boolean
  /** Seconds of each measurement; undefined: as long as the time budget allows (2–5 s). */
  readonly duration: number | undefined
  /** Minutes the whole run should take at most, seeding included (sets the duration). */
  readonly budgetMinutes: number
  /** Seconds of load before a server's first saturation round on a mix. */
  readonly warmup: number
  /** Saturation rounds of each server on each mix, interleaved (see LoadSettings.rounds). */
  readonly rounds: number
  /** Concurrent HTTP connections at saturation. */
  readonly connections: number
  /** pgbench clients, also the servers' pool size. */
  readonly poolSize: number
  /** Only mixes whose id contains one of these comma-separated texts. */
  readonly only: string | undefined
  /** Write bench/RESULTS.md. */
  readonly write: boolean
  /** Only write bench/RESULTS.md again from bench/results/latest.json. */
  readonly renderOnly: boolean
  /** Only seed (or check) the databases, then stop: a later run reuses them. */
  readonly prepareOnly: boolean
  /**
   * A data shape: with one, each scale's database (named `<database>_<shape>`) holds a
   * crowded organization beside the seed's, the largest, which the `large` mixes read; the
   * embedded store's demo organization gets the same rows. Undefined: the seed's data alone.
   */
  readonly crowd: Crowd | undefined
}

export const USAGE = `npm run bench -- [--fresh] [--no-build] [--no-write | --render-only | --prepare-only] [--pg URL]
  [--scales full,100k] [--openbook-dir DIR] [--previous-dir DIR (or BENCH_PREVIOUS_DIR)]
  [--no-pgbench] [--drop-databases] [--duration S | --budget MIN] [--rounds N] [--warmup S] [--connections N]
  [--only TEXT[,TEXT…]] [--shape spread|instant|ninety|sparse] [--shape-size CUSTOMERS,APPOINTMENTS]`

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

export function parseScales(value: string): Scale[] {
  const names = value.split(',').map((name) => name.trim())
  return names.map((name) => {
    if (name !== 'full' && name !== '100k') throw new Error(`--scales: unknown scale ${name} (full, 100k)`)
    return SCALES[name]
  })
}

/** Paths are taken from the directory the command was started in (npm's INIT_CWD), not bench/. */
export function parseOptions(
  argv: readonly string[],
  cwd = process.env.INIT_CWD ?? process.cwd(),
): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      fresh: { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      'render-only': { type: 'boolean', default: false },
      'prepare-only': { type: 'boolean', default: false },
      'no-pgbench': { type: 'boolean', default: false },
      'drop-databases': { type: 'boolean', default: false },
      pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
      scales: { type: 'string', default: 'full,100k' },
      'openbook-dir': { type: 'string' },
      'previous-dir': { type: 'string', default: process.env.BENCH_PREVIOUS_DIR },
      duration: { type: 'string' },
      budget: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      only: { type: 'string' },
      shape: { type: 'string', default: 'spread' },
      'shape-size': { type: 'string', default: '300000,600000' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  assertLoopbackUrl(values.pg)
  const openbookDir = values['openbook-dir']
  const crowd = parseCrowd(values.shape, values['shape-size'])
  const scales = parseScales(values.scales).map((scale) =>
    crowd ? { ...scale, database: `${scale.database}_${crowd.shape}` } : scale,
  )
  return {
    pgUrl: values.pg.replace(/\/+$/, ''),
    scales,
    fresh: values.fresh,
    // Another directory's build is that directory's business: only the root is built here.
    build: !values['no-build'] && openbookDir === undefined,
    openbookDir: openbookDir === undefined ? '.' : resolve(cwd, openbookDir),
    previousDir: values['previous-dir'] ? resolve(cwd, values['previous-dir']) : undefined,
    pgbench: !values['no-pgbench'],
    dropDatabases: values['drop-databases'],
    write: !values['no-write'],
    renderOnly: values['render-only'],
    prepareOnly: values['prepare-only'],
    duration: values.duration === undefined ? undefined : whole('duration', values.duration, 5, 1),
    budgetMinutes: whole('budget', values.budget, 40, 1),
    warmup: whole('warmup', values.warmup, 1),
    rounds: whole('rounds', values.rounds, 3, 1),
    connections: whole('connections', values.connections, 16, 1),
    poolSize: 10,
    only: values.only,
    crowd,
  }
}

/** `--shape` and `--shape-size`: the crowded organization, or none for `spread`. */
export function parseCrowd(shape: string, size: string): Crowd | undefined {
  if (!DATA_SHAPES.includes(shape as DataShape))
    throw new Error(`--shape: unknown shape ${shape} (${DATA_SHAPES.join(', ')})`)
  const match = /^(\d+),(\d+)$/.exec(size)
  if (!match) throw new Error('--shape-size must be CUSTOMERS,APPOINTMENTS')
  if (shape === 'spread') return undefined
  return { shape: shape as Crowd['shape'], customers: Number(match[1]), appointments: Number(match[2]) }
}

/** The options both shape benchmarks take (`bench:shapes`, `bench:embedded`), each adding its own. */
export const SHAPE_OPTIONS = {
  shapes: { type: 'string', default: 'instant,ninety,sparse' },
  duration: { type: 'string', default: '3' },
  connections: { type: 'string', default: '16' },
  'shape-size': { type: 'string', default: '300000,600000' },
  write: { type: 'boolean', default: false },
} as const

/** How the shape benchmarks load a page: one saturation run of `duration` after 1 s of warm-up, then half that rate. */
export function shapeLoadSettings(
  values: { readonly duration: string; readonly connections: string },
  poolSize: number,
) {
  return {
    duration: Number(values.duration),
    rounds: 1,
    warmup: 1,
    connections: Number(values.connections),
    poolSize,
  }
}

/** `NAME=value,…` (a server's environment on the command line) as an environment. */
export function parseEnvList(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split(',')
      .filter(Boolean)
      .map((pair) => {
        const at = pair.indexOf('=')
        if (at < 1) throw new Error(`not NAME=value: ${pair}`)
        return [pair.slice(0, at), pair.slice(at + 1)]
      }),
  )
}
