/**
 * The soak benchmark's pure part (bench/soak.ts): percentiles, the table of its rows and the
 * verdict computed from them. No database, no clock: unit-tested in bench/test/soak-report.test.ts.
 */

/** openbook's own tables, then the data's, in the order the table shows them. */
export const OPENBOOK_TABLES = ['list_changes', 'buckets', 'list_folds'] as const
export const DATA_TABLES = ['appointments', 'customers'] as const
export type TableName = (typeof OPENBOOK_TABLES)[number] | (typeof DATA_TABLES)[number]

export interface TableStats {
  /** pg_table_size: the heap with its TOAST and maps, in bytes. */
  readonly table: number
  /** pg_indexes_size, in bytes. */
  readonly indexes: number
  readonly dead: number
  readonly autovacuums: number
}

/** One report row: the state at `minutes`, and what happened since the previous row. */
export interface SoakRow {
  readonly minutes: number
  /** Transactions committed since the start, and serialization failures retried. */
  readonly writes: number
  readonly retries: number
  /** Transactions given up on (an error other than a serialization failure). */
  readonly errors: number
  readonly tables: Readonly<Record<TableName, TableStats>>
  readonly pendingTotal: number
  /** The pending changes of the list that has the most. */
  readonly pendingMost: number
  /** Page latency over the interval, ms; null for the row before any read. */
  readonly p50: number | null
  readonly p99: number | null
  readonly pages: number
  readonly load1: number
}

/** The nearest-rank percentile of an ascending list; NaN when empty. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.ceil(q * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number
}

const bytes = (stats: TableStats) => stats.table + stats.indexes
/** The folded state: buckets and folds grow with the data; list_changes, a queue, is judged on its own. */
const FOLDED = ['buckets', 'list_folds'] as const
const foldedBytes = (row: SoakRow) => FOLDED.reduce((sum, t) => sum + bytes(row.tables[t]), 0)
const dataBytes = (row: SoakRow) => DATA_TABLES.reduce((sum, t) => sum + bytes(row.tables[t]), 0)

const MB = 1024 * 1024
const mb = (n: number) => (n / MB).toFixed(n < 10 * MB ? 2 : 1)

export interface Verdict {
  /** Size at the last row over the first, buckets and list_folds with their indexes. */
  readonly foldedGrowth: number
  /** The same for the data tables. */
  readonly dataGrowth: number
  /** The folded state grew more than the data by more than the tolerance. */
  readonly growsBeyondData: boolean
  /** Tables whose size still grows in the run's second half (a queue that should have levelled off). */
  readonly stillGrowing: string[]
  /** Page latency of the last interval over the first one's. */
  readonly p50Drift: number
  readonly p99Drift: number
  readonly latencyDrifts: boolean
  readonly lines: string[]
}

/** How much more than the data openbook's tables may grow, and latency may drift, before it is said. */
export const GROWTH_TOLERANCE = 1.25
export const DRIFT_TOLERANCE = 1.5
/** Growth of list_changes in the second half that counts as still growing: a tenth and a megabyte. */
const SECOND_HALF_SHARE = 0.1
const SECOND_HALF_SLACK = MB

/**
 * The verdict from the rows (the first taken before any write, the others at each interval):
 * openbook's tables against the data's own growth, list_changes levelling off, latency drift from
 * the first interval to the last.
 */
export function soakVerdict(rows: readonly SoakRow[]): Verdict {
  const first = rows[0]
  const last = rows.at(-1)
  if (!first || !last || rows.length < 3) throw new Error('a verdict needs the first row and two intervals')
  const foldedGrowth = foldedBytes(last) / foldedBytes(first)
  const dataGrowth = dataBytes(last) / dataBytes(first)
  const growsBeyondData = foldedGrowth > dataGrowth * GROWTH_TOLERANCE
  const middle = rows[Math.floor((rows.length - 1) / 2)] as SoakRow
  // list_changes holds only what is pending: once autovacuum keeps up its size stops growing.
  const stillGrowing = (['list_changes'] as const).filter((t) => {
    const growth = bytes(last.tables[t]) - bytes(middle.tables[t])
    return growth > bytes(middle.tables[t]) * SECOND_HALF_SHARE + SECOND_HALF_SLACK
  })
  const timed = rows.filter((row) => row.p50 !== null && row.p99 !== null)
  const early = timed[0]
  const late = timed.at(-1)
  const p50Drift = early && late ? (late.p50 as number) / (early.p50 as number) : Number.NaN
  const p99Drift = early && late ? (late.p99 as number) / (early.p99 as number) : Number.NaN
  const latencyDrifts = p50Drift > DRIFT_TOLERANCE || p99Drift > DRIFT_TOLERANCE
  const per = FOLDED.map((t) => `${t} ${mb(bytes(first.tables[t]))} → ${mb(bytes(last.tables[t]))} MB`).join(
    ', ',
  )
  const lines = [
    `Sizes (table + indexes): openbook's folded state ×${foldedGrowth.toFixed(2)} (${per}), the data ×${dataGrowth.toFixed(2)} ` +
      `(${mb(dataBytes(first))} → ${mb(dataBytes(last))} MB): ${growsBeyondData ? `**grow beyond the data** (more than ×${GROWTH_TOLERANCE} its growth)` : 'within the data’s growth'}.`,
    stillGrowing.length > 0
      ? `**Still growing in the second half**: ${stillGrowing.join(', ')} (${mb(bytes(middle.tables.list_changes))} → ${mb(bytes(last.tables.list_changes))} MB).`
      : `list_changes levels off: ${mb(bytes(middle.tables.list_changes))} MB at mid-run, ${mb(bytes(last.tables.list_changes))} MB at the end.`,
    `Page latency, last interval over the first: p50 ×${p50Drift.toFixed(2)}, p99 ×${p99Drift.toFixed(2)}: ` +
      `${latencyDrifts ? `**drifts** (more than ×${DRIFT_TOLERANCE})` : 'no drift'}.`,
  ]
  return { foldedGrowth, dataGrowth, growsBeyondData, stillGrowing, p50Drift, p99Drift, latencyDrifts, lines }
}

const ms = (value: number | null) => (value === null ? '–' : value.toFixed(1))
const size = (stats: TableStats) => `${mb(stats.table)} + ${mb(stats.indexes)}`

/** The rows as a Markdown table: sizes in MB as table + indexes, dead tuples and autovacuum runs. */
export function soakTable(rows: readonly SoakRow[]): string[] {
  const tables = [...OPENBOOK_TABLES, ...DATA_TABLES]
  return [
    `| min | writes (retries, errors) | ${tables.map((t) => `${t} MB`).join(' | ')} | dead tuples ${tables.join(' · ')} | autovacuums ${tables.join(' · ')} | pending (largest list) | pages | p50 / p99 ms | load 1 min |`,
    `|---:|---:|${tables.map(() => '---:').join('|')}|---:|---:|---:|---:|---:|---:|`,
    ...rows.map(
      (row) =>
        `| ${row.minutes.toFixed(1)} | ${row.writes} (${row.retries}, ${row.errors}) | ` +
        `${tables.map((t) => size(row.tables[t])).join(' | ')} | ` +
        `${tables.map((t) => row.tables[t].dead).join(' · ')} | ${tables.map((t) => row.tables[t].autovacuums).join(' · ')} | ` +
        `${row.pendingTotal} (${row.pendingMost}) | ${row.pages} | ${ms(row.p50)} / ${ms(row.p99)} | ${row.load1.toFixed(2)} |`,
    ),
  ]
}
