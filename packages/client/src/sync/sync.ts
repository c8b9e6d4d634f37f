import { createHash } from 'node:crypto'
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from 'node:fs'
import { dirname } from 'node:path'
import { type Appointment, type AutoPaginator, type Customer, Openbook } from '../client.js'
import { OpenbookError, UsageError } from '../errors.js'
import type { Cursor } from '../paginate.js'
import { BATCH_RETRY, type ClientEvent, type RetryOptions } from '../transport.js'
import { APPOINTMENT_COLUMNS, CUSTOMER_COLUMNS, csvLine } from './fields.js'

export type SyncResource = 'customers' | 'appointments'
export type OutputFormat = 'ndjson' | 'csv'

export interface SyncOptions {
  readonly resource: SyncResource
  readonly apiKey: string
  readonly baseUrl: string
  readonly out: string
  /**
   * The key's organization, when it cannot be read from the API (an organization without any
   * active appointment). When the API shows it, it must be this one.
   */
  readonly org?: string | undefined
  /** Appointments only: the window on the start time, inclusive. */
  readonly since?: string | undefined
  readonly until?: string | undefined
  /**
   * Appointments only: a rolling window on the start time, relative to `now`: `-90d..+30d`
   * (days `d` or hours `h`). Each pass reads the window as it is when the pass starts; moving
   * with time, it stays the same sync (unlike `since`/`until`, which it replaces).
   */
  readonly window?: string | undefined
  /** What a rolling window is relative to (default: the current time). */
  readonly now?: Date | string | undefined
  /** Default: `<out>.state.json`. */
  readonly statePath?: string | undefined
  /** Rows per request, the API's `limit`: 2 to 100 (default 100); each request re-reads one row. */
  readonly pageSize?: number | undefined
  readonly timeoutMs?: number | undefined
  /** Attempts of one request, the first included (default: no limit but `maxElapsedMs`). */
  readonly maxAttempts?: number | undefined
  /** No retry of a request starts later than this after its first attempt (default 5 minutes). */
  readonly maxElapsedMs?: number | undefined
  /** Told about each request, response and retry (never the key or a payload). */
  readonly onClientEvent?: ((event: ClientEvent) => void) | undefined
  readonly signal?: AbortSignal | undefined
  readonly onProgress?: (progress: SyncProgress) => void
  /**
   * The state is saved (the output flushed to disk first) every `checkpointPages` pages or
   * `checkpointMs` milliseconds, whichever comes first (default 100 pages, 5 s), at the end, and
   * when the run fails or is interrupted; a crash re-reads what came after the last one.
   */
  readonly checkpointPages?: number | undefined
  readonly checkpointMs?: number | undefined
  /** Stop after this many pages (saved), as an interruption would. */
  readonly stopAfterPages?: number | undefined
}

/** The default checkpoint interval of `SyncOptions`. */
export const CHECKPOINT = { pages: 100, ms: 5_000 } as const

/** Tells when a checkpoint is due: every `pages` pages or `ms` milliseconds. */
export class Checkpoints {
  #pages = 0
  #since = Date.now()
  /** Checkpoints made. */
  count = 0
  constructor(readonly every: { readonly pages: number; readonly ms: number }) {
    if (!Number.isInteger(every.pages) || every.pages < 1 || !(every.ms >= 0))
      throw new SyncUsageError('the checkpoint interval must be at least one page')
  }
  static of(options: Pick<SyncOptions, 'checkpointPages' | 'checkpointMs'>): Checkpoints {
    return new Checkpoints({
      pages: options.checkpointPages ?? CHECKPOINT.pages,
      ms: options.checkpointMs ?? CHECKPOINT.ms,
    })
  }
  /** One more page written: is a checkpoint due? */
  page(): boolean {
    return ++this.#pages >= this.every.pages || Date.now() - this.#since >= this.every.ms
  }
  /** A checkpoint was made. */
  done(): void {
    this.#pages = 0
    this.#since = Date.now()
    this.count++
  }
}

export interface SyncProgress {
  readonly rows: number
  readonly total: number
  readonly pass: number
}

/** The window of one pass, on the appointments' start (inclusive ISO date-times). */
export interface PassWindow {
  readonly since?: string | undefined
  readonly until?: string | undefined
}

export interface SyncSummary {
  readonly resource: SyncResource
  /** The key's organization: the sync's state, table and rows are this organization's. */
  readonly orgId: string
  /** The file, or for `--pg` the table. */
  readonly out: string
  readonly format: OutputFormat | 'pg'
  /** The pass this run worked on; the first is 1. */
  readonly pass: number
  /** True when the pass finished: every row was read, and tombstones were written. */
  readonly complete: boolean
  /**
   * True when no pass was needed: the list had not changed since the last complete pass began
   * (one conditional request, answered 304; see `unchangedSince`). `pass` is that pass.
   */
  readonly unchanged?: boolean
  /** Whether this run went on from an interrupted pass. */
  readonly resumed: boolean
  readonly rows: number
  readonly tombstones: number
  readonly requests: number
  readonly rereads: number
  readonly retries: number
  /** State saves this run (each after the rows before it were on disk or committed). */
  readonly checkpoints: number
  /** The window this pass read (appointments). */
  readonly window: PassWindow
  /** Rows met again at an earlier start after they were read (moved): written again, updated. */
  readonly moved: number
  /** Rows of the previous pass that this one did not see, checked before anything was marked. */
  readonly checked: number
  /** Of those, rows found active again in the window (moved ahead of the cursor): written. */
  readonly recovered: number
  /** Of those, rows now outside the window (aged out or moved out): marked left-window. */
  readonly leftWindow: number
  /**
   * Of those, rows neither marked nor found: the list changed while the pass read it, so a
   * missing row may only have moved. Kept as they are; the next pass checks them again.
   */
  readonly deferred: number
  readonly durationMs: number
}

