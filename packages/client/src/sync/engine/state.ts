/**
 * The state a sync keeps beside its output: the state file, its lock, and the pass's ids file
 * (the seen-set). Both targets resume from it the same way.
 */
import { createHash } from 'node:crypto'
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { dirname } from 'node:path'
import type { Cursor } from '../../paginate.js'
import { SyncBusyError, SyncUsageError } from './errors.js'
import type { PassWindow, SyncOptions, SyncResource } from './options.js'

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

/** Writes all of `text`; returns its length in bytes. */
export function writeAll(fd: number, text: string): number {
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

/** A row the previous complete pass saw (or kept) and this one did not: what is known of it. */
export interface Missing {
  readonly id: string
  /** Appointments: its last known start. */
  readonly start: string | undefined
  readonly customerId: string | undefined
  /** The pass that first missed it, when an earlier pass kept it unresolved (deferred). */
  readonly deferredSince?: number | undefined
}
