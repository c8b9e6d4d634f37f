/** What became of the rows a complete pass did not see: decided exactly, or kept for the next pass. */
import type { Appointment, AppointmentFilters, Customer, NotModified, Openbook, Page } from '../../client.js'
import type { PassWindow, SyncOptions } from './options.js'
import { limitOf } from './pass.js'
import type { Missing } from './state.js'
import { inWindow, windowFilters } from './window.js'

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

/** What a complete pass reports of its check of `checked` missing rows. */
export function verdictCounts(verdicts: Verdicts, checked: number) {
  return {
    complete: true,
    unchanged: false,
    checked,
    recovered: verdicts.back.length,
    leftWindow: verdicts.left.length,
    deferred: verdicts.deferred.length,
    deferredSince: verdicts.deferred.reduce<number | null>(
      (oldest, row) =>
        row.deferredSince !== undefined && (oldest === null || row.deferredSince < oldest)
          ? row.deferredSince
          : oldest,
      null,
    ),
  } as const
}

/**
 * The requests the lookups of one pass make at most (`lookAround`): as many as a plain read of the
 * list, and at least this many. A writer that deactivates hundreds of rows during every pass would
 * otherwise make a night cost ten plain reads; the rows beyond the budget are kept for the next
 * pass, which marks them deleted if it misses them too (`secondMisses`).
 */
const LOOKUP_BUDGET_FLOOR = 20

/**
 * The most pages of the customers' list read again, once, to find it still: a longer read under
 * steady writes never stands still, and the rows it would settle are settled by the next pass
 * anyway (`secondMisses`), so it would only double the night's requests.
 */
const STILL_READ_PAGES = 10

/** Requests a check keeps in flight at once: the contract asks clients for at most 2 per key. */
const CONCURRENCY = 2

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
  return (await listNow(client, options, window, etag)).unchanged
}

/** `listUnchanged`, with the list's total when it changed. */
async function listNow(
  client: Openbook,
  options: Pick<SyncOptions, 'resource' | 'pageSize' | 'signal'>,
  window: PassWindow,
  etag: string | undefined,
): Promise<{ unchanged: boolean; total?: number }> {
  if (etag === undefined) return { unchanged: false }
  const conditional = { ifNoneMatch: etag, signal: options.signal }
  const first = { offset: 0, limit: limitOf(options) }
  const page =
    options.resource === 'customers'
      ? await client.customers.list(first, conditional)
      : await client.appointments.list({ ...windowFilters(window), ...first }, conditional)
  return page.notModified ? { unchanged: true } : { unchanged: false, total: page.pagination.total }
}

/**
 * What became of the rows of the previous complete pass that this complete pass did not see.
 *
 * A row is marked deleted on an exact check, whose one blind spot `lookAround` names, or when the
 * next pass misses it too (`secondMisses`). The paginator yields every row that stays active and
 * keeps its sort key for a whole read; a row it missed was deactivated, or its sort
 * key (createdAt, start) changed during the read. When nothing at all changed in the list while
 * the pass read it (its first page, asked again with the ETag read when the pass began, is
 * answered 304: one request), the pass read a list that stood still, and the rows it missed are
 * not in it; so did a pass that read the whole list in one request (`snapshot`: one page is one
 * statement). When the list changed meanwhile, a missing row may only have moved. Appointments
 * are then looked up in two lists that move apart from the one read (`lookAround`): settled in
 * this pass, except the residue it names. Customers, which have no filter, are read again whole
 * inside a short still window (`readStill`) when the list is short (`STILL_READ_PAGES`); when it
 * does not stand still, the rows are kept as they are (deferred) and checked again by the next
 * pass, which marks them deleted if it misses them too.
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
  snapshot = false,
): Promise<Verdicts> {
  const verdicts = await checkMissing(client, options, missing, window, passEtag, pass, snapshot)
  return secondMisses(verdicts, pass, options.resource === 'appointments' && isWindowed(window))
}

/**
 * A row that two complete passes in a row missed, and no exact check found, is marked deleted.
 * Each pass reads every row that stays active and keeps its sort key while the pass reads the
 * list; an active row is missed only when it moved across the pass's place in the list (or was
 * deactivated and active again) during that very pass. Missed by two passes in a row, it did so
 * twice, hours apart, or it is gone: under a writer that never stops, this is what settles the
 * customers and the appointments a lookup could not. A window's rows are placed by the list
 * outside the window instead (`placeOutside`): missing twice, one may have left the window, which
 * is not a deletion.
 */