/**
 * What the state file holds. Each page is written to the output, then its ids to the pass's id
 * file, both flushed to disk, and only then is the state replaced (write and rename): after a
 * crash anywhere, the next run cuts both files back to the sizes the state names and goes on
 * from its cursor, so no row is written twice and none is skipped.
 */
export interface SyncState {
  readonly version: 2
  /** The organization whose rows this sync copies: a key of another one is refused. */
  readonly orgId: string
  /** The organization, resource, window (and table): another of them is another sync. */
  readonly identity: string
  /** The last pass that finished, whose ids are in `<state>.pass-N.ids`; 0 for none. */
  readonly completePass: number
  /** What the last complete pass read first, if it started at the top (`unchangedSince`). */
  readonly validator?: PassValidator | undefined
  /** The pass under way, if any. */
  readonly current: {
    readonly pass: number
    readonly cursor: Cursor | undefined
    readonly outBytes: number
    readonly idsBytes: number
    readonly rows: number
    /** The window the pass reads, fixed when it started (a rolling window moves between passes). */
    readonly window?: PassWindow | undefined
    /** The ETag of the pass's first page, read when the pass began. */
    readonly etag?: string | undefined
  } | null
}

/**
 * The validator of a complete pass: the ETag of its first page, read when the pass began, and the
 * query that page was (the window and the page size).
 */
export interface PassValidator {
  readonly etag: string
  readonly window: PassWindow
  readonly pageSize: number
}

/**
 * The command or its files are wrong, and a rerun of the same command will fail the same way:
 * a bad option, a state or table of another sync or organization.
 */
export class SyncUsageError extends UsageError {
  override readonly name: string = 'SyncUsageError'
  constructor(message: string, code = 'sync_usage') {
    super(message, code)
  }
}

/**
 * The output failed: a file that cannot be written (no space, no permission) or PostgreSQL failing
 * during the sync (`code` is the errno or the SQLSTATE). The rows saved so far stay; a rerun
 * resumes once the cause is gone.
 */
export class SyncTargetError extends OpenbookError {
  override readonly name: string = 'SyncTargetError'
  constructor(error: unknown) {
    const code = (error as { code?: unknown } | undefined)?.code
    super({
      error: 'Output failed',
      message: error instanceof Error ? error.message : String(error),
      code: typeof code === 'string' ? code : 'target_failed',
      retryable: true,
      cause: error,
    })
  }
}

/**
 * Another run of openbook-sync is working on the same state (a scheduler started the next run
 * before this one ended): this run did nothing. Not a usage error; the scheduler should not pile
 * up runs.
 */
export class SyncBusyError extends OpenbookError {
  override readonly name: string = 'SyncBusyError'
  constructor(message: string) {
    super({ error: 'Sync busy', message, code: 'sync_busy', retryable: false })
  }
}

/** Errnos of a file that a rerun will not cure: no permission, a directory or a file in the way, a read-only disk. */
const FILE_REFUSALS = new Set([
  'EACCES',
  'EPERM',
  'EISDIR',
  'ENOTDIR',
  'EEXIST',
  'EROFS',
  'ENAMETOOLONG',
  'ELOOP',
])

/**
 * Runs `work`; a failure that is not an OpenbookError (the file system, PostgreSQL) becomes a
 * SyncTargetError, or a SyncUsageError when a rerun will not cure it, except an abort, which is
 * thrown as the signal's reason.
 */
export async function asSyncError<T>(signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof OpenbookError || (signal?.aborted && error === signal.reason)) throw error
    const code = (error as { code?: unknown } | undefined)?.code
    if (typeof code === 'string' && FILE_REFUSALS.has(code))
      throw new SyncUsageError(`${(error as Error).message}: fix the path or its permissions`, code)
    throw new SyncTargetError(error)
  }
}

/**
 * Holds `<state>.lock` (created exclusively, with this process's id) while a run works on a state:
 * a second run on the same state is refused (SyncBusyError) rather than writing beside the first.
 * A lock left by a process that is gone (kill -9) is taken over.
 */
