import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { listApiKeys } from '../../src/domain/api-keys.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const REQUIRED = { error: 'Unauthorized', message: 'API key required in Authorization header' }
const INVALID = { error: 'Unauthorized', message: 'Invalid or expired API key' }

describeEachStore('authentication on %s', (testStore) => {
  let store: Store
  let app: FastifyInstance
  let testKey: string
  let liveKey: string
  let otherOrgKey: string

  beforeAll(async () => {
    store = testStore.store
    const orgA = await createOrg(store, 'org_a')
    const orgB = await createOrg(store, 'org_b')
    await addCustomers(store, 'org_a', [{ id: 'cus_a', createdAt: '2025-01-01T00:00:00.000Z' }])
    await addCustomers(store, 'org_b', [{ id: 'cus_b', createdAt: '2025-01-01T00:00:00.000Z' }])
    testKey = (await createKey(store, orgA, 'test')).key
    liveKey = (await createKey(store, orgA, 'live')).key
    otherOrgKey = (await createKey(store, orgB, 'test')).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  })

  afterAll(async () => {
    await app?.close()
  })

  const get = (headers: Record<string, string>, path = '/api/public/v1/customers') =>
    app.inject({ method: 'GET', url: path, headers })

  it.each(['/api/public/v1/customers', '/api/public/v1/appointments'])(
    '%s without a key: 401, key required',
    async (path) => {
      const response = await get({}, path)
      expect(response.statusCode).toBe(401)
      expect(response.json()).toMatchObject(REQUIRED)
      expect(response.headers['www-authenticate']).toMatch(/^Bearer /)
    },
  )

  it.each([['Basic dXNlcjpwYXNz'], ['Bearer'], ['Bearer '], ['Token abc'], [`svc_test_${'0'.repeat(64)}`]])(
    'malformed header %j: 401, key required',
    async (header) => {
      const response = await get({ authorization: header })
      expect(response.statusCode).toBe(401)
      expect(response.json()).toMatchObject(REQUIRED)
    },
  )

  it('unknown key of the right format: 401, invalid', async () => {
    const response = await get(bearer(`svc_test_${'ab'.repeat(32)}`))
    expect(response.statusCode).toBe(401)
    expect(response.json()).toMatchObject(INVALID)
    expect(response.headers['www-authenticate']).toContain('invalid_token')
  })

  it('a key not of the key format: 401, invalid', async () => {
    for (const token of [
      `svc_prod_${'a'.repeat(64)}`,
      `other_test_${'a'.repeat(64)}`,
      `svc_test_${'A'.repeat(64)}`,
    ]) {
      const response = await get(bearer(token))
      expect(response.statusCode).toBe(401)
      expect(response.json()).toMatchObject(INVALID)
    }
  })

  it('test and live keys both read their organization; the scheme is case-insensitive', async () => {
    for (const headers of [
      bearer(testKey),
      bearer(liveKey),
      { authorization: `bearer ${testKey}` },
      { authorization: `BEARER ${liveKey}` },
    ]) {
      const response = await get(headers)
      expect(response.statusCode).toBe(200)
      expect(response.json().data.map((c: { id: string }) => c.id)).toEqual(['cus_a'])
    }
    const other = await get(bearer(otherOrgKey))
    expect(other.json().data.map((c: { id: string }) => c.id)).toEqual(['cus_b'])
  })

  it('takes the key only from the header', async () => {
    const response = await get({}, `/api/public/v1/customers?api_key=${testKey}&key=${testKey}`)
    expect(response.statusCode).toBe(401)
  })

  it('a revoked key is refused on the very next request', async () => {
    const org = await createOrg(store, 'org_revoke')
    const created = await createKey(store, org)
    expect((await get(bearer(created.key))).statusCode).toBe(200)
    await store.admin((sql) =>
      sql.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [created.id]),
    )
    const response = await get(bearer(created.key))
    expect(response.statusCode).toBe(401)
    // The contract's message; the code says why.
    expect(response.json()).toEqual({ ...INVALID, code: 'revoked_api_key' })
    expect(response.headers['www-authenticate']).toContain('invalid_token')
  })

  it('an expired key is refused, with its own code', async () => {
    const org = await createOrg(store, 'org_expire')
    const created = await createKey(store, org, 'test', new Date(Date.now() + 60_000))
    expect((await get(bearer(created.key))).statusCode).toBe(200)
    await store.admin((sql) =>
      sql.query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [created.id]),
    )
    for (const path of ['/api/public/v1/customers', '/api/public/v1/appointments?limit=1000']) {
      const response = await get(bearer(created.key), path)
      expect(response.statusCode).toBe(401)
      expect(response.json()).toEqual({ ...INVALID, code: 'expired_api_key' })
      expect(response.headers['openbook-key-expires']).toBeUndefined()
    }
  })

  it('a key both expired and revoked is told as revoked; an unknown key as invalid', async () => {
    const org = await createOrg(store, 'org_both')
    const created = await createKey(store, org, 'test', new Date(Date.now() + 60_000))
    await store.admin((sql) =>
      sql.query(
        "UPDATE api_keys SET expires_at = now() - interval '1 second', revoked_at = now() WHERE id = $1",
        [created.id],
      ),
    )
    expect((await get(bearer(created.key))).json()).toEqual({ ...INVALID, code: 'revoked_api_key' })
    const unknown = await get(bearer(`svc_test_${'ab'.repeat(32)}`))
    expect(unknown.json()).toEqual({ ...INVALID, code: 'invalid_api_key' })
  })

  it('every response to an expiring key gives its expiry (Openbook-Key-Expires); a key without one gets none', async () => {
    const org = await createOrg(store, 'org_expiring')
    const expiresAt = new Date(Date.UTC(2099, 0, 2, 3, 4, 5, 678))
    const expiring = await createKey(store, org, 'test', expiresAt)
    for (const path of [
      '/api/public/v1/customers',
      '/api/public/v1/appointments?status=completed',
      '/api/public/v1/customers?limit=1000',
    ]) {
      const response = await get(bearer(expiring.key), path)
      expect(response.statusCode, path).toBe(path.endsWith('1000') ? 400 : 200)
      expect(response.headers['openbook-key-expires'], path).toBe('Fri, 02 Jan 2099 03:04:05 GMT')
    }
    const forever = await createKey(store, org, 'test')
    const response = await get(bearer(forever.key))
    expect(response.statusCode).toBe(200)
    expect(response.headers).not.toHaveProperty('openbook-key-expires')
  })

  it('the key is checked before the query: a bad key with a bad query is 401', async () => {
    const response = await get(bearer(`svc_test_${'cd'.repeat(32)}`), '/api/public/v1/customers?limit=1000')
    expect(response.statusCode).toBe(401)
  })

  it('does not check the plan on the read path (a downgraded organization keeps reading)', async () => {
    await store.admin((sql) => sql.query("UPDATE organizations SET plan = 'free' WHERE id = 'org_a'"))
    expect((await get(bearer(testKey))).statusCode).toBe(200)
    await store.admin((sql) => sql.query("UPDATE organizations SET plan = 'professional' WHERE id = 'org_a'"))
  })

  it('enforces no rate limit: more requests at once than the plan catalog allows a minute are all answered, without rate-limit headers', async () => {
    // The contract's catalog lists 1,000 requests a minute for professional (org_a's plan) as
    // reference only: no 429, no X-RateLimit-* and no Retry-After on the list routes.
    const CATALOG_RPM_PROFESSIONAL = 1000
    const statuses = new Map<number, number>()
    // Ten at a time: the embedded store answers one statement at a time, and fifty at once on a
    // machine busy with other work left the last one past its request deadline (a 503, which is
    // no rate limit but would hide one).
    for (let sent = 0; sent <= CATALOG_RPM_PROFESSIONAL; sent += 10) {
      const responses = await Promise.all(
        Array.from({ length: 10 }, () => get(bearer(testKey), '/api/public/v1/customers?limit=1')),
      )
      for (const response of responses) {
        statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1)
        const limitHeaders = Object.keys(response.headers).filter((name) =>
          /ratelimit|retry-after/i.test(name),
        )
        expect(limitHeaders).toEqual([])
      }
    }
    expect([...statuses]).toEqual([[200, 1010]])
  })
})

