import { createHash } from 'node:crypto'
import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from 'node:fs'
import { type Appointment, type AutoPaginator, type Customer, Openbook } from '../client.js'
import type { Cursor } from '../paginate.js'
import { APPOINTMENT_COLUMNS, CUSTOMER_COLUMNS, csvLine } from './fields.js'

export type SyncResource = 'customers' | 'appointments'
export type OutputFormat = 'ndjson' | 'csv'

export interface SyncOptions {
  readonly resource: SyncResource
  readonly apiKey: string
  readonly baseUrl: string
  readonly out: string
  /** Appointments only: the window on the start time, inclusive. */
  readonly since?: string | undefined
  readonly until?: string | undefined
  /** Default: `<out>.state.json`. */
  readonly statePath?: string | undefined
  readonly pageSize?: number | undefined
  readonly timeoutMs?: number | undefined
  readonly maxAttempts?: number | undefined
  readonly signal?: AbortSignal | undefined
  readonly onProgress?: (progress: SyncProgress) => void
  /** Test hook: stop after this many pages, as if killed (the state stays as it is). */
  readonly stopAfterPages?: number | undefined
}

export interface SyncProgress {
  readonly rows: number
  readonly total: number
  readonly pass: number
}

export interface SyncSummary {
  readonly resource: SyncResource
  /** The file, or for `--pg` the table. */
  readonly out: string
  readonly format: OutputFormat | 'pg'
  /** The pass this run worked on; the first is 1. */
  readonly pass: number
  /** True when the pass finished: every row was read, and tombstones were written. */
  readonly complete: boolean
  /** Whether this run went on from an interrupted pass. */
  readonly resumed: boolean
  readonly rows: number
  readonly tombstones: number
  readonly requests: number
  readonly rereads: number
  readonly retries: number
  readonly durationMs: number
}

/**
 * What the state file holds. Each page is written to the output, then its ids to the pass's id
 * file, both flushed to disk, and only then is the state replaced (write and rename): after a
 * crash anywhere, the next run cuts both files back to the sizes the state names and goes on
 * from its cursor, so no row is written twice and none is skipped.
 */
export interface SyncState {
  readonly version: 1
  /** The resource and window: another of them is another sync. */
  readonly identity: string
  /** The last pass that finished, whose ids are in `<state>.pass-N.ids`; 0 for none. */
  readonly completePass: number
  /** The pass under way, if any. */
  readonly current: {
    readonly pass: number
    readonly cursor: Cursor | undefined
    readonly outBytes: number
    readonly idsBytes: number
    readonly rows: number
  } | null
}

export class SyncUsageError extends Error {
  override readonly name = 'SyncUsageError'
}

export function formatOf(out: string): OutputFormat {
  if (out.endsWith('.ndjson') || out.endsWith('.jsonl')) return 'ndjson'
  if (out.endsWith('.csv')) return 'csv'
  throw new SyncUsageError('--out must name a .ndjson (or .jsonl) or a .csv file')
}

export function identityOf(
  options: Pick<SyncOptions, 'resource' | 'since' | 'until'>,
  target?: string,
): string {
  // Not the base URL: the same API may be reached another way (a proxy, another host name).
  const parts: unknown[] = [options.resource, options.since ?? null, options.until ?? null]
  if (target !== undefined) parts.push(target)
  const what = JSON.stringify(parts)
  return createHash('sha256').update(what).digest('hex').slice(0, 16)
}

export function readState(path: string): SyncState | undefined {
  if (!existsSync(path)) return undefined
  const state = JSON.parse(readFileSync(path, 'utf8')) as SyncState
  if (state.version !== 1) throw new SyncUsageError(`${path} is not a state file this version knows`)
  return state
}

