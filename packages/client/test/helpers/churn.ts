import fc from 'fast-check'
import type { ServerProcess } from './server.js'

/**
 * Small worlds for the pagination property: rows of one resource in one organization, with sort
 * keys from a small pool (ties, also within one millisecond, which the API does not show), and a
 * writer that changes them through `openbook import` while a reader pages through the list.
 */
export type Resource = 'customer' | 'appointment'

/** Sort keys: six days, each at a whole millisecond and half a millisecond later. */
export const KEY_POOL: readonly string[] = [1, 2, 3, 4, 5, 6].flatMap((day) => [
  `2030-01-0${day}T09:00:00.000Z`,
  `2030-01-0${day}T09:00:00.000500Z`,
])

export const ORG = 'org_churn'
export const OWNER = 'owner@churn.test'

/** The organization, its owner and a test key for it, made with the CLI. */
export async function setUpOrganization(server: ServerProcess): Promise<string> {
  await server.importLines([
    { type: 'organization', id: ORG, name: 'Churn', plan: 'enterprise' },
    { type: 'user', id: 'usr_churn', email: OWNER },
    { type: 'membership', orgId: ORG, userId: 'usr_churn', role: 'owner' },
  ])
  const out = await server.cli(['keys', 'create', '--org', ORG, '--as', OWNER, '--env', 'test', '--json'])
  return (JSON.parse(out) as { key: string }).key
}

interface Row {
  id: string
  key: string
  active: boolean
}

function line(resource: Resource, row: Row): object {
  const stamp = '2029-12-01T00:00:00.000Z'
  return resource === 'customer'
    ? { type: 'customer', id: row.id, orgId: ORG, isActive: row.active, createdAt: row.key, updatedAt: stamp }
    : {
        type: 'appointment',
        id: row.id,
        orgId: ORG,
        start: row.key,
        end: row.key,
        status: 'confirmed',
        isActive: row.active,
        createdAt: stamp,
        updatedAt: stamp,
      }
}

export interface Op {
  readonly kind: 'deactivate' | 'reactivate' | 'insert'
  /** The row changed (modulo the rows there are). */
  readonly target: number
  /** An inserted row's sort key. */
  readonly key: number
}

/** A writer's import: after `delayMs`, these changes in one `openbook import`. */
export interface Write {
  readonly delayMs: number
  readonly ops: readonly Op[]
}

/** A reader paging while a writer imports, neither waiting for the other. */
export interface ConcurrentScenario {
  readonly initial: readonly { key: number; active: boolean }[]
  readonly writes: readonly Write[]
  readonly pageSize: number
  /**
   * How long the reader takes, in percent of the writer's time: each request waits so that the
   * iteration lasts about that long (below 100 it tends to end before the last import).
   */
  readonly pacePercent: number
}

/** A reader that reads `pages` pages, then a writer that deactivates rows it has read, then the rest. */
export interface ControlledScenario {
  readonly rows: number
  readonly keys: readonly number[]
  readonly pageSize: number
  /** Pages read before the writer runs. */
  readonly pages: number
  /** Which of the rows read so far the writer deactivates (indexes modulo their number). */
  readonly deactivate: readonly number[]
}

const keyIndex = fc.nat({ max: KEY_POOL.length - 1 })

const op: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom('deactivate', 'deactivate', 'deactivate', 'reactivate', 'insert'),
  target: fc.nat(),
  key: keyIndex,
})

export const concurrentScenario: fc.Arbitrary<ConcurrentScenario> = fc.record({
  initial: fc.array(fc.record({ key: keyIndex, active: fc.nat({ max: 4 }).map((n) => n > 0) }), {
    minLength: 16,
    maxLength: 36,
  }),
  writes: fc.array(
    fc.record({
      delayMs: fc.integer({ min: 0, max: 300 }),
      ops: fc.array(op, { minLength: 1, maxLength: 6 }),
    }),
    { minLength: 1, maxLength: 3 },
  ),
  pageSize: fc.integer({ min: 2, max: 4 }),
  pacePercent: fc.integer({ min: 60, max: 160 }),
})

