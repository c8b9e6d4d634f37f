import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import {
  concurrentScenario,
  controlledScenario,
  holds,
  type Iterate,
  KEY_POOL,
  type Outcome,
  type Resource,
  runConcurrent,
  runControlled,
  setUpOrganization,
} from './helpers/churn.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'

/**
 * The no-missed-row guarantee against a real server (`node dist/server.js`) on real PostgreSQL,
 * while a writer inserts, deactivates and reactivates rows with the real `openbook import`.
 * fast-check draws the rows, the writer's imports and the pacing; PROPERTY_RUNS sets the number
 * of concurrent runs (and FC_SEED replays one). A naive offset loop fails the same property.
 */
const RUNS = Number(process.env.PROPERTY_RUNS ?? 10)
const SEED = process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}

let database: TestDatabase
let server: ServerProcess
let key: string

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_pages')
  server = await startPostgresServer(database.url)
  key = await setUpOrganization(server)
}, patience(120_000))

afterAll(async () => {
  await server?.stop()
  await database?.drop()
})

/** Appointments are read in a window that leaves the earliest key out, to show filters hold too. */
const WINDOW = { startDate: KEY_POOL[1] ?? '' }

function client(fetchImpl?: typeof fetch): Openbook {
  return new Openbook({ apiKey: key, baseUrl: server.baseUrl, ...(fetchImpl ? { fetch: fetchImpl } : {}) })
}

/** The first `count` ids of the list as it is now (`count` at most 100). */
async function firstIds(resource: Resource, count: number): Promise<string[]> {
  const page =
    resource === 'customer'
      ? await client().customers.list({ limit: count })
      : await client().appointments.list({ ...WINDOW, limit: count })
  return page.data.map((row) => row.id)
}

async function finalOrder(resource: Resource): Promise<string[]> {
  const ids = await firstIds(resource, 100)
  expect(ids.length).toBeLessThan(100)
  return ids
}

/** Over the runs of a case: re-reads, imports that landed while pages were read, the last outcome. */
const stats: { rereads: number; writesDuring: number; last?: Outcome } = { rereads: 0, writesDuring: 0 }

/** The client's auto-pagination. */
const autoPaginate =
  (resource: Resource): Iterate =>
  async (fetchImpl, pageSize) => {
    const openbook = client(fetchImpl)
    const rows =
      resource === 'customer'
        ? openbook.customers.all({ pageSize })
        : openbook.appointments.all(WINDOW, { pageSize })
    const ids: string[] = []
    for await (const row of rows) ids.push(row.id)
    stats.rereads += rows.stats.rereads
    return ids
  }

/** What integrators write by hand: offset += limit until hasMore is false. */
const naiveLoop =
  (resource: Resource): Iterate =>
  async (fetchImpl, pageSize) => {
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

function check(outcome: Outcome): boolean {
  stats.writesDuring += outcome.writesDuring
  stats.last = outcome
  return holds(outcome)
}

const concurrently = (resource: Resource, read: (resource: Resource) => Iterate) =>
  fc.asyncProperty(concurrentScenario, async (scenario) =>
    check(await runConcurrent(server, resource, scenario, read(resource), () => finalOrder(resource))),
  )

const betweenPages = (resource: Resource, read: (resource: Resource) => Iterate) =>
  fc.asyncProperty(controlledScenario, async (scenario) =>
    check(
      await runControlled(
        server,
        resource,
        scenario,
        read(resource),
        (count) => firstIds(resource, count),
        () => finalOrder(resource),
      ),
    ),
  )

describe.skipIf(!hasPostgres)(
  'auto-pagination never misses a row (server on PostgreSQL, openbook import)',
  () => {
    it(
      'customers.all() while imports run concurrently: every row active throughout, once, in order',
      async () => {
        Object.assign(stats, { rereads: 0, writesDuring: 0 })
        await fc.assert(concurrently('customer', autoPaginate), {
          numRuns: RUNS,
          endOnFailure: true,
          ...SEED,
        })
        // The imports did land while pages were read.
        expect(stats.writesDuring).toBeGreaterThan(0)
      },
      patience(300_000),
    )

    it(
      'appointments.all({ startDate }) the same, within a window',
      async () => {
        Object.assign(stats, { rereads: 0, writesDuring: 0 })
        await fc.assert(concurrently('appointment', autoPaginate), {
          numRuns: Math.ceil(RUNS / 2),
          endOnFailure: true,
          ...SEED,
        })
        expect(stats.writesDuring).toBeGreaterThan(0)
      },
      patience(300_000),
    )

    it(
      'customers.all() when rows it has passed are deactivated between two pages: re-reads, misses nothing',
      async () => {
        Object.assign(stats, { rereads: 0, writesDuring: 0 })
        await fc.assert(betweenPages('customer', autoPaginate), { numRuns: 4, endOnFailure: true, ...SEED })
        // Each run made it step back at least once.
        expect(stats.rereads).toBeGreaterThanOrEqual(4)
      },
      patience(300_000),
    )

    it(
      'a naive offset loop misses rows under the same writer',
      async () => {
        const result = await fc.check(betweenPages('customer', naiveLoop), {
          numRuns: 4,
          endOnFailure: true,
          ...SEED,
        })
        // Every such run skips the rows that moved in front of its offset: the first one fails, by a miss.
        expect(result.failed).toBe(true)
        expect(result.numRuns).toBe(1)
        const missed = stats.last?.expected.filter((id) => !stats.last?.yielded.includes(id))
        expect(missed?.length).toBeGreaterThan(0)
      },
      patience(300_000),
    )
  },
)
