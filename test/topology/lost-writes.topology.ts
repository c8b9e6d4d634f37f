import { appendFileSync, existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { freePort } from '../helpers/process.js'
import { createPrimary, createReplica, PgNode, postgresBin, query, waitForReplay } from './postgres.js'
import { RunDir } from './run-dir.js'

// A failover to a replica that had not received the last transactions, and a point-in-time
// recovery: the primary served c3 at a list's count of 3; the promoted replica (or the database
// recovered to before c3) takes c4 and reaches 3 too. A client holding the primary's tag must get
// c4 from it, not a 304. Clusters of their own (initdb, pg_basebackup, pg_promote, a WAL archive
// and recovery_target_lsn), without the rest of the loopback topology.

const ORG = 'org_failover'

interface Served {
  readonly store: Store
  readonly app: FastifyInstance
}
const page = (app: FastifyInstance, key: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: { ...bearer(key), ...headers } })

/** c3 served by `original`; then c4 written to `other`, at the same count: another tag, and the page. */
async function expectNoLie(original: Served, other: () => Promise<Served>, key: string) {
  await addCustomers(original.store, ORG, [{ id: 'cus_3', createdAt: '2025-01-03T00:00:00.000Z' }])
  const served = await page(original.app, key)
  expect(served.statusCode).toBe(200)
  const originalTag = String(served.headers.etag)
  const there = await other()
  await addCustomers(there.store, ORG, [{ id: 'cus_4', createdAt: '2025-01-04T00:00:00.000Z' }])
  const otherTag = String((await page(there.app, key)).headers.etag)
  expect(otherTag.split('-')[0]).toBe(originalTag.split('-')[0])
  expect(otherTag).not.toBe(originalTag)
  const conditional = await page(there.app, key, { 'if-none-match': originalTag })
  expect(conditional.statusCode).toBe(200)
  expect((JSON.parse(conditional.body) as { data: { id: string }[] }).data.map((c) => c.id)).toEqual([
    'cus_4',
    'cus_2',
    'cus_1',
  ])
}

/** A store and app on `node`'s openbook database, closed by `closeAll`. */
function servers() {
  const opened: { store: Store; app?: FastifyInstance }[] = []
  return {
    opened,
    async serve(node: PgNode): Promise<Served> {
      const store = createPostgresStore({ connectionString: node.url('openbook'), maxConnections: 2 })
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      opened.push({ store, app })
      return { store, app }
    },
    async closeAll() {
      for (const { store, app } of opened.splice(0)) {
        await app?.close()
        await store.close()
      }
    },
  }
}

/** A migrated openbook database on `primary` with c1 and c2; resolves to the key. */
async function seed(primary: PgNode, opened: { store: Store }[]): Promise<string> {
  await query(primary.url(), 'CREATE DATABASE openbook')
  const store = createPostgresStore({ connectionString: primary.url('openbook'), maxConnections: 2 })
  opened.push({ store })
  await migrate(store)
  const org = await createOrg(store, ORG)
  const key = (await createKey(store, org)).key
  await addCustomers(store, ORG, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
  await addCustomers(store, ORG, [{ id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' }])
  return key
}

describe('list versions across a failover that lost transactions', () => {
  let run: RunDir | undefined
  let primary: PgNode
  let replica: PgNode
  let key: string
  const { opened, serve, closeAll } = servers()

  beforeAll(async () => {
    run = new RunDir()
    primary = await createPrimary(run, await freePort())
    key = await seed(primary, opened)
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
    await expectNoLie(
      await serve(primary),
      async () => {
        await closeAll()
        await primary.stop()
        await replica.start()
        await query(replica.url(), 'SELECT pg_promote(true, 30)')
        return serve(replica)
      },
      key,
    )
  })
})

describe('list versions across a point-in-time recovery', () => {
  let run: RunDir | undefined
  let primary: PgNode
  let key: string
  let archive: string
  let base: string
  let target: string
  const { opened, serve, closeAll } = servers()

  beforeAll(async () => {
    run = new RunDir()
    primary = await createPrimary(run, await freePort())
    archive = run.serviceDir('archive')
    appendFileSync(
      join(primary.dir, 'postgresql.conf'),
      `archive_mode = on\narchive_command = 'cp %p ${archive}/%f'\n`,
    )
    await primary.stop()
    await primary.start()
    key = await seed(primary, opened)
    await closeAll()
    base = run.serviceDir('recovered')
    await run.run(
      'pg_basebackup',
      `${postgresBin()}/pg_basebackup`,
      [
        '-h',
        '127.0.0.1',
        '-p',
        String(primary.port),
        '-U',
        'postgres',
        '-D',
        base,
        '-X',
        'stream',
        '-c',
        'fast',
      ],
      { asService: true },
    )
    // The recovery point: after c2, before c3.
    const [row] = await query<{ lsn: string }>(primary.url(), 'SELECT pg_current_wal_lsn()::text AS lsn')
    target = String(row?.lsn)
  })

  afterAll(async () => {
    await closeAll()
    await run?.close()
  })

  it('the database recovered to before c3 gives the same count of changes another tag, and no 304 for its content', async () => {
    await expectNoLie(
      await serve(primary),
      async () => {
        await closeAll()
        // c3's WAL into the archive, as it would be by the time anyone recovers.
        const [segment] = await query<{ file: string }>(
          primary.url(),
          'SELECT pg_walfile_name(pg_switch_wal()) AS file',
        )
        const archived = join(archive, String(segment?.file))
        for (let waited = 0; !existsSync(archived); waited += 50) {
          if (waited > 30_000) throw new Error(`${archived} was not archived`)
          await sleep(50)
        }
        await primary.stop()
        writeFileSync(join(base, 'recovery.signal'), '')
        const port = await freePort()
        appendFileSync(
          join(base, 'postgresql.conf'),
          [
            `port = ${port}`,
            `archive_mode = off`,
            `restore_command = 'cp ${archive}/%f %p'`,
            `recovery_target_lsn = '${target}'`,
            `recovery_target_action = 'promote'`,
            '',
          ].join('\n'),
        )
        const recovered = new PgNode(run as RunDir, 'recovered', base, port)
        await recovered.start()
        for (let waited = 0; ; waited += 100) {
          const [state] = await query<{ recovering: boolean }>(
            recovered.url(),
            'SELECT pg_is_in_recovery() AS recovering',
          )
          if (!state?.recovering) break
          if (waited > 30_000) throw new Error('the recovery did not end')
          await sleep(100)
        }
        return serve(recovered)
      },
      key,
    )
  })
})