describeEachStore('last-used tracking on %s', (testStore) => {
  it('records use, in the background, at most once per resolution', async () => {
    const { store } = testStore
    const org = await createOrg(store, 'org_used')
    const key = await createKey(store, org)
    let writes = 0
    const counting: Store = {
      ...store,
      read: store.read.bind(store),
      admin: store.admin.bind(store),
      close: store.close.bind(store),
      kind: store.kind,
      asReader: (work) => {
        writes++
        return store.asReader(work)
      },
    }
    const { app } = await buildTestApp(counting, {
      logLevel: 'silent',
      lastUsed: { resolutionMs: 60_000, flushEveryMs: 60_000 },
    })
    try {
      const before = await store.admin((sql) => listApiKeys(sql, org.id))
      expect(before[0]?.lastUsedAt).toBeNull()
      for (let i = 0; i < 5; i++) {
        expect(
          (await app.inject({ url: '/api/public/v1/customers', headers: bearer(key.key) })).statusCode,
        ).toBe(200)
      }
      // Nothing written on the request path itself.
      expect(writes).toBe(0)
    } finally {
      await app.close()
    }
    // Closing flushes: one write for five requests.
    expect(writes).toBe(1)
    const after = await store.admin((sql) => listApiKeys(sql, org.id))
    expect(after[0]?.lastUsedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/)
  })
})