export const controlledScenario: fc.Arbitrary<ControlledScenario> = fc
  .record({
    rows: fc.integer({ min: 16, max: 30 }),
    keys: fc.array(keyIndex, { minLength: 30, maxLength: 30 }),
    pageSize: fc.integer({ min: 2, max: 4 }),
    pages: fc.integer({ min: 1, max: 3 }),
    deactivate: fc.uniqueArray(fc.nat({ max: 11 }), { minLength: 1, maxLength: 3 }),
  })
  // The rows read before the writer runs, and at least one more after them.
  .filter(({ rows, pageSize, pages }) => rows > pageSize * pages + 1)

export interface Outcome {
  /** The ids the reader yielded, in order. */
  readonly yielded: readonly string[]
  /** The rows active for the whole iteration, in the list's final order. */
  readonly expected: readonly string[]
  /** Imports that committed while the reader was iterating. */
  readonly writesDuring: number
}

/** Reads the list (ids in order) with this fetch: the client's auto-pagination, or a naive loop. */
export type Iterate = (fetchImpl: typeof fetch, pageSize: number) => Promise<string[]>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The rows of one run. Ids are unique to the run, mixed-case and in no relation to their keys
 * (order within a key is the server's to decide). Rows of the previous run are deactivated
 * together with this run's first import, so each run sees only its own.
 */
class World {
  static #runs = 0
  static readonly #leftovers: Record<Resource, string[]> = { customer: [], appointment: [] }
  readonly rows: Row[] = []
  /** Rows that were inactive, or changed, at some moment of the run: outside the guarantee. */
  readonly touched = new Set<string>()
  readonly #run = ++World.#runs

  constructor(
    readonly server: ServerProcess,
    readonly resource: Resource,
  ) {}

  add(key: string, active: boolean): Row {
    const n = this.rows.length
    const row = { id: `r${this.#run}_${'aBcD'[n % 4]}${(n * 7919) % 997}`, key, active }
    this.rows.push(row)
    World.#leftovers[this.resource].push(row.id)
    if (!active) this.touched.add(row.id)
    return row
  }

  /** Imports the rows as they are now (and deactivates the previous run's). */
  async load(): Promise<void> {
    const stale = World.#leftovers[this.resource]
      .filter((id) => !this.rows.some((row) => row.id === id))
      .map((id) => ({ id, key: KEY_POOL[0] ?? '', active: false }))
    World.#leftovers[this.resource] = this.rows.map((row) => row.id)
    await this.import([...stale, ...this.rows])
  }

  /** Applies `ops` to the model and returns the rows they changed, for one import. */
  change(ops: readonly Op[]): Row[] {
    const changed: Row[] = []
    for (const { kind, target, key } of ops) {
      let row: Row | undefined
      if (kind === 'insert') row = this.add(KEY_POOL[key] ?? '', true)
      else {
        row = this.rows[target % this.rows.length]
        if (!row) continue
        row.active = kind === 'reactivate'
      }
      this.touched.add(row.id)
      changed.push({ ...row })
    }
    return changed
  }

  /** Imports these rows, by default with a new `openbook import`. */
  import(
    rows: readonly Row[],
    send: (lines: readonly object[]) => Promise<string> = (lines) => this.server.importLines(lines),
  ): Promise<string> {
    return send(rows.map((row) => line(this.resource, row)))
  }

  /** What the reader must have yielded: the untouched rows in the server's final order. */
  expected(finalOrder: readonly string[]): string[] {
    return finalOrder.filter((id) => this.rows.some((row) => row.id === id) && !this.touched.has(id))
  }
}

/**
 * A concurrent run: loads the scenario's rows, then starts the reader (its requests paced by
 * `pacePercent`) and the writer (its imports one after another, each after its delay) at once,
 * and waits for both.
 */
export async function runConcurrent(
  server: ServerProcess,
  resource: Resource,
  scenario: ConcurrentScenario,
  iterate: Iterate,
  finalOrder: () => Promise<string[]>,
): Promise<Outcome> {
  // The writer's processes start first, and are ready by the time the reader starts.
  const imports = scenario.writes.map(() => server.importLater())
  const world = new World(server, resource)
  for (const row of scenario.initial) world.add(KEY_POOL[row.key] ?? '', row.active)
  try {
    await world.load()
  } catch (error) {
    for (const send of imports) send([]).catch(() => {})
    throw error
  }
  // Every change is decided before the run, so that `touched` is known whatever the timing.
  const batches = scenario.writes.map((write, n) => ({
    delayMs: write.delayMs,
    rows: world.change(write.ops),
    send: imports[n] ?? server.importLater(),
  }))
  let iterating = true
  let writesDuring = 0
  let failure: { error: unknown } | undefined
  const writer = (async () => {
    for (const [n, batch] of batches.entries()) {
      try {
        await sleep(batch.delayMs)
        await world.import(batch.rows, batch.send)
        if (iterating) writesDuring++
      } catch (error) {
        // The imports not sent yet are ended empty, so that no process is left waiting.
        for (const rest of batches.slice(n + 1)) rest.send([]).catch(() => {})
        failure = { error }
        return
      }
    }
  })()
  // The writer's time: its delays, and about 400 ms for each import to commit once sent.
  const writerMs = batches.reduce((sum, batch) => sum + batch.delayMs + 400, 0)
  const requests = scenario.initial.filter((row) => row.active).length / scenario.pageSize + 1
  const requestDelayMs = (writerMs * scenario.pacePercent) / 100 / requests
  const slowFetch = (async (input: URL | RequestInfo, init?: RequestInit) => {
    await sleep(requestDelayMs)
    return fetch(input, init)
  }) as typeof fetch
  let yielded: string[]
  try {
    yielded = await iterate(slowFetch, scenario.pageSize)
  } finally {
    iterating = false
    await writer
  }
  if (failure) throw failure.error
  return { yielded, expected: world.expected(await finalOrder()), writesDuring }
}

/**
 * A controlled run: the writer runs between two pages, after `pages` pages, and deactivates
 * rows the reader has already passed (found by asking the server for the list's first rows), so
 * every later row moves toward the front: a plain offset loop skips as many rows.
 */
export async function runControlled(
  server: ServerProcess,
  resource: Resource,
  scenario: ControlledScenario,
  iterate: Iterate,
  firstIds: (count: number) => Promise<string[]>,
  finalOrder: () => Promise<string[]>,
): Promise<Outcome> {
  const world = new World(server, resource)
  for (const key of scenario.keys.slice(0, scenario.rows)) world.add(KEY_POOL[key] ?? '', true)
  await world.load()
  let requests = 0
  let writesDuring = 0
  const fetchImpl = (async (input: URL | RequestInfo, init?: RequestInit) => {
    if (requests++ === scenario.pages) {
      const passed = await firstIds(scenario.pages * scenario.pageSize)
      const gone = new Set(scenario.deactivate.map((n) => passed[n % passed.length]))
      const rows = world.rows.filter((row) => gone.has(row.id))
      await world.import(
        world.change(rows.map((row) => ({ kind: 'deactivate', target: world.rows.indexOf(row), key: 0 }))),
      )
      writesDuring++
    }
    return fetch(input, init)
  }) as typeof fetch
  const yielded = await iterate(fetchImpl, scenario.pageSize)
  return { yielded, expected: world.expected(await finalOrder()), writesDuring }
}

/** The guarantee: no row twice; every row that stayed active exactly once, in the list's order. */
export function holds({ yielded, expected }: Outcome): boolean {
  if (new Set(yielded).size !== yielded.length) return false
  const stayed = new Set(expected)
  const inOrder = yielded.filter((id) => stayed.has(id))
  return inOrder.length === expected.length && inOrder.every((id, n) => id === expected[n])
}
