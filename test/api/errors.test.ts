import { METHODS } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { StoreBusyError } from '../../src/store/busy.js'
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

  describe('a busy store: 503 with Retry-After', () => {
    let busy: FastifyInstance
    let busyLogs: string[]
    let thrown: unknown

    beforeAll(async () => {
      const store: Store = {
        ...testStore.store,
        kind: 'postgres',
        read: async () => {
          throw thrown
        },
        asReader: testStore.store.asReader.bind(testStore.store),
        admin: testStore.store.admin.bind(testStore.store),
        close: async () => {},
      }
      ;({ app: busy, logs: busyLogs } = await buildTestApp(store))
    })
    afterAll(async () => {
      await busy?.close()
    })

    const expect503 = async (retryAfter: string) => {
      const response = await busy.inject({ url: '/api/public/v1/appointments', headers: bearer(key) })
      expect(response.statusCode).toBe(503)
      expect(response.headers['retry-after']).toBe(retryAfter)
      expect(response.headers['cache-control']).toBe('no-store')
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(response.headers['x-request-id']).toMatch(/^req-/)
      const body = response.json()
      expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
      expect(body).toMatchObject({ error: 'Service Unavailable', code: 'service_unavailable' })
      return { response, body }
    }

    it('a StoreBusyError: its own message and Retry-After', async () => {
      thrown = new StoreBusyError('The store is being restarted; retry shortly', 7)
      const { body } = await expect503('7')
      expect(body.message).toBe('The store is being restarted; retry shortly')
      thrown = new StoreBusyError('The store is busy')
      await expect503('1')
    })

    it.each([
      ['55P03', 'could not obtain lock on relation "appointment"'],
      ['57P01', 'terminating connection due to administrator command'],
      ['57P03', 'the database system is starting up'],
      ['53300', 'sorry, too many clients already'],
    ])('PostgreSQL %s: Retry-After 1, no driver text, the code in the log', async (code, driverMessage) => {
      const error = new Error(`${driverMessage} at SELECT a.id FROM appointment a WHERE org_id = $1`)
      Object.assign(error, { code, severity: 'FATAL', routine: 'ProcessInterrupts' })
      thrown = error
      const { response } = await expect503('1')
      for (const leak of [driverMessage, 'SELECT', 'appointment', code, 'FATAL', 'ProcessInterrupts']) {
        expect(response.body).not.toContain(leak)
      }
      const id = String(response.headers['x-request-id'])
      expect(busyLogs.some((line) => line.includes(code) && line.includes(id))).toBe(true)
      // The request itself is in the request log, with its status.
      expect(
        busyLogs.some(
          (line) => line.includes('"msg":"request"') && line.includes(id) && line.includes('503'),
        ),
      ).toBe(true)
    })

    it('other PostgreSQL errors remain a 500', async () => {
      thrown = Object.assign(new Error('division by zero'), { code: '22012' })
      const response = await busy.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
      expect(response.statusCode).toBe(500)
      expect(response.headers['retry-after']).toBeUndefined()
      expect(response.headers['cache-control']).toBe('no-store')
    })
  })

  it("a client's well-formed X-Request-Id is the request's id: echoed, logged, quoted in a 500", async () => {
    const mine = 'trace-01HZX9:b7f3c2d1.5e4a_4f6b'
    const response = await failing.inject({
      url: '/api/public/v1/customers',
      headers: { ...bearer(key), 'x-request-id': mine },
    })
    expect(response.statusCode).toBe(500)
    expect(response.headers['x-request-id']).toBe(mine)
    expect(response.json().message).toBe(`Internal server error (request id ${mine})`)
    expect(
      failingLogs.some((line) => line.includes('"msg":"request"') && line.includes(`"reqId":"${mine}"`)),
    ).toBe(true)
    const ok = await app.inject({ url: '/openapi.json', headers: { 'x-request-id': 'a' } })
    expect(ok.headers['x-request-id']).toBe('a')
  })

  it.each([
    ['empty', ''],
    ['129 characters', 'a'.repeat(129)],
    ['a space', 'my id'],
    ['a quote', 'id"x'],
    ['a line of JSON', '{"msg":"x"}'],
    ['non-ASCII', 'idé'],
  ])('an X-Request-Id with %s is not used: the server makes one', async (_what, given) => {
    const response = await app.inject({
      url: '/api/public/v1/customers',
      headers: { ...bearer(key), 'x-request-id': given },
    })
    expect(response.statusCode).toBe(200)
    expect(response.headers['x-request-id']).toMatch(/^req-[0-9a-f-]{36}$/)
  })

  it('an X-Request-Id given twice is not used', async () => {
    const response = await app.inject({
      url: '/api/public/v1/customers',
      headers: { ...bearer(key), 'x-request-id': ['one', 'two'] },
    })
    expect(response.headers['x-request-id']).toMatch(/^req-/)
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
      expect(response.headers['cache-control'], url).toBe('no-store')
    }
  })

  // Every method Node parses, whether or not Fastify routes it (TRACE, QUERY, PROPFIND, M-SEARCH...).
  const OTHER_METHODS = METHODS.filter((method) => method !== 'GET' && method !== 'HEAD')

  it.each(OTHER_METHODS)(
    '%s on a list path: 405 with Allow: GET, HEAD, before any body is read',
    async (method) => {
      for (const url of [
        '/api/public/v1/customers',
        '/api/public/v1/appointments?limit=5',
        '/openapi.json',
      ]) {
        for (const withKey of [true, false]) {
          const response = await app.inject({
            method: method as 'GET',
            url,
            headers: { ...(withKey ? bearer(key) : {}), 'content-type': 'application/json' },
            payload: '{"broken json',
          })
          expect(response.statusCode, `${method} ${url}`).toBe(405)
          expect(response.headers.allow).toBe('GET, HEAD')
          expect(response.headers['cache-control']).toBe('no-store')
          expect(response.headers['x-request-id']).toMatch(/^req-/)
          expect(response.json()).toMatchObject({ error: 'Method Not Allowed', code: 'method_not_allowed' })
        }
      }
    },
  )

  it.each(['TRACE', 'PROPFIND', 'M-SEARCH'])(
    '%s on an unknown path: 404, as GET would be',
    async (method) => {
      for (const url of ['/api/public/v1/customers/', '/api/public/v1/services', '/nope']) {
        const response = await app.inject({ method: method as 'GET', url, headers: bearer(key) })
        expect(response.statusCode, `${method} ${url}`).toBe(404)
        expect(response.headers['cache-control']).toBe('no-store')
        expect(response.json()).toMatchObject({ code: 'not_found' })
      }
    },
  )

  it('pagination bounds are named in the message: limit at least 1 and at most 100, offset at least 0', async () => {
    const message = async (query: string) => {
      const response = await app.inject({ url: `/api/public/v1/appointments?${query}`, headers: bearer(key) })
      expect(response.statusCode, query).toBe(400)
      expect(response.headers['cache-control']).toBe('no-store')
      return response.json().message as string
    }
    expect(await message('limit=-1')).toBe('limit: limit must be at least 1')
    expect(await message('limit=0')).toBe('limit: limit must be at least 1')
    expect(await message('limit=-99999999999999999999')).toBe('limit: limit must be at least 1')
    expect(await message('limit=101')).toBe('limit: limit must be at most 100')
    expect(await message('offset=-1')).toBe('offset: offset must be at least 0')
    expect(await message(`offset=${'9'.repeat(40)}`)).toBe(
      `offset: offset must be at most ${Number.MAX_SAFE_INTEGER}`,
    )
    // What is not an integer at all still says so.
    expect(await message('limit=abc')).toBe('limit: limit must be a decimal integer, given once')
    expect(await message('offset=1.5')).toBe('offset: offset must be a decimal integer, given once')
  })

  it('a date-time with more than 9 fractional-second digits is 400 naming the parameter', async () => {
    for (const name of ['startDate', 'endDate']) {
      const response = await app.inject({
        url: `/api/public/v1/appointments?${name}=2025-01-01T00:00:00.${'1'.repeat(140)}Z`,
        headers: bearer(key),
      })
      expect(response.statusCode, name).toBe(400)
      const body = response.json()
      expect(body.code).toBe('invalid_query')
      expect(body.message).toBe(`${name}: ${name} must have at most 9 fractional-second digits`)
      expect(body.details).toEqual([expect.objectContaining({ path: [name] })])
    }
  })

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