export function lockState(statePath: string): { release(): void } {
  const path = `${statePath}.lock`
  mkdirSync(dirname(path), { recursive: true })
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(path, 'wx')
      writeSync(fd, `${JSON.stringify({ pid: process.pid, since: new Date().toISOString() })}\n`)
      closeSync(fd)
      return { release: () => rmSync(path, { force: true }) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw error
    }
    let holder: { pid?: unknown; since?: unknown } = {}
    try {
      holder = JSON.parse(readFileSync(path, 'utf8')) as typeof holder
    } catch {}
    const pid = typeof holder.pid === 'number' ? holder.pid : undefined
    if (pid !== undefined && pid !== process.pid && alive(pid))
      throw new SyncBusyError(
        `another openbook-sync (process ${pid}, since ${String(holder.since)}) is running on ${statePath}: this run did nothing; let that one end (or, if no such run exists, remove ${path})`,
      )
    rmSync(path, { force: true })
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export function formatOf(out: string): OutputFormat {
  if (out.endsWith('.ndjson') || out.endsWith('.jsonl')) return 'ndjson'
  if (out.endsWith('.csv')) return 'csv'
  throw new SyncUsageError('--out must name a .ndjson (or .jsonl) or a .csv file')
}

export function identityOf(
  options: Pick<SyncOptions, 'resource' | 'since' | 'until' | 'window'>,
  orgId: string,
  target?: string,
): string {
  // Not the base URL: the same API may be reached another way (a proxy, another host name).
  // Not the key either: a new key of the same organization goes on with the same sync.
  // A rolling window by its definition, not by its dates of the day.
  const window = options.window === undefined ? [] : [`window:${options.window}`]
  const parts: unknown[] = [orgId, options.resource, options.since ?? null, options.until ?? null, ...window]
  if (target !== undefined) parts.push(target)
  const what = JSON.stringify(parts)
  return createHash('sha256').update(what).digest('hex').slice(0, 16)
}

/**
 * An organization id as a part of a table or file name: itself when it is made of lowercase
 * letters, digits and underscores (at most 30), else a cleaned prefix and a hash of it, so that
 * two organizations never share a name.
 */
export function orgTag(orgId: string): string {
  if (/^[a-z0-9_]{1,30}$/.test(orgId)) return orgId
  const clean = orgId
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 20)
  return `${clean}_${createHash('sha256').update(orgId).digest('hex').slice(0, 8)}`
}

export function readState(path: string): SyncState | undefined {
  if (!existsSync(path)) return undefined
  let state: SyncState | { version: number }
  try {
    state = JSON.parse(readFileSync(path, 'utf8')) as SyncState | { version: number }
  } catch {
    throw new SyncUsageError(`${path} is not a state file (not JSON)`)
  }
  if (state.version === 1)
    throw new SyncUsageError(
      `${path} was written by an earlier openbook-sync that did not record the organization: move it (and what it synced) away to start over`,
    )
  if (state.version !== 2) throw new SyncUsageError(`${path} is not a state file this version knows`)
  return state as SyncState
}

/**
 * The state at `path`, or `fresh` when there is none; refused, in one line, when it is another
 * organization's or another sync's.
 */
export function openState(path: string, fresh: SyncState, what: string): SyncState {
  const state = readState(path) ?? fresh
  if (state.orgId !== fresh.orgId)
    throw new SyncUsageError(
      `${path} is the state of organization ${state.orgId}'s sync, and this key is organization ${fresh.orgId}'s: use another ${what}`,
    )
  if (state.identity !== fresh.identity)
    throw new SyncUsageError(
      `${path} belongs to another sync (the resource, the window${what.includes('table') ? ', the database or the table' : ''} differ): use another ${what}`,
    )
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

/**
 * A CSV file is appended to only under this version's header: rows of other columns (the API
 * added a field, within v1) would shift under an older header, silently. Refused in one line.
 */
function checkCsvHeader(path: string, columns: readonly string[], statePath: string): void {
  const fd = openSync(path, 'r')
  let head: string
  try {
    const buffer = Buffer.alloc(64 * 1024)
    head = buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0)).toString('utf8')
  } finally {
    closeSync(fd)
  }
  const header = head.split('\r\n')[0] ?? ''
  const expected = columns.join(',')
  if (header === expected) return
  const theirs = new Set(header.split(','))
  const added = columns.filter((column) => !theirs.has(column))
  throw new SyncUsageError(
    `${path} has another header than this version's columns${added.length > 0 ? ` (new: ${added.join(', ')})` : ''}: appending would shift them. Start a new file (move ${path} and ${statePath} away), or write .ndjson, which keeps every field`,
    'csv_header',
  )
}

/** Writes all of `text`; returns its length in bytes. */
function writeAll(fd: number, text: string): number {
  const bytes = Buffer.from(text)
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at)
  return bytes.length
}

/** Appends and flushes to disk; returns the bytes appended. */
export function appendSynced(path: string, text: string): number {
  if (!text) return 0
  const fd = openSync(path, 'a')
  try {
    const bytes = writeAll(fd, text)
    fsyncSync(fd)
    return bytes
  } finally {
    closeSync(fd)
  }
}

