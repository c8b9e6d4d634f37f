import { Worker } from 'node:worker_threads'
import { expect, it } from 'vitest'
import { hashSecret } from '../../src/domain/api-key-secret.js'
import { revokeApiKey } from '../../src/domain/api-keys.js'
import { authenticateKey } from '../../src/queries/api-keys.js'
import { GIVEN_UP } from '../../src/store/embedded/embedded-protocol.js'
import { KEY_ORGANIZATION, type Sql } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

interface Posted {
  readonly id: number
  readonly op: string
  readonly ends?: boolean
  /** The sizes of the answers' memory handed back with the message. */
  readonly spare: readonly number[]
}

/** What went to the database thread and what came back, in order, until `stop`. */
function watchThread() {
  const events: { posted?: Posted; answered?: number; error?: string }[] = []
  const post = Worker.prototype.postMessage
  const emit = Worker.prototype.emit
  Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: readonly never[]) {
    const { id, request, spare } = message as {
      id: number
      request: { op: string; ends?: boolean }
      spare?: ArrayBuffer[]
    }
    const sizes = (spare ?? []).map((memory) => memory.byteLength)
    events.push({ posted: { id, op: request.op, ends: request.ends, spare: sizes } })
    return post.call(this, message, transfer)
  }
  Worker.prototype.emit = function (this: Worker, name: string | symbol, ...args: unknown[]) {
    if (name === 'message') {
      const { id, error } = args[0] as { id: number; error?: { name: string } }
      events.push({ answered: id, ...(error ? { error: error.name } : {}) })
    }
    return emit.call(this, name, ...args)
  }
  return {
    events,
    stop() {
      Worker.prototype.postMessage = post
      Worker.prototype.emit = emit
    },
  }
}

/**
 * A statement that names the key's organization, as the page does, after `seconds` of sleep: on
 * the request path it ends its transaction (store/embedded/embedded.ts `sqlOf`).
 */
const pageLike = (sql: Sql, n: number, seconds = 0) =>
  sql.query<{ n: number; org: string }>('SELECT $1::int AS n, $3::text AS org FROM pg_sleep($2::float8)', [
    n,
    seconds,
    KEY_ORGANIZATION,
  ])

/**
 * The embedded store's request path in one trip to its database thread: the key lookup and the
 * page are sent together, the page before the lookup's answer is back, and the thread binds the
 * organization the lookup named (store/embedded/embedded.ts `sqlOf`, embedded-worker.ts
 * `withKeyOrganization`). Waiting for the lookup left the thread idle while the main thread
 * answered it and sent the page.
 */
