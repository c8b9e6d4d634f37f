/** What a sync is asked (SyncOptions) and what it reports (SyncSummary), for every target. */
import { BATCH_RETRY, type ClientEvent, type RetryOptions } from '../../transport.js'
import { SyncUsageError } from './errors.js'

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
  /** Rows this pass read: the list's active rows (in its window), and those found again after all. */
  readonly rows: number
  /**
   * Rows this run wrote: every row read into a file; into PostgreSQL only those new or changed
   * (an unchanged row is not written again). Rows written again because they moved count again;
   * tombstones and left-window marks are counted apart.
   */
  readonly written: number
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
  /**
   * The pass that first missed the oldest of the deferred rows, or null when none is deferred:
   * `pass - deferredSince` passes have gone by without settling it (`--max-deferred-passes`).
   */
  readonly deferredSince: number | null
  readonly durationMs: number
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
  deferredSince: null,
} as const