/** Appends and flushes to disk. */
function append(path: string, text: string): void {
  if (!text) return
  const fd = openSync(path, 'a')
  try {
    writeAll(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * A pass's ids file: one JSON line per row, `"id"` for a customer, `["id","start","customerId"]`
 * for an appointment (what resolveMissing needs to know of a row that goes missing), and for a
 * row kept unresolved (deferred) the same as an array with the pass that first missed it last.
 */
export function idsLine(
  row: {
    id: string
    start?: string | undefined
    customerId?: string | undefined
    deferredSince?: number | undefined
  },
  resource: SyncResource,
): string {
  const fields = [row.id, row.start ?? null, row.customerId ?? null]
  if (row.deferredSince !== undefined) return `${JSON.stringify([...fields, row.deferredSince])}\n`
  return `${JSON.stringify(resource === 'customers' ? row.id : fields)}\n`
}

export function readIds(path: string): Map<string, Missing> {
  const entries = new Map<string, Missing>()
  if (!existsSync(path)) return entries
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line === '') continue
    const value = JSON.parse(line) as string | [string, string | null, string | null, number?]
    const [id, start, customerId, deferredSince] = typeof value === 'string' ? [value, null, null] : value
    entries.set(id, {
      id,
      start: start ?? undefined,
      customerId: customerId ?? undefined,
      ...(deferredSince === undefined ? {} : { deferredSince }),
    })
  }
  return entries
}

/** openbook-sync's retries: `BATCH_RETRY`, for a batch job rather than an interactive call. */
export const SYNC_RETRY: Required<RetryOptions> = BATCH_RETRY

/** What a pass that stopped short of the end (a failure, a resumable stop) reports of its checks. */
export const INCOMPLETE_PASS = {
  complete: false,
  tombstones: 0,
  checked: 0,
  recovered: 0,
  leftWindow: 0,
  deferred: 0,
} as const

const WINDOW = /^([+-]?\d{1,5})([dh])\.\.([+-]?\d{1,5})([dh])$/
const UNIT_MS = { d: 86_400_000, h: 3_600_000 } as const

/** The window a new pass reads: `since`/`until`, or the rolling `window` as of `now`. */
export function windowOf(
  options: Pick<SyncOptions, 'resource' | 'since' | 'until' | 'window' | 'now'>,
): PassWindow {
  if (options.resource === 'customers' && (options.since || options.until || options.window))
    throw new SyncUsageError('--since, --until and --window apply to appointments only')
  if (options.window === undefined) return { since: options.since, until: options.until }
  if (options.since || options.until) throw new SyncUsageError('give --window or --since/--until, not both')
  const match = WINDOW.exec(options.window)
  if (!match)
    throw new SyncUsageError('--window must look like -90d..+30d: days (d) or hours (h) from now, twice')
  const now = options.now === undefined ? Date.now() : new Date(options.now).getTime()
  if (Number.isNaN(now)) throw new SyncUsageError('--now must be an ISO-8601 date-time')
  const at = (amount: string | undefined, unit: string | undefined) =>
    new Date(now + Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS]).toISOString()
  const since = at(match[1], match[2])
  const until = at(match[3], match[4])
  if (since >= until) throw new SyncUsageError('--window must start before it ends')
  return { since, until }
}

/** Whether `start` lies in the window (inclusive, as the API's filters). */
export function inWindow(start: string, window: PassWindow): boolean {
  const time = Date.parse(start)
  return (
    (window.since === undefined || time >= Date.parse(window.since)) &&
    (window.until === undefined || time <= Date.parse(window.until))
  )
}

/** A row the previous complete pass saw (or kept) and this one did not: what is known of it. */
export interface Missing {
  readonly id: string
  /** Appointments: its last known start. */
  readonly start: string | undefined
  readonly customerId: string | undefined
  /** The pass that first missed it, when an earlier pass kept it unresolved (deferred). */
  readonly deferredSince?: number | undefined
}

export interface Verdicts {
  /** Not in the list, checked exactly: deactivated or deleted. */
  readonly gone: string[]
  /** Outside the window now: aged out of a rolling window, or moved out of it. */
  readonly left: string[]
  /** Active after all (moved while the pass read the list, so it missed them): written now. */
  readonly back: Record<string, unknown>[]
  /** Not decided: the list kept changing while it was read. Kept as they are, checked next pass. */
  readonly deferred: Missing[]
  /** Requests the check made. */
  readonly requests: number
}

export const NO_VERDICTS: Verdicts = { gone: [], left: [], back: [], deferred: [], requests: 0 }

/** Reads of the whole list a second night makes, at most, to find one during which nothing changed. */
const CONFIRMATION_READS = 2

/**
 * Whether the list has not changed since `etag` (its first page's, with this window and limit) was
 * read: that page asked again with it, answered 304. One request.
 */
export async function listUnchanged(
  client: Openbook,
  options: Pick<SyncOptions, 'resource' | 'pageSize' | 'signal'>,
  window: PassWindow,
  etag: string | undefined,
): Promise<boolean> {
  if (etag === undefined) return false
  const conditional = { ifNoneMatch: etag, signal: options.signal }
  const first = { offset: 0, limit: limitOf(options) }
  const page =
    options.resource === 'customers'
      ? await client.customers.list(first, conditional)
      : await client.appointments.list({ ...windowFilters(window), ...first }, conditional)
  return page.notModified === true
}

/**
 * What became of the rows of the previous complete pass that this complete pass did not see.
 *
 * A row is marked deleted only when that is certain. The paginator yields every row that stays
 * active and keeps its sort key for a whole read; a row it missed was deactivated, or its sort
 * key (createdAt, start) changed during the read. When nothing at all changed in the list while
 * the pass read it (its first page, asked again with the ETag read when the pass began, is
 * answered 304: one request), the pass read a list that stood still, and the rows it missed are
 * not in it. When the list changed meanwhile, a missing row may only have moved: it is kept as it
 * is (deferred) and checked by the next pass, which sees it if it is active. A row missing a
 * second time from a pass during which the list changed again is settled at once by reading the
 * list again (at most twice) until one read finds the list standing still.
 *
 * Appointments of a window: one whose last known start is outside the window left it. The others,
 * missing from a window that stood still, are looked for outside it: among their customers'
 * appointments (one list per customer, any start) or in the list outside the window read once,
 * whichever costs fewer requests (two requests of one row tell the second's size). Found outside
 * the window, they left it; not found while the list stood still, they are deleted.
 */