export function writeState(path: string, state: SyncState): void {
  const temporary = `${path}.tmp`
  const fd = openSync(temporary, 'w')
  try {
    writeSync(fd, `${JSON.stringify(state)}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temporary, path)
}

const size = (path: string) => (existsSync(path) ? statSync(path).size : 0)

/** Appends and flushes to disk. */
function append(path: string, text: string): void {
  if (!text) return
  const fd = openSync(path, 'a')
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

function readIds(path: string): Set<string> {
  if (!existsSync(path)) return new Set()
  return new Set(
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line !== ''),
  )
}

/**
 * The pages of one pass, from `resumeFrom` on, as both targets (files and `--pg`) read them: one
 * request at a time, retried, with the window of `--since` and `--until`. `retries()` counts the
 * retries made so far.
 */
export function readPass(
  options: Omit<SyncOptions, 'out'>,
  resumeFrom: Cursor | undefined,
): { paginator: AutoPaginator<Customer> | AutoPaginator<Appointment>; retries: () => number } {
  let retries = 0
  const client = new Openbook({
    apiKey: options.apiKey,
    baseUrl: options.baseUrl,
    timeoutMs: options.timeoutMs ?? 30_000,
    retry: { maxAttempts: options.maxAttempts ?? 6, maxElapsedMs: 120_000 },
    userAgent: 'openbook-sync',
    onEvent: (event) => {
      if (event.type === 'retry') retries++
    },
  })
  const common = { pageSize: options.pageSize ?? 50, resumeFrom, signal: options.signal }
  const paginator =
    options.resource === 'customers'
      ? client.customers.all(common)
      : client.appointments.all(
          {
            ...(options.since ? { startDate: options.since } : {}),
            ...(options.until ? { endDate: options.until } : {}),
          },
          common,
        )
  return { paginator, retries: () => retries }
}

/**
 * One run of openbook-sync: goes on with the pass under way, or starts a new one; at the end of a
 * complete pass, writes a tombstone for each id the previous complete pass had and this one has
 * not. An incomplete pass never writes tombstones.
 */
export async function runSync(options: SyncOptions): Promise<SyncSummary> {
  const started = Date.now()
  const format = formatOf(options.out)
  if (options.resource === 'customers' && (options.since || options.until))
    throw new SyncUsageError('--since and --until apply to appointments only')
  const statePath = options.statePath ?? `${options.out}.state.json`
  const idsPath = (pass: number) => `${statePath}.pass-${pass}.ids`
  const identity = identityOf(options)
  let state: SyncState = readState(statePath) ?? { version: 1, identity, completePass: 0, current: null }
  if (state.identity !== identity)
    throw new SyncUsageError(
      `${statePath} belongs to another sync (the resource or the window differ): use another --state or --out`,
    )
  const resumed = state.current !== null
  const current = state.current ?? {
    pass: state.completePass + 1,
    cursor: undefined,
    outBytes: size(options.out),
    idsBytes: 0,
    rows: 0,
  }
  // Whatever was written after the last saved state goes: it is written again from the cursor.
  if (existsSync(options.out)) truncateSync(options.out, current.outBytes)
  if (existsSync(idsPath(current.pass))) truncateSync(idsPath(current.pass), current.idsBytes)
  state = { ...state, current }
  writeState(statePath, state)

  const columns = options.resource === 'customers' ? CUSTOMER_COLUMNS : APPOINTMENT_COLUMNS
  const render = (row: Record<string, unknown>) =>
    format === 'ndjson' ? `${JSON.stringify(row)}\n` : csvLine(columns, row)
  if (format === 'csv' && size(options.out) === 0) append(options.out, `${columns.join(',')}\r\n`)

  const { paginator, retries } = readPass(options, current.cursor)
  let rows = current.rows
  let pages = 0
  let cursor: Cursor | undefined = current.cursor
  for await (const page of paginator.pages()) {
    append(options.out, page.data.map((row) => render(row as Record<string, unknown>)).join(''))
    append(idsPath(current.pass), page.data.map((row) => `${row.id}\n`).join(''))
    rows += page.data.length
    cursor = page.cursor
    state = {
      ...state,
      current: {
        pass: current.pass,
        cursor,
        outBytes: size(options.out),
        idsBytes: size(idsPath(current.pass)),
        rows,
      },
    }
    writeState(statePath, state)
    options.onProgress?.({ rows, total: page.pagination.total, pass: current.pass })
    if (options.stopAfterPages !== undefined && ++pages >= options.stopAfterPages && !page.cursor.done) break
  }

  const summary = {
    resource: options.resource,
    out: options.out,
    format,
    pass: current.pass,
    resumed,
    rows,
    requests: paginator.stats.requests,
    rereads: paginator.stats.rereads,
    retries: retries(),
  }
  if (!cursor?.done) return { ...summary, complete: false, tombstones: 0, durationMs: Date.now() - started }

  // The pass is complete: ids of the previous complete pass that this one did not see are gone.
  let tombstones = 0
  if (state.completePass > 0) {
    const seen = readIds(idsPath(current.pass))
    const deletedAt = new Date().toISOString()
    const lines: string[] = []
    for (const id of readIds(idsPath(state.completePass)))
      if (!seen.has(id)) lines.push(render({ id, deletedAt }))
    tombstones = lines.length
    append(options.out, lines.join(''))
  }
  const previous = state.completePass
  writeState(statePath, { version: 1, identity, completePass: current.pass, current: null })
  if (previous > 0) rmSync(idsPath(previous), { force: true })
  return { ...summary, complete: true, tombstones, durationMs: Date.now() - started }
}
