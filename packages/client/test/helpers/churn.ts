import fc from 'fast-check'
import type { TestServer } from './server.js'

/**
 * A small world for the pagination property: rows of one resource in one organization, with
 * sort keys from a small pool (ties, also within one millisecond, which the API does not show),
 * and a schedule of changes (deactivate, reactivate, insert) applied through `openbook import`
 * between page requests.
 */
export type Resource = 'customer' | 'appointment'

/** Sort keys: six days, each at a whole millisecond and half a millisecond later. */
export const KEY_POOL: readonly string[] = [1, 2, 3, 4, 5, 6].flatMap((day) => [
  `2030-01-0${day}T09:00:00.000Z`,
  `2030-01-0${day}T09:00:00.000500Z`,
])

export interface Op {
  readonly kind: 'deactivate' | 'reactivate' | 'insert'
  readonly target: number
  readonly key: number
}
export interface Step {
  /** Applied after this many requests, before the next. */
  readonly after: number
  readonly ops: readonly Op[]
}
export interface Scenario {
  readonly initial: readonly { key: number; active: boolean }[]
  readonly steps: readonly Step[]
  readonly pageSize: number
}

const op: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom('deactivate', 'deactivate', 'deactivate', 'reactivate', 'insert'),
  target: fc.nat(),
  key: fc.nat({ max: KEY_POOL.length - 1 }),
})

export const scenario: fc.Arbitrary<Scenario> = fc.record({
  initial: fc.array(
    fc.record({
      key: fc.nat({ max: KEY_POOL.length - 1 }),
      active: fc.boolean().map((b) => b || Math.random() > 0.2),
    }),
    { minLength: 4, maxLength: 22 },
  ),
  steps: fc.array(
    fc.record({ after: fc.integer({ min: 1, max: 7 }), ops: fc.array(op, { minLength: 1, maxLength: 6 }) }),
    {
      minLength: 1,
      maxLength: 3,
    },
  ),
  pageSize: fc.integer({ min: 2, max: 4 }),
})

interface Row {
  id: string
  key: string
  active: boolean
}

export const ORG = 'org_churn'
export const OWNER = 'owner@churn.test'

/** The organization and its owner, and a key for it. */
export async function setUpOrganization(server: TestServer): Promise<string> {
  await server.importLines([
    { type: 'organization', id: ORG, name: 'Churn', plan: 'enterprise' },
    { type: 'user', id: 'usr_churn', email: OWNER },
    { type: 'membership', orgId: ORG, userId: 'usr_churn', role: 'owner' },
  ])
  const out = await server.cli(['keys', 'create', '--org', ORG, '--as', OWNER, '--env', 'test', '--json'])
  return (JSON.parse(out) as { key: string }).key
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

let runs = 0
/** Ids from earlier runs, deactivated when the next run starts. */
const leftovers: Record<Resource, string[]> = { customer: [], appointment: [] }

/**
 * One run of a scenario: loads its rows (and deactivates the previous run's), then gives the
 * iteration a fetch that applies each step's changes before the request that follows it.
 * Resolves to the ids the rows that stayed active for the whole iteration, in the server's
 * final order, for comparison with what was yielded.
 */
export async function runScenario(
  server: TestServer,
  resource: Resource,
  { initial, steps }: Scenario,
  iterate: (fetchImpl: typeof fetch) => Promise<string[]>,
  finalOrder: () => Promise<string[]>,
): Promise<{ yielded: string[]; expected: string[] }> {
  const run = ++runs
  // Mixed-case ids in no relation to their keys: order within a key is the server's to decide.
  const idOf = (n: number) => `r${run}_${'aBcD'[n % 4]}${(n * 7919) % 997}`
  const rows: Row[] = initial.map((row, n) => ({
    id: idOf(n),
    key: KEY_POOL[row.key] ?? '',
    active: row.active,
  }))
  const stale = leftovers[resource].map((id) => ({ id, key: KEY_POOL[0] ?? '', active: false }))
  await server.importLines([...stale, ...rows].map((row) => line(resource, row)))
  leftovers[resource] = rows.map((row) => row.id)
  const touched = new Set<string>(rows.filter((row) => !row.active).map((row) => row.id))
  const pending = [...steps]
  let requests = 0
  const fetchImpl = (async (input: URL | RequestInfo, init?: RequestInit) => {
    for (const step of pending.filter((s) => s.after === requests)) {
      pending.splice(pending.indexOf(step), 1)
      const changed: Row[] = []
      for (const change of step.ops) {
        if (change.kind === 'insert') {
          const row = { id: idOf(rows.length), key: KEY_POOL[change.key] ?? '', active: true }
          rows.push(row)
          leftovers[resource].push(row.id)
          touched.add(row.id)
          changed.push(row)
        } else {
          const row = rows[change.target % rows.length]
          if (!row) continue
          row.active = change.kind === 'reactivate'
          touched.add(row.id)
          changed.push({ ...row })
        }
      }
      await server.importLines(changed.map((row) => line(resource, row)))
    }
    requests++
    return fetch(input, init)
  }) as typeof fetch
  const yielded = await iterate(fetchImpl)
  const stayed = new Set(rows.filter((row) => !touched.has(row.id)).map((row) => row.id))
  const expected = (await finalOrder()).filter((id) => stayed.has(id))
  return { yielded, expected }
}

/** The guarantee: no row twice; every row that stayed active exactly once, in the list's order. */
export function holds({ yielded, expected }: { yielded: string[]; expected: string[] }): boolean {
  if (new Set(yielded).size !== yielded.length) return false
  const stayed = new Set(expected)
  const inOrder = yielded.filter((id) => stayed.has(id))
  return inOrder.length === expected.length && inOrder.every((id, n) => id === expected[n])
}