export async function resolveMissing(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  missing: readonly Missing[],
  window: PassWindow,
  passEtag: string | undefined,
  pass: number,
): Promise<Verdicts> {
  const left: string[] = []
  const back: Record<string, unknown>[] = []
  let requests = 0
  const windowed =
    options.resource === 'appointments' && (window.since !== undefined || window.until !== undefined)
  let rest: Missing[] = []
  for (const row of missing)
    if (windowed && row.start !== undefined && !inWindow(row.start, window)) left.push(row.id)
    else rest.push(row)
  if (rest.length === 0) return { ...NO_VERDICTS, left }
  requests++
  /** The ETag of a read of the window during which the list stood still. */
  let stillEtag = passEtag
  let still = await listUnchanged(client, options, window, passEtag)
  if (!still) {
    if (rest.every((row) => row.deferredSince === undefined))
      return {
        ...NO_VERDICTS,
        left,
        deferred: rest.map((row) => ({ ...row, deferredSince: pass })),
        requests,
      }
    for (let read = 0; read < CONFIRMATION_READS && !still; read++) {
      const paginator = readPass(options, client, undefined, window)
      const wanted = new Set(rest.map((row) => row.id))
      for await (const row of paginator)
        if (wanted.has(row.id)) back.push(row as unknown as Record<string, unknown>)
      const found = new Set(back.map((row) => String(row.id)))
      rest = rest.filter((row) => !found.has(row.id))
      still = await paginator.unchanged()
      stillEtag = paginator.etag
      requests += paginator.stats.requests
    }
    if (!still) return { ...NO_VERDICTS, left, back, deferred: rest, requests }
  }
  if (!windowed) return { gone: rest.map((row) => row.id), left, back, deferred: [], requests }
  // Missing from a window that stood still: deactivated, or moved out of the window. Each is looked
  // for where it could be now: in its customer's list, or in the list outside the window, whichever
  // costs fewer requests (a purge of thousands touches thousands of customers).
  const byCustomer = new Map<string, Missing[]>()
  let customerless = false
  for (const row of rest)
    if (row.customerId === undefined) customerless = true
    else byCustomer.set(row.customerId, [...(byCustomer.get(row.customerId) ?? []), row])
  const outside = outsideOf(window)
  let outsideCost = Number.POSITIVE_INFINITY
  if (customerless || byCustomer.size > outside.length) {
    outsideCost = 1 // the check that the list stood still meanwhile
    for (const part of outside) {
      const probe = await client.appointments.list({ ...part, limit: 1 }, { signal: options.signal })
      requests++
      outsideCost += requestsToRead(probe.pagination.total, limitOf(options))
    }
  }
  const verdicts =
    outsideCost <= byCustomer.size || customerless
      ? await lookOutside(client, options, rest, window, outside, stillEtag, pass)
      : await lookByCustomer(client, options, byCustomer, window, pass)
  return {
    ...verdicts,
    left: [...left, ...verdicts.left],
    back: [...back, ...verdicts.back],
    requests: requests + verdicts.requests,
  }
}

/**
 * The filters of the list outside a window: before its start, after its end. Each bound is
 * included on both sides (the API's bounds are inclusive), so no start falls between them.
 */
function outsideOf(window: PassWindow): Record<string, string>[] {
  return [
    ...(window.since === undefined ? [] : [{ endDate: window.since }]),
    ...(window.until === undefined ? [] : [{ startDate: window.until }]),
  ]
}

/** Requests to read `total` rows in pages of `limit` (each page after the first re-reads one). */
function requestsToRead(total: number, limit: number): number {
  return total <= limit ? 1 : 1 + Math.ceil((total - limit) / (limit - 1))
}

/**
 * Looks for the missing rows in the list outside the window, read once, then asks whether the
 * organization's list stood still since the window's still read began (its first page with that
 * read's ETag, which any write to the list changes): if it did, a row not found is no longer
 * listed anywhere; if not, it is kept for the next pass.
 */
async function lookOutside(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  rows: readonly Missing[],
  window: PassWindow,
  outside: readonly Record<string, string>[],
  stillEtag: string | undefined,
  pass: number,
): Promise<Verdicts> {
  const wanted = new Set(rows.map((row) => row.id))
  const found = new Map<string, Appointment>()
  let requests = 0
  for (const part of outside) {
    const paginator = client.appointments.all(part, {
      pageSize: limitOf(options) - 1,
      signal: options.signal,
    })
    for await (const row of paginator) if (wanted.has(row.id)) found.set(row.id, row)
    requests += paginator.stats.requests
  }
  requests++
  const exact = await listUnchanged(client, options, window, stillEtag)
  const verdicts = { gone: [] as string[], left: [] as string[], back: [] as Record<string, unknown>[] }
  const deferred: Missing[] = []
  for (const row of rows) {
    const now = found.get(row.id)
    if (now !== undefined) {
      if (inWindow(now.start, window)) verdicts.back.push(now as unknown as Record<string, unknown>)
      else verdicts.left.push(row.id)
    } else if (exact) verdicts.gone.push(row.id)
    else deferred.push({ ...row, deferredSince: row.deferredSince ?? pass })
  }
  return { ...verdicts, deferred, requests }
}