function secondMisses(verdicts: Verdicts, pass: number, windowed: boolean): Verdicts {
  if (windowed) return verdicts
  const again = verdicts.deferred.filter((row) => row.deferredSince !== undefined && row.deferredSince < pass)
  if (again.length === 0) return verdicts
  return {
    ...verdicts,
    gone: [...verdicts.gone, ...again.map((row) => row.id)],
    deferred: verdicts.deferred.filter((row) => !again.includes(row)),
  }
}

const isWindowed = (window: PassWindow) => window.since !== undefined || window.until !== undefined

async function checkMissing(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  missing: readonly Missing[],
  window: PassWindow,
  passEtag: string | undefined,
  pass: number,
  snapshot: boolean,
): Promise<Verdicts> {
  const left: string[] = []
  const back: Record<string, unknown>[] = []
  let requests = 0
  const windowed = options.resource === 'appointments' && isWindowed(window)
  let rest: Missing[] = []
  for (const row of missing)
    if (windowed && row.start !== undefined && !inWindow(row.start, window)) left.push(row.id)
    else rest.push(row)
  if (rest.length === 0) return { ...NO_VERDICTS, left }
  /** The ETag of a read of the window during which the list stood still. */
  const stillEtag = passEtag
  // A pass that read the whole list in one request read one statement's snapshot of it: what it
  // did not see was not in the list, however the list changed since.
  let still = snapshot
  let passTotal: number | undefined
  if (!still) {
    requests++
    const now = await listNow(client, options, window, passEtag)
    still = now.unchanged
    passTotal = now.total
  }
  if (!still) {
    if (options.resource === 'appointments') {
      const budget = Math.max(LOOKUP_BUDGET_FLOOR, Math.ceil((passTotal ?? 0) / 99))
      let verdicts = await lookAround(client, options, rest, window, pass, budget)
      if (windowed) verdicts = await placeOutside(client, options, verdicts, window, pass, budget)
      return { ...verdicts, left: [...left, ...verdicts.left], requests: requests + verdicts.requests }
    }
    // Customers have no filter to look a row up by: the whole list again, read inside a still
    // window, when it is short and holds rows missed for the first time.
    const wanted = new Set(rest.map((row) => row.id))
    const firstMisses = rest.some((row) => row.deferredSince === undefined)
    const pages = passTotal === undefined ? Number.POSITIVE_INFINITY : Math.ceil(passTotal / 100)
    if (firstMisses && pages <= STILL_READ_PAGES) {
      const snapshot = await readStill(customersRead(client, options), 100)
      requests += snapshot.requests
      if (snapshot.rows !== undefined) {
        still = true
        for (const row of snapshot.rows)
          if (wanted.has(row.id)) back.push(row as unknown as Record<string, unknown>)
        const found = new Set(back.map((row) => String(row.id)))
        rest = rest.filter((row) => !found.has(row.id))
      }
    }
    if (!still)
      return {
        ...NO_VERDICTS,
        left,
        deferred: rest.map((row) => ({ ...row, deferredSince: row.deferredSince ?? pass })),
        requests,
      }
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
 * A window's rows that the previous pass kept and this one missed too, and no lookup found: gone,
 * or moved out of the window. The list outside the window, read once when that costs no more than
 * `budget` requests, tells which: found there, they left the window; not found, they are deleted.
 * An outside too long to read (a rolling window over years of history) leaves them waiting for a
 * pass during which the list stands still (`--max-deferred-passes`).
 */
async function placeOutside(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  verdicts: Verdicts,
  window: PassWindow,
  pass: number,
  budget: number,
): Promise<Verdicts> {
  const again = verdicts.deferred.filter((row) => row.deferredSince !== undefined && row.deferredSince < pass)
  if (again.length === 0) return verdicts
  const outside = outsideOf(window)
  let requests = verdicts.requests
  let cost = 0
  for (const part of outside) {
    const probe = await client.appointments.list({ ...part, limit: 1 }, { signal: options.signal })
    requests++
    cost += requestsToRead(probe.pagination.total, 100)
  }
  if (cost > budget) return { ...verdicts, requests }
  const wanted = new Set(again.map((row) => row.id))
  const found = new Set<string>()
  for (const part of outside) {
    const paginator = client.appointments.all(part, { pageSize: 99, signal: options.signal })
    for await (const row of paginator) if (wanted.has(row.id)) found.add(row.id)
    requests += paginator.stats.requests
  }
  return {
    ...verdicts,
    gone: [...verdicts.gone, ...again.filter((row) => !found.has(row.id)).map((row) => row.id)],
    left: [...verdicts.left, ...again.filter((row) => found.has(row.id)).map((row) => row.id)],
    deferred: verdicts.deferred.filter((row) => !again.includes(row)),
    requests,
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

/** One page of a list by offset, asked with `ifNoneMatch` when given. */
type ReadPage<T> = (offset: number, limit: number, ifNoneMatch?: string) => Promise<Page<T> | NotModified>

const customersRead =
  (client: Openbook, options: Pick<SyncOptions, 'signal'>): ReadPage<Customer> =>
  (offset, limit, ifNoneMatch) =>
    ifNoneMatch === undefined
      ? client.customers.list({ offset, limit }, { signal: options.signal })
      : client.customers.list({ offset, limit }, { ifNoneMatch, signal: options.signal })

const appointmentsRead =
  (
    client: Openbook,
    options: Pick<SyncOptions, 'signal'>,
    filters: AppointmentFilters,
  ): ReadPage<Appointment> =>
  (offset, limit, ifNoneMatch) =>
    ifNoneMatch === undefined
      ? client.appointments.list({ ...filters, offset, limit }, { signal: options.signal })
      : client.appointments.list({ ...filters, offset, limit }, { ifNoneMatch, signal: options.signal })

/**
 * The whole list `read` selects as one snapshot, or undefined when it changed while it was read.
 * One page is one statement's snapshot. Over several, the first page's ETag names the list's
 * version when the read began; the other pages are read by offset, a few at once, so the read
 * is short; then the first page asked again with that ETag answered 304 says the version did not
 * move meanwhile, so every page was of the same list. A page whose total differs ends the read at
 * once: the list moved.
 */
export async function readStill<T>(
  read: ReadPage<T>,
  limit: number,
): Promise<{ rows: T[] | undefined; requests: number }> {
  const first = await read(0, limit)
  let requests = 1
  if (first.notModified) return { rows: undefined, requests }
  const total = first.pagination.total
  if (total <= first.data.length) return { rows: first.data, requests }
  if (first.etag === undefined) return { rows: undefined, requests }
  const offsets: number[] = []
  for (let offset = limit; offset < total; offset += limit) offsets.push(offset)
  const pages = new Map<number, T[]>()
  let moved = false
  await eachLimit(offsets, CONCURRENCY, async (offset) => {
    const page = await read(offset, limit)
    requests++
    if (page.notModified || page.pagination.total !== total) moved = true
    else pages.set(offset, page.data)
    return !moved
  })
  if (moved) return { rows: undefined, requests }
  requests++
  const again = await read(0, limit, first.etag)
  if (again.notModified !== true) return { rows: undefined, requests }
  return { rows: [...first.data, ...offsets.flatMap((offset) => pages.get(offset) ?? [])], requests }
}

/** Runs `work` on each item, at most `limit` at once; a `false` from one stops the items not begun. */
async function eachLimit<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0
  let stop = false
  const worker = async () => {
    while (!stop && next < items.length) {
      const item = items[next++] as T
      if ((await work(item)) === false) stop = true
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

/**
 * Settles the appointments a pass missed while the list moved under it, by two lists that move
 * apart from the one the pass read, each read as one snapshot (`readStill`):
 *
 * - its customer's appointments (`customerId`, any start), which hold it wherever its start,
 *   status or staff member went, unless its customer changed;
 * - the appointments starting at its last known start (a range of one millisecond, which also
 *   holds starts within it that the API shows rounded), which hold it whatever its customer,
 *   status or staff member became, unless its start changed.
 *
 * Found in either, it is active (written again, or left the window). Absent from both read
 * exactly, it is deleted. A row the pass missed while active, whose customer **and** start both
 * changed since the previous pass, is absent from both too and marked deleted: v1 has no list that
 * holds it (no id lookup, no filter on what changed), short of the whole list read still, which a
 * list that moves all the time never is. A row without a customer, or one of a list not read
 * still (a customer of hundreds of appointments, moving), is kept for the next pass rather than
 * marked on one check; so are the rows beyond the lookups' `budget` of requests.
 */
async function lookAround(
  client: Openbook,
  options: Omit<SyncOptions, 'out'>,
  rows: readonly Missing[],
  window: PassWindow,
  pass: number,
  budget: number,
): Promise<Verdicts> {
  const limit = 100
  let requests = 0
  const found = new Map<string, Appointment>()
  const looked = withinBudget(rows, budget)
  const byCustomer = groupBy(looked, (row) => row.customerId)
  const customerExact = new Set<string>()
  await eachLimit([...byCustomer], CONCURRENCY, async ([customerId, group]) => {
    const snapshot = await readStill(appointmentsRead(client, options, { customerId }), limit)
    requests += snapshot.requests
    if (snapshot.rows === undefined) return
    customerExact.add(customerId)
    const ids = new Set(group.map((row) => row.id))
    for (const row of snapshot.rows) if (ids.has(row.id)) found.set(row.id, row)
  })
  const byStart = groupBy(
    looked.filter((row) => !found.has(row.id)),
    (row) => row.start,
  )
  const startExact = new Set<string>()
  await eachLimit([...byStart], CONCURRENCY, async ([start, group]) => {
    const endDate = new Date(Date.parse(start) + 1).toISOString()
    const snapshot = await readStill(appointmentsRead(client, options, { startDate: start, endDate }), limit)
    requests += snapshot.requests
    if (snapshot.rows === undefined) return
    startExact.add(start)
    const ids = new Set(group.map((row) => row.id))
    for (const row of snapshot.rows) if (ids.has(row.id)) found.set(row.id, row)
  })
  const verdicts = {
    gone: [] as string[],
    left: [] as string[],
    back: [] as Record<string, unknown>[],
    deferred: [] as Missing[],
  }
  for (const row of rows) {
    const now = found.get(row.id)
    if (now !== undefined) {
      if (inWindow(now.start, window)) verdicts.back.push(now as unknown as Record<string, unknown>)
      else verdicts.left.push(row.id)
    } else if (
      row.customerId !== undefined &&
      customerExact.has(row.customerId) &&
      row.start !== undefined &&
      startExact.has(row.start)
    )
      verdicts.gone.push(row.id)
    else verdicts.deferred.push({ ...row, deferredSince: row.deferredSince ?? pass })
  }
  return { ...verdicts, requests }
}

/**
 * The rows whose two lookups (`lookAround`: a request for each customer and each start not
 * already asked) fit in `budget` requests, the rows kept by the previous pass first: without a
 * lookup they are marked deleted now (`secondMisses`). The others are kept for the next pass.
 */
function withinBudget(rows: readonly Missing[], budget: number): Missing[] {
  const ordered = [...rows].sort(
    (a, b) => Number(a.deferredSince === undefined) - Number(b.deferredSince === undefined),
  )
  const asked = new Set<string>()
  const chosen: Missing[] = []
  for (const row of ordered) {
    const lookups = [`customer:${row.customerId}`, `start:${row.start}`].filter(
      (lookup) => !lookup.endsWith(':undefined') && !asked.has(lookup),
    )
    if (asked.size + lookups.length > budget) continue
    for (const lookup of lookups) asked.add(lookup)
    chosen.push(row)
  }
  return chosen
}

/** The rows by `key`, those without one left out. */
function groupBy<T>(rows: readonly T[], key: (row: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>()
  for (const row of rows) {
    const value = key(row)
    if (value !== undefined) groups.set(value, [...(groups.get(value) ?? []), row])
  }
  return groups
}
