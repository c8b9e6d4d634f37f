import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

describe('error responses', () => {
  let testStore: TestStore
  let app: FastifyInstance
  let failing: FastifyInstance
  let failingLogs: string[]
  let key: string

  beforeAll(async () => {
    testStore = await createTestStore('embedded')
    const org = await createOrg(testStore.store, 'org_err')
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
    // A store whose request path fails the way a driver does, with SQL and internals in the message.
    const broken: Store = {
      ...testStore.store,
      kind: 'postgres',
      read: async () => {
        const error = new Error(
          'relation "customers" does not exist at SELECT c.id FROM customers WHERE org_id = $1',
        )
        Object.assign(error, { code: '42P01', stack: 'Error: at /srv/openbook/src/queries/customers.ts:12' })
        throw error
      },
      asReader: testStore.store.asReader.bind(testStore.store),
      admin: testStore.store.admin.bind(testStore.store),
      close: async () => {},
    }
    ;({ app: failing, logs: failingLogs } = await buildTestApp(broken))
  })

  afterAll(async () => {
    await app?.close()
    await failing?.close()
    await testStore?.close()
  })

  it('a 500 says Internal server error with a request id, and nothing internal', async () => {
    const response = await failing.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    expect(response.statusCode).toBe(500)
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
    const body = response.json()
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
    expect(body.error).toBe('Internal server error')
    expect(body.code).toBe('internal_error')
    expect(body.message).toContain(response.headers['x-request-id'])
    for (const leak of ['relation', 'SELECT', 'customers', '42P01', '.ts', 'stack', 'at /']) {
      expect(response.body).not.toContain(leak)
    }
    // The operator still learns what happened, under the same request id.
    expect(
      failingLogs.some(
        (line) => line.includes('42P01') && line.includes(String(response.headers['x-request-id'])),
      ),
    ).toBe(true)
  })

  it('unknown paths: 404 in the error shape', async () => {
    for (const url of [
      '/',
      '/api/public/v1',
      '/api/public/v1/customers/cus_1',
      '/api/public/v1/services',
      '/api/public/v2/customers',
    ]) {
      const response = await app.inject({ url, headers: bearer(key) })
      expect(response.statusCode, url).toBe(404)
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(response.json()).toMatchObject({ error: 'Not Found', code: 'not_found' })
    }
  })

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const)(
    '%s on a list path: 405 with Allow: GET',
    async (method) => {
      for (const url of ['/api/public/v1/customers', '/api/public/v1/appointments', '/openapi.json']) {
        const response = await app.inject({
          method,
          url,
          headers: { ...bearer(key), 'content-type': 'application/json' },
          payload: method === 'POST' ? '{"broken json' : undefined,
        })
        expect(response.statusCode, `${method} ${url}`).toBe(405)
        expect(response.headers.allow).toBe('GET')
        expect(response.json()).toMatchObject({ error: 'Method Not Allowed', code: 'method_not_allowed' })
      }
    },
  )

  it('HEAD is served like GET, without a body', async () => {
    const response = await app.inject({
      method: 'HEAD',
      url: '/api/public/v1/customers',
      headers: bearer(key),
    })
    expect(response.statusCode).toBe(200)
    expect(response.body).toBe('')
  })

  it('no x-powered-by, nosniff and a request id on every response', async () => {
    for (const url of ['/openapi.json', '/api/public/v1/customers', '/nope']) {
      const response = await app.inject({ url })
      expect(response.headers['x-powered-by']).toBeUndefined()
      expect(response.headers['x-content-type-options']).toBe('nosniff')
      expect(response.headers['x-request-id']).toMatch(/^req-/)
    }
  })
})