/** Looks for the missing rows among their customers' appointments (one list per customer, any start). */
async function lookByCustomer(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  byCustomer: ReadonlyMap<string, readonly Missing[]>,
  window: PassWindow,
  pass: number,
): Promise<Verdicts> {
  const gone: string[] = []
  const left: string[] = []
  const back: Record<string, unknown>[] = []
  const deferred: Missing[] = []
  let requests = 0
  for (const [customerId, rows] of byCustomer) {
    const paginator = client.appointments.all({ customerId }, { pageSize: 99, signal: options.signal })
    const found = new Map<string, Appointment>()
    const ids = new Set(rows.map((row) => row.id))
    for await (const row of paginator) if (ids.has(row.id)) found.set(row.id, row)
    // One page is one statement: exact. Over several, a move during the read could hide a row.
    const exact = paginator.stats.requests === 1 || (await paginator.unchanged())
    requests += paginator.stats.requests
    for (const row of rows) {
      const now = found.get(row.id)
      if (now !== undefined) {
        if (inWindow(now.start, window)) back.push(now as unknown as Record<string, unknown>)
        else left.push(row.id)
      } else if (exact) gone.push(row.id)
      else deferred.push({ ...row, deferredSince: row.deferredSince ?? pass })
    }
  }
  return { gone, left, back, deferred, requests }
}

/** The client a sync reads with; `retries()` counts the retries made so far. */
export function syncClient(options: Omit<SyncOptions, 'out'>): { client: Openbook; retries: () => number } {
  let retries = 0
  const client = new Openbook({
    apiKey: options.apiKey,
    baseUrl: options.baseUrl,
    timeoutMs: options.timeoutMs ?? 30_000,
    retry: {
      ...SYNC_RETRY,
      maxAttempts: options.maxAttempts ?? SYNC_RETRY.maxAttempts,
      maxElapsedMs: options.maxElapsedMs ?? SYNC_RETRY.maxElapsedMs,
    },
    userAgent: 'openbook-sync',
    onEvent: (event) => {
      if (event.type === 'retry') retries++
      options.onClientEvent?.(event)
    },
  })
  return { client, retries: () => retries }
}

/**
 * The key's organization, as the server names it on every answer (Openbook-Organization): one
 * request of one row. `expected` (`--org`) is only checked against it. From a server that does not
 * name it, it is read from an appointment's `orgId` instead, and `expected` is needed when there
 * is none.
 */
export async function organizationOf(
  client: Openbook,
  expected: string | undefined,
  signal?: AbortSignal,
): Promise<string> {
  if (expected !== undefined && (expected === '' || expected.length > 128))
    throw new SyncUsageError('--org must be an organization id (1 to 128 characters)')
  const page = await client.appointments.list({ limit: 1 }, { signal })
  const shown = page.organizationId ?? page.data[0]?.orgId
  if (shown !== undefined && expected !== undefined && shown !== expected)
    throw new SyncUsageError(`the key is organization ${shown}'s, not --org ${expected}'s`)
  const orgId = shown ?? expected
  if (orgId === undefined)
    throw new SyncUsageError(
      "the server does not name the key's organization (no Openbook-Organization header, no active appointment): give it with --org",
    )
  return orgId
}

/** A page the server says is another organization's stops the sync before it is written anywhere. */
export function checkPageOrganization(
  page: { readonly organizationId?: string | undefined },
  orgId: string,
): void {
  if (page.organizationId !== undefined && page.organizationId !== orgId)
    throw new SyncUsageError(
      `the API sent a page of organization ${page.organizationId} to a sync of organization ${orgId}: nothing of it was written`,
      'organization_mismatch',
    )
}

/**
 * Every row of an appointments page must be of the sync's organization (the API names it in
 * each); a row of another one stops the sync before it is written anywhere.
 */
export function checkOrganization(rows: readonly object[], orgId: string): void {
  for (const row of rows) {
    const other = (row as { orgId?: unknown }).orgId
    if (other !== undefined && other !== orgId)
      throw new SyncUsageError(
        `the API sent a row of organization ${String(other)} to a sync of organization ${orgId}: nothing of it was written`,
        'organization_mismatch',
      )
  }
}

/**
 * The pages of one pass, from `resumeFrom` on, as both targets (files and `--pg`) read them: one
 * request at a time, retried, with the window of `--since` and `--until`.
 */
export function readPass(
  options: Omit<SyncOptions, 'out'>,
  client: Openbook,
  resumeFrom: Cursor | undefined,
  window: PassWindow,
  seen: Iterable<string> = [],
): AutoPaginator<Customer> | AutoPaginator<Appointment> {
  // Each request overlaps the previous page by one row (the no-missed-row check): `limit - 1` new.
  const common = { pageSize: limitOf(options) - 1, resumeFrom, seen, signal: options.signal }
  const paginator =
    options.resource === 'customers'
      ? client.customers.all(common)
      : client.appointments.all(windowFilters(window), common)
  return paginator
}

