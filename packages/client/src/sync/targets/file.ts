/** The file target: NDJSON or CSV, appended to, flushed before each checkpoint. */
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  truncateSync,
} from 'node:fs'
import { dirname } from 'node:path'
import type { Openbook } from '../../client.js'
import type { Cursor } from '../../paginate.js'
import { asSyncError, SyncUsageError } from '../engine/errors.js'
import { NO_VERDICTS, resolveMissing, type Verdicts, verdictCounts } from '../engine/missing.js'
import {
  Checkpoints,
  INCOMPLETE_PASS,
  type OutputFormat,
  type SyncOptions,
  type SyncSummary,
} from '../engine/options.js'
import {
  checkOrganization,
  checkPage,
  organizationOf,
  readPass,
  syncClient,
  unchangedSince,
  unchangedSummary,
  validatorOf,
} from '../engine/pass.js'
import {
  identityOf,
  idsLine,
  lockState,
  openState,
  readIds,
  readState,
  writeAll,
  writeState,
} from '../engine/state.js'
import { windowOf } from '../engine/window.js'
import { APPOINTMENT_COLUMNS, CUSTOMER_COLUMNS, checkCsvFields, csvLine } from '../fields.js'

export function formatOf(out: string): OutputFormat {
  if (out.endsWith('.ndjson') || out.endsWith('.jsonl')) return 'ndjson'
  if (out.endsWith('.csv')) return 'csv'
  throw new SyncUsageError('--out must name a .ndjson (or .jsonl) or a .csv file')
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

  const render = (row: Record<string, unknown>) => {
    if (format === 'ndjson') return `${JSON.stringify(row)}\n`
    checkCsvFields(columns, row, options.out)
    return csvLine(columns, row)
  }
  if (format === 'csv' && size(options.out) === 0) append(options.out, `${columns.join(',')}\r\n`)

  // After a resume, the rows this pass wrote already are not yielded again (a row moved since).
  const seen = current.cursor ? readIds(idsPath(current.pass)).keys() : []
  const paginator = readPass(options, client, current.cursor, window, seen)
  const checkpoints = Checkpoints.of(options)
  let rows = current.rows
  let written = 0
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
      checkPage(page, orgId)
      // Rows moved since they were written come again as they are now: a later line, an update.
      const text = [...page.data, ...page.moved].map((row) => render(row as Record<string, unknown>)).join('')
      const ids = page.data.map((row) => idsLine(row, options.resource)).join('')
      const bytes = { out: writeAll(outFd, text), ids: writeAll(idsFd, ids) }
      outBytes += bytes.out
      idsBytes += bytes.ids
      rows += page.data.length
      written += page.data.length + page.moved.length
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
    written,
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
      // The whole list in this run's one request: one statement's snapshot.
      !resumed && paginator.stats.requests === 1,
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
    written: written + verdicts.back.length,
    ...verdictCounts(verdicts, checked),
    tombstones: verdicts.gone.length,
    durationMs: Date.now() - started,
  }
}
