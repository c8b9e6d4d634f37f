import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { freePort } from '../helpers/process.js'
import { createPrimary, createReplica, type PgNode, query, waitForReplay } from './postgres.js'
import { RunDir } from './run-dir.js'

// A failover to a replica that had not received the last transactions: the primary served c3 at
// a list's count of 3; the promoted replica, which stopped at c2, takes c4 and reaches 3 too. A
// client holding the primary's tag must get c4 from it, not a 304. A cluster of its own (initdb,
// pg_basebackup -R, pg_promote), without the rest of the loopback topology.

const ORG = 'org_failover'

describe('list versions across a failover that lost transactions', () => {
  let run: RunDir | undefined
  let primary: PgNode
  let replica: PgNode
  let key: string
  const opened: { store: Store; app?: FastifyInstance }[] = []

  async function serve(node: PgNode) {
    const store = createPostgresStore({ connectionString: node.url('openbook'), maxConnections: 2 })
    const { app } = await buildTestApp(store, { logLevel: 'silent' })
    opened.push({ store, app })
    return { store, app }
  }
  async function closeAll() {
    for (const { store, app } of opened.splice(0)) {
      await app?.close()
      await store.close()
    }
  }
  const page = (app: FastifyInstance, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: { ...bearer(key), ...headers } })

  beforeAll(async () => {
    run = new RunDir()
    primary = await createPrimary(run, await freePort())
    await query(primary.url(), 'CREATE DATABASE openbook')
    const store = createPostgresStore({ connectionString: primary.url('openbook'), maxConnections: 2 })
    opened.push({ store })
    await migrate(store)
    const org = await createOrg(store, ORG)
    key = (await createKey(store, org)).key
    await addCustomers(store, ORG, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
    await addCustomers(store, ORG, [{ id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' }])
    await closeAll()
    replica = await createReplica(run, primary, await freePort())
    await waitForReplay(primary, replica)
    // From here the replica receives nothing: what the primary writes next is lost in the failover.
    await replica.stop()
  })

  afterAll(async () => {
    await closeAll()
    await run?.close()
  })

  it('the promoted replica gives the same count of changes another tag, and no 304 for its content', async () => {
    const atPrimary = await serve(primary)
    await addCustomers(atPrimary.store, ORG, [{ id: 'cus_3', createdAt: '2025-01-03T00:00:00.000Z' }])
    const served = await page(atPrimary.app)
    expect(served.statusCode).toBe(200)
    const primaryTag = String(served.headers.etag)
    await closeAll()
    await primary.stop()

    await replica.start()
    await query(replica.url(), 'SELECT pg_promote(true, 30)')
    const promoted = await serve(replica)
    await addCustomers(promoted.store, ORG, [{ id: 'cus_4', createdAt: '2025-01-04T00:00:00.000Z' }])
    const now = await page(promoted.app)
    const promotedTag = String(now.headers.etag)
    expect(promotedTag.split('-')[0]).toBe(primaryTag.split('-')[0])
    expect(promotedTag).not.toBe(primaryTag)
    const conditional = await page(promoted.app, { 'if-none-match': primaryTag })
    expect(conditional.statusCode).toBe(200)
    expect((JSON.parse(conditional.body) as { data: { id: string }[] }).data.map((c) => c.id)).toEqual([
      'cus_4',
      'cus_2',
      'cus_1',
    ])
  })
})