/** The API's `limit` of a sync's requests (`--page-size`). */
function limitOf(options: Pick<SyncOptions, 'pageSize'>): number {
  const limit = options.pageSize ?? 100
  if (!Number.isInteger(limit) || limit < 2 || limit > 100)
    throw new SyncUsageError(`--page-size must be from 2 to 100, got ${String(options.pageSize)}`)
  return limit
}

const windowFilters = (window: PassWindow) => ({
  ...(window.since ? { startDate: window.since } : {}),
  ...(window.until ? { endDate: window.until } : {}),
})

const sameWindow = (a: PassWindow, b: PassWindow) => a.since === b.since && a.until === b.until

/** The validator a pass leaves when it completes: its first page's ETag, if it read one. */
export const validatorOf = (
  options: Pick<SyncOptions, 'pageSize'>,
  etag: string | undefined,
  window: PassWindow,
): PassValidator | undefined =>
  etag === undefined ? undefined : { etag, window, pageSize: limitOf(options) }

/**
 * Whether the list is as the last complete pass read it, at the cost of one request: that pass's
 * first page asked again with its ETag (If-None-Match), answered 304.
 *
 * Exact, and safe to skip the pass on, when: (1) the state names no pass under way and its last
 * pass completed (its copy, tombstones included, was written before the state), (2) that pass
 * began at the top of the list and kept the ETag of its first page, read when it began, (3) the
 * pass now due would read the same query: the same resource, the same window to the millisecond
 * (a rolling window moves with the clock, so it always reads again, since rows leave it without
 * any change: only a rerun with the same `--now` is answered 304), the same page size. The ETag
 * changes with any change to the organization's list, and names the organization, the query and
 * the API's format: a 304 means nothing changed since that pass began, so it read a list that
 * did not change under it, and its copy is the list now. A key of another organization is
 * answered 200 (its ETags differ), and the run goes on as usual.
 */
export async function unchangedSince(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  state: SyncState | undefined,
): Promise<boolean> {
  const validator = state?.current === null ? state.validator : undefined
  if (validator === undefined) return false
  const window = windowOf(options)
  if (!sameWindow(window, validator.window) || limitOf(options) !== validator.pageSize) return false
  const conditional = { ifNoneMatch: validator.etag, signal: options.signal }
  const first = { offset: 0, limit: validator.pageSize }
  const page =
    options.resource === 'customers'
      ? await client.customers.list(first, conditional)
      : await client.appointments.list({ ...windowFilters(window), ...first }, conditional)
  return page.notModified === true
}

/** The summary of a run that found the list unchanged since the last complete pass. */
export function unchangedSummary(
  options: Pick<SyncOptions, 'resource'>,
  state: SyncState,
  out: string,
  format: OutputFormat | 'pg',
  retries: number,
  started: number,
): SyncSummary {
  return {
    resource: options.resource,
    orgId: state.orgId,
    out,
    format,
    pass: state.completePass,
    complete: true,
    unchanged: true,
    resumed: false,
    rows: 0,
    tombstones: 0,
    requests: 1,
    rereads: 0,
    retries,
    checkpoints: 0,
    window: state.validator?.window ?? {},
    moved: 0,
    checked: 0,
    recovered: 0,
    leftWindow: 0,
    deferred: 0,
    durationMs: Date.now() - started,
  }
}

/**
 * One run of openbook-sync: goes on with the pass under way, or starts a new one; at the end of a
 * complete pass, writes a tombstone for each id the previous complete pass had and this one has
 * not. An incomplete pass never writes tombstones.
 */
export function runSync(options: SyncOptions): Promise<SyncSummary> {
  return asSyncError(options.signal, () => fileSync(options))
}

async function fileSync(options: SyncOptions): Promise<SyncSummary> {
  const started = Date.now()
  const format = formatOf(options.out)
  windowOf(options) // refuses a wrong window before anything else
  const statePath = options.statePath ?? `${options.out}.state.json`
  mkdirSync(dirname(options.out), { recursive: true })
  mkdirSync(dirname(statePath), { recursive: true })
  const idsPath = (pass: number) => `${statePath}.pass-${pass}.ids`
  const { client, retries } = syncClient(options)
  const lock = lockState(statePath)
  try {
    return await filePass(options, { started, format, statePath, idsPath, client, retries })
  } finally {
    lock.release()
  }
}

interface FileRun {
  readonly started: number
  readonly format: OutputFormat
  readonly statePath: string
  readonly idsPath: (pass: number) => string
  readonly client: Openbook
  readonly retries: () => number
}

