import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import {
  holds,
  KEY_POOL,
  type Resource,
  runScenario,
  type Scenario,
  scenario,
  setUpOrganization,
} from './helpers/churn.js'
import { startServer, type TestServer } from './helpers/server.js'

/**
 * Auto-pagination against a real server on its embedded store, while `openbook import` inserts,
 * deactivates and reactivates rows between page requests. PROPERTY_RUNS sets the number of runs.
 */
const RUNS = Number(process.env.PROPERTY_RUNS ?? 20)

let server: TestServer
let key: string

beforeAll(async () => {
  server = await startServer()
  key = await setUpOrganization(server)
}, 180_000)

afterAll(async () => {
  await server?.stop()
})

/** Appointments are read in a window that leaves the earliest key out, to show filters hold too. */
const WINDOW = { startDate: KEY_POOL[1] ?? '' }

function client(fetchImpl?: typeof fetch): Openbook {
  return new Openbook({ apiKey: key, baseUrl: server.baseUrl, ...(fetchImpl ? { fetch: fetchImpl } : {}) })
}

async function finalOrder(resource: Resource): Promise<string[]> {
  const openbook = client()
  const page =
    resource === 'customer'
      ? await openbook.customers.list({ limit: 100 })
      : await openbook.appointments.list({ ...WINDOW, limit: 100 })
  expect(page.pagination.hasMore).toBe(false)
  return page.data.map((row) => row.id)
}

/** The client's auto-pagination. */
async function autoPaginate(
  resource: Resource,
  fetchImpl: typeof fetch,
  pageSize: number,
): Promise<string[]> {
  const openbook = client(fetchImpl)
  const rows =
    resource === 'customer'
      ? openbook.customers.all({ pageSize })
      : openbook.appointments.all(WINDOW, { pageSize })
  const ids: string[] = []
  for await (const row of rows) ids.push(row.id)
  rereads[resource] += rows.stats.rereads
  return ids
}

/** Re-reads over all runs: the property must have made the iterator step back, or it proved little. */
const rereads: Record<Resource, number> = { customer: 0, appointment: 0 }

/** What integrators write by hand: offset += limit until hasMore is false. */
async function naiveLoop(resource: Resource, fetchImpl: typeof fetch, pageSize: number): Promise<string[]> {
  const openbook = client(fetchImpl)
  const ids: string[] = []
  for (let offset = 0; ; offset += pageSize) {
    const page =
      resource === 'customer'
        ? await openbook.customers.list({ offset, limit: pageSize })
        : await openbook.appointments.list({ ...WINDOW, offset, limit: pageSize })
    ids.push(...page.data.map((row) => row.id))
    if (!page.pagination.hasMore) return ids
  }
}

type Reader = (resource: Resource, fetchImpl: typeof fetch, pageSize: number) => Promise<string[]>

const property = (resource: Resource, read: Reader) =>
  fc.asyncProperty(scenario, async (world: Scenario) => {
    const outcome = await runScenario(
      server,
      resource,
      world,
      (fetchImpl) => read(resource, fetchImpl, world.pageSize),
      () => finalOrder(resource),
    )
    return holds(outcome)
  })

describe('auto-pagination never misses a row', () => {
  it('customers.all(): every row active throughout, exactly once, in order', async () => {
    await fc.assert(property('customer', autoPaginate), { numRuns: RUNS, endOnFailure: true })
    expect(rereads.customer).toBeGreaterThan(0)
  }, 600_000)

  it('appointments.all({ startDate }): the same within a window', async () => {
    await fc.assert(property('appointment', autoPaginate), {
      numRuns: Math.ceil(RUNS / 2),
      endOnFailure: true,
    })
  }, 600_000)

  it('a naive offset loop fails the same property', async () => {
    const result = await fc.check(property('customer', naiveLoop), { numRuns: 60, endOnFailure: true })
    expect(result.failed).toBe(true)
  }, 600_000)
})