describeEachStore(
  'the request path in one trip (embedded)',
  (testStore) => {
    it('binds the organization the key lookup named, and none for a key that is not active', async () => {
      const { store } = testStore
      const org = await createOrg(store, 'org_trip')
      const { key } = await createKey(store, org)
      const revoked = await createKey(store, org)
      await store.admin((sql) => revokeApiKey(sql, revoked.id))
      const organizationFor = (secret: string) =>
        store.read(async (sql) => {
          if (!sql.sendWithNext) throw new Error('the request path sends a statement with the next')
          const lookup = authenticateKey(sql, hashSecret(secret), { withNext: true })
          const [row] = await sql.query<{ org: string }>('SELECT $1::text AS org', [KEY_ORGANIZATION])
          return { org: row?.org, key: await lookup }
        })
      expect(await organizationFor(key)).toMatchObject({ org: 'org_trip', key: { orgId: 'org_trip' } })
      expect(await organizationFor(revoked.key)).toEqual({ org: '', key: 'revoked' })
      expect(await organizationFor(`svc_test_${'0'.repeat(64)}`)).toEqual({ org: '', key: 'unknown' })
    })

    it('sends the page before the key lookup is answered, and answers the page of the key’s organization', async () => {
      const { store } = testStore
      const org = await createOrg(store, 'org_trip_page')
      await addCustomers(store, org.id, [{ id: 'cus_trip', createdAt: '2025-01-01T00:00:00.000Z' }])
      const { key } = await createKey(store, org)
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      const thread = watchThread()
      try {
        const response = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
        expect(response.statusCode).toBe(200)
        expect(response.json().data.map((item: { id: string }) => item.id)).toEqual(['cus_trip'])
      } finally {
        thread.stop()
        await app.close()
      }
      const { events } = thread
      const lookup = events.find((event) => event.posted?.op === 'query')?.posted
      const page = events.findIndex((event) => event.posted?.op === 'queryBytes')
      expect(lookup, 'the key lookup went to the database thread').toBeDefined()
      expect(page, 'the page went to the database thread').toBeGreaterThan(-1)
      const lookupAnswered = events.findIndex((event) => event.answered === lookup?.id)
      expect(page, 'the page is sent before the key lookup is answered').toBeLessThan(lookupAnswered)
    })

    it('hands the thread the next request before the page before it is answered: the page ends its transaction', async () => {
      const { store } = testStore
      const thread = watchThread()
      let answers: unknown[]
      try {
        const first = store.read((sql) => pageLike(sql, 1, 0.3))
        const second = store.read((sql) => pageLike(sql, 2))
        answers = await Promise.all([first, second])
      } finally {
        thread.stop()
      }
      expect(answers).toEqual([[{ n: 1, org: '' }], [{ n: 2, org: '' }]])
      const posted = thread.events.flatMap((event) => (event.posted ? [event.posted] : []))
      expect(posted.map(({ op, ends }) => `${op}${ends ? ' (ends)' : ''}`)).toEqual([
        'begin',
        'query (ends)',
        'begin',
        'query (ends)',
      ])
      const firstStatement = posted[1]?.id
      const secondBegin = thread.events.findIndex((event) => event.posted === posted[2])
      const firstAnswered = thread.events.findIndex((event) => event.answered === firstStatement)
      expect(secondBegin, 'the second request reached the thread before the first was answered').toBeLessThan(
        firstAnswered,
      )
    })

    it('runs a statement after the page in a read-only transaction of its own, and leaves none open', async () => {
      const { store } = testStore
      const [first, after] = await store.read(async (sql) => {
        const [page] = await pageLike(sql, 1)
        const [settings] = await sql.query<{ ro: string; role: string; org: string }>(
          `SELECT current_setting('transaction_read_only') AS ro, current_user AS role,
                  coalesce(current_setting('openbook.org_id', true), '') AS org`,
          [],
        )
        return [page, settings]
      })
      expect(first).toEqual({ n: 1, org: '' })
      expect(after).toEqual({ ro: 'on', role: 'openbook_reader', org: '' })
      await expect(
        store.read(async (sql) => {
          await pageLike(sql, 1)
          return sql.query("INSERT INTO organizations (id, name, plan) VALUES ('org_ro', 'Ro', 'free')", [])
        }),
      ).rejects.toMatchObject({ code: '25006' })
      await store.admin((sql) =>
        sql.exec("INSERT INTO organizations (id, name, plan) VALUES ('org_written', 'Written', 'free')"),
      )
      const [row] = await store.admin((sql) =>
        sql.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM organizations WHERE id IN ('org_ro', 'org_written')",
        ),
      )
      expect(row?.n).toBe(1)
    })

    it('gives up on the thread a request queued there past its wait, without running it', async () => {
      const { store } = testStore
      const thread = watchThread()
      try {
        const slow = store.read((sql) => pageLike(sql, 1, 2.5))
        const givenUp = store.read((sql) => pageLike(sql, 2))
        await expect(givenUp).rejects.toMatchObject({ name: 'StoreBusyError', retryAfterSeconds: 1 })
        await slow
      } finally {
        thread.stop()
      }
      const statements = thread.events.flatMap((event) =>
        event.posted?.op === 'query' ? [event.posted.id] : [],
      )
      const answers = statements.map((id) => thread.events.find((event) => event.answered === id))
      expect(answers.map((answer) => answer?.error)).toEqual([undefined, GIVEN_UP])
      // Nothing of it was left open: the next request reads.
      expect(await store.read((sql) => pageLike(sql, 3))).toEqual([{ n: 3, org: '' }])
    })

    it('hands the memory of a page’s answer back to the thread with its next message', async () => {
      const { store } = testStore
      const org = await createOrg(store, 'org_trip_memory')
      await addCustomers(
        store,
        org.id,
        Array.from({ length: 40 }, (_, i) => ({ id: `cus_m${i}`, createdAt: '2025-01-01T00:00:00.000Z' })),
      )
      const { key } = await createKey(store, org)
      const { app } = await buildTestApp(store, { logLevel: 'silent' })
      const thread = watchThread()
      try {
        for (let i = 0; i < 3; i++) {
          const response = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
          expect(response.json().data).toHaveLength(40)
        }
      } finally {
        thread.stop()
        await app.close()
      }
      const pages = thread.events.filter((event) => event.posted?.op === 'queryBytes')
      expect(pages).toHaveLength(3)
      const handedBack = thread.events.flatMap((event) => event.posted?.spare ?? [])
      // Two pages' memory, each at least the page (40 rows of a few dozen bytes).
      expect(handedBack.length).toBeGreaterThanOrEqual(2)
      for (const size of handedBack) expect(size).toBeGreaterThan(40 * 30)
    })
  },
  { kinds: ['embedded'] },
)