async function filePass(options: SyncOptions, run: FileRun): Promise<SyncSummary> {
  const { started, format, statePath, idsPath, client, retries } = run
  const columns = options.resource === 'customers' ? CUSTOMER_COLUMNS : APPOINTMENT_COLUMNS
  if (format === 'csv' && size(options.out) > 0) checkCsvHeader(options.out, columns, statePath)
  // An unchanged list costs one request: no organization look-up, no pass.
  const previous = readState(statePath)
  if (previous && (await unchangedSince(client, options, previous)))
    return unchangedSummary(options, previous, options.out, format, retries(), started)
  const orgId = await organizationOf(client, options.org, options.signal)
  const identity = identityOf(options, orgId)
  let state = openState(
    statePath,
    { version: 2, orgId, identity, completePass: 0, current: null },
    '--out (or --state)',
  )
  const resumed = state.current !== null
  const current = state.current ?? {
    pass: state.completePass + 1,
    cursor: undefined,
    outBytes: size(options.out),
    idsBytes: 0,
    rows: 0,
    window: windowOf(options),
  }
  const window = current.window ?? windowOf(options)
  // Whatever was written after the last saved state goes: it is written again from the cursor.
  if (existsSync(options.out)) truncateSync(options.out, current.outBytes)
  if (existsSync(idsPath(current.pass))) truncateSync(idsPath(current.pass), current.idsBytes)
  state = { ...state, current }
  writeState(statePath, state)

  const render = (row: Record<string, unknown>) =>
    format === 'ndjson' ? `${JSON.stringify(row)}\n` : csvLine(columns, row)
  if (format === 'csv' && size(options.out) === 0) append(options.out, `${columns.join(',')}\r\n`)

  // After a resume, the rows this pass wrote already are not yielded again (a row moved since).
  const seen = current.cursor ? readIds(idsPath(current.pass)).keys() : []
  const paginator = readPass(options, client, current.cursor, window, seen)
  const checkpoints = Checkpoints.of(options)
  let rows = current.rows
  let pages = 0
  let cursor: Cursor | undefined = current.cursor
  let outBytes = size(options.out)
  let idsBytes = current.idsBytes
  const outFd = openSync(options.out, 'a')
  const idsFd = openSync(idsPath(current.pass), 'a')
  /** Flushes both files, then saves where the pass stands: only whole pages are counted. */
  const checkpoint = () => {
    fsyncSync(outFd)
    fsyncSync(idsFd)
    const etag = current.etag ?? paginator.etag
    state = { ...state, current: { pass: current.pass, cursor, outBytes, idsBytes, rows, window, etag } }
    writeState(statePath, state)
    checkpoints.done()
  }
  try {
    for await (const page of paginator.pages()) {
      checkPageOrganization(page, orgId)
      checkOrganization(page.data, orgId)
      checkOrganization(page.moved, orgId)
      // Rows moved since they were written come again as they are now: a later line, an update.
      const text = [...page.data, ...page.moved].map((row) => render(row as Record<string, unknown>)).join('')
      const ids = page.data.map((row) => idsLine(row, options.resource)).join('')
      const written = { out: writeAll(outFd, text), ids: writeAll(idsFd, ids) }
      outBytes += written.out
      idsBytes += written.ids
      rows += page.data.length
      cursor = page.cursor
      if (checkpoints.page()) checkpoint()
      options.onProgress?.({ rows, total: page.pagination.total, pass: current.pass })
      if (options.stopAfterPages !== undefined && ++pages >= options.stopAfterPages && !page.cursor.done)
        break
    }
    checkpoint()
  } catch (error) {
    // The pages written so far are whole: save them, so that the rerun goes on after them.
    try {
      checkpoint()
    } catch {}
    throw error
  } finally {
    closeSync(outFd)
    closeSync(idsFd)
  }

  const summary = {
    resource: options.resource,
    orgId,
    out: options.out,
    format,
    pass: current.pass,
    resumed,
    rows,
    requests: paginator.stats.requests,
    rereads: paginator.stats.rereads,
    retries: retries(),
    checkpoints: checkpoints.count,
    window,
    moved: paginator.stats.moved,
  }
  if (!cursor?.done) return { ...summary, ...INCOMPLETE_PASS, durationMs: Date.now() - started }

  // The pass is complete: what became of the rows of the previous complete pass that this one
  // did not see (resolveMissing): only rows certainly gone are marked deleted.
  let verdicts: Verdicts = NO_VERDICTS
  let checked = 0
  if (state.completePass > 0) {
    const thisPass = readIds(idsPath(current.pass))
    const missing = [...readIds(idsPath(state.completePass)).values()].filter((row) => !thisPass.has(row.id))
    checked = missing.length
    verdicts = await resolveMissing(
      client,
      options,
      missing,
      window,
      current.etag ?? paginator.etag,
      current.pass,
    )
    checkOrganization(verdicts.back, orgId)
    const at = new Date().toISOString()
    append(
      options.out,
      [
        ...verdicts.back.map((row) => render(row)),
        ...verdicts.left.map((id) => render({ id, leftWindowAt: at })),
        ...verdicts.gone.map((id) => render({ id, deletedAt: at })),
      ].join(''),
    )
    append(
      idsPath(current.pass),
      [
        ...verdicts.back.map((row) => idsLine(row as { id: string }, options.resource)),
        ...verdicts.deferred.map((row) => idsLine(row, options.resource)),
      ].join(''),
    )
  }
  const previousPass = state.completePass
  // Rows left undecided are checked by the next pass: it must read, whatever the list did.
  const validator =
    verdicts.deferred.length === 0 ? validatorOf(options, state.current?.etag, window) : undefined
  writeState(statePath, { version: 2, orgId, identity, completePass: current.pass, current: null, validator })
  if (previousPass > 0) rmSync(idsPath(previousPass), { force: true })
  return {
    ...summary,
    requests: summary.requests + verdicts.requests,
    rows: rows + verdicts.back.length,
    complete: true,
    unchanged: false,
    tombstones: verdicts.gone.length,
    checked,
    recovered: verdicts.back.length,
    leftWindow: verdicts.left.length,
    deferred: verdicts.deferred.length,
    durationMs: Date.now() - started,
  }
}
