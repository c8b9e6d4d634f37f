/**
 * Reading a pass, whatever the target: the client and its retries, the key's organization and the
 * check of every page against it, the pages themselves, and the validator that lets an unchanged
 * list cost one request.
 */
import { type Appointment, type AutoPaginator, type Customer, Openbook } from '../../client.js'
import type { Cursor } from '../../paginate.js'
import { SyncUsageError } from './errors.js'
import {
  type OutputFormat,
  type PassWindow,
  SYNC_RETRY,
  type SyncOptions,
  type SyncSummary,
} from './options.js'
import type { PassValidator, SyncState } from './state.js'
import { sameWindow, windowFilters, windowOf } from './window.js'

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

/** A page of a pass, checked before anything of it is written: the page and each row, moved ones too. */
export function checkPage(
  page: {
    readonly organizationId?: string | undefined
    readonly data: readonly object[]
    readonly moved: readonly object[]
  },
  orgId: string,
): void {
  checkPageOrganization(page, orgId)
  checkOrganization(page.data, orgId)
  checkOrganization(page.moved, orgId)
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
export function limitOf(options: Pick<SyncOptions, 'pageSize'>): number {
  const limit = options.pageSize ?? 100
  if (!Number.isInteger(limit) || limit < 2 || limit > 100)
    throw new SyncUsageError(`--page-size must be from 2 to 100, got ${String(options.pageSize)}`)
  return limit
}

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
    written: 0,
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
    deferredSince: null,
    durationMs: Date.now() - started,
  }
}
