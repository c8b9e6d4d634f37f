import { Worker } from 'node:worker_threads'
import { expect, it } from 'vitest'
import { hashSecret } from '../../src/domain/api-key-secret.js'
import { revokeApiKey } from '../../src/domain/api-keys.js'
import { authenticateKey } from '../../src/queries/api-keys.js'
import { KEY_ORGANIZATION } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

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
      // What went to the database thread and what came back, in order.
      const events: { posted?: { id: number; op: string }; answered?: number }[] = []
      const post = Worker.prototype.postMessage
      const emit = Worker.prototype.emit
      Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: readonly never[]) {
        const { id, request } = message as { id: number; request: { op: string } }
        events.push({ posted: { id, op: request.op } })
        return post.call(this, message, transfer)
      }
      Worker.prototype.emit = function (this: Worker, name: string | symbol, ...args: unknown[]) {
        if (name === 'message') events.push({ answered: (args[0] as { id: number }).id })
        return emit.call(this, name, ...args)
      }
      try {
        const response = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
        expect(response.statusCode).toBe(200)
        expect(response.json().data.map((item: { id: string }) => item.id)).toEqual(['cus_trip'])
      } finally {
        Worker.prototype.postMessage = post
        Worker.prototype.emit = emit
        await app.close()
      }
      const lookup = events.find((event) => event.posted?.op === 'query')?.posted
      const page = events.findIndex((event) => event.posted?.op === 'queryBytes')
      expect(lookup, 'the key lookup went to the database thread').toBeDefined()
      expect(page, 'the page went to the database thread').toBeGreaterThan(-1)
      const lookupAnswered = events.findIndex((event) => event.answered === lookup?.id)
      expect(page, 'the page is sent before the key lookup is answered').toBeLessThan(lookupAnswered)
    })
  },
  { kinds: ['embedded'] },
)
