import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { hashSecret } from '../../src/domain/api-key-secret.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const CANARY = {
  firstName: 'CANARYFIRST7731',
  lastName: 'CANARYLAST7732',
  email: 'canary.7733@example.test',
  phone: '+99 7734 000',
  notes: 'CANARYNOTE7735 confidential',
  query: 'CANARYQUERY7736',
  path: 'CANARYPATH7737',
}

describeEachStore('security headers, surface and logs on %s', (testStore) => {
  let app: FastifyInstance
  let logs: string[]
  let key: string

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_surface')
    await addCustomers(testStore.store, 'org_surface', [
      {
        id: 'cus_canary',
        createdAt: '2025-01-01T00:00:00.000Z',
        firstName: CANARY.firstName,
        lastName: CANARY.lastName,
        email: CANARY.email,
        phone: CANARY.phone,
        notes: CANARY.notes,
      },
    ])
    await addAppointments(testStore.store, 'org_surface', [
      { id: 'apt_1', start: '2025-02-01T10:00:00.000Z', customerId: 'cus_canary', note: CANARY.notes },
    ])
    key = (await createKey(testStore.store, org)).key
    ;({ app, logs } = await buildTestApp(testStore.store, { logLevel: 'info' }))
  })
  afterAll(async () => {
    await app?.close()
  })

  const listResponses = () =>
    Promise.all([
      app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: bearer(key) }),
      app.inject({ method: 'GET', url: '/api/public/v1/appointments?limit=500', headers: bearer(key) }),
      app.inject({ method: 'GET', url: '/api/public/v1/appointments' }),
      app.inject({
        method: 'GET',
        url: '/api/public/v1/customers',
        headers: bearer(`svc_test_${'0'.repeat(64)}`),
      }),
    ])

  it('list responses (200, 400, 401) carry no-store, nosniff, a JSON type, no CORS grant, no x-powered-by', async () => {
    const responses = await listResponses()
    expect(responses.map((r) => r.statusCode)).toEqual([200, 400, 401, 401])
    for (const response of responses) {
      expect(response.headers['cache-control']).toBe('no-store')
      expect(response.headers['x-content-type-options']).toBe('nosniff')
      expect(response.headers['content-type']).toMatch(/^application\/json/)
      expect(response.headers['access-control-allow-origin']).toBeUndefined()
      expect(response.headers['access-control-allow-credentials']).toBeUndefined()
      expect(response.headers['x-powered-by']).toBeUndefined()
      expect(response.headers.server).toBeUndefined()
    }
  })

  it('cross-origin requests and preflights get no CORS grant', async () => {
    const origin = { origin: 'https://evil.example' }
    const get = await app.inject({
      method: 'GET',
      url: '/api/public/v1/customers',
      headers: { ...origin, ...bearer(key) },
    })
    expect(get.statusCode).toBe(200)
    expect(get.headers['access-control-allow-origin']).toBeUndefined()
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/public/v1/customers',
      headers: {
        ...origin,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    })
    expect(preflight.statusCode).toBe(405)
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined()
    expect(preflight.headers['access-control-allow-headers']).toBeUndefined()
  })

  it('every other response (404, 405, openapi.json) has nosniff and no x-powered-by', async () => {
    for (const [method, url] of [
      ['GET', '/'],
      ['GET', '/openapi.json'],
      ['POST', '/api/public/v1/customers'],
      ['DELETE', '/api/public/v1/appointments'],
      ['GET', '/api/public/v1/customers/cus_canary'],
    ] as const) {
      const response = await app.inject({ method, url, headers: bearer(key) })
      expect(response.statusCode, `${method} ${url}`).toBeLessThan(500)
      expect(response.headers['x-content-type-options']).toBe('nosniff')
      expect(response.headers['x-powered-by']).toBeUndefined()
      expect(response.headers['access-control-allow-origin']).toBeUndefined()
    }
  })

  it('the GET and HEAD routes are exactly the OpenAPI operations; nothing else answers', async () => {
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, unknown>>
    }>()
    const documented = Object.entries(document.paths)
      .flatMap(([path, operations]) => Object.keys(operations).map((m) => `${m.toUpperCase()} ${path}`))
      .sort()
    // Routes as registered, read from Fastify's route tree.
    const tree = app.printRoutes({ commonPrefix: false, includeHooks: false })
    const registered = [...tree.matchAll(/(\/\S*) \(([^)]+)\)/g)]
      .flatMap(([, path, methods]) => (methods ?? '').split(', ').map((m) => `${m} ${path}`))
      .filter((route) => route.startsWith('GET ') || route.startsWith('HEAD '))
      .sort()
    expect(registered.length).toBeGreaterThan(0)
    // Every GET and every HEAD served is an operation of the document, and the other way round.
    expect(registered).toEqual(documented)
    // Every registered path, whatever the method, is an OpenAPI path. Besides GET there are only
    // Fastify's HEAD of each GET (same hooks: a key is needed) and the 405 answers of the others.
    const routeTable = [...tree.matchAll(/(\/\S*) \(([^)]+)\)/g)].map(([, path, methods]) => ({
      path: path as string,
      methods: (methods ?? '').split(', ').sort(),
    }))
    expect(routeTable.map((r) => r.path).sort()).toEqual(Object.keys(document.paths).sort())
    for (const { path, methods } of routeTable) {
      expect(methods, path).toEqual(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'])
      for (const method of ['DELETE', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const) {
        const refused = await app.inject({ method, url: path, headers: bearer(key) })
        expect(refused.statusCode, `${method} ${path}`).toBe(405)
        expect(refused.headers.allow).toBe('GET, HEAD')
      }
    }
    const head = await app.inject({ method: 'HEAD', url: '/api/public/v1/customers' })
    expect(head.statusCode).toBe(401)
    for (const route of documented) {
      const [, url] = route.split(' ')
      expect(app.hasRoute({ method: 'GET', url: url as string })).toBe(true)
    }
    // Paths a client might guess, which the contract says do not exist.
    for (const url of [
      '/api/public/v1',
      '/api/public/v1/',
      '/api/public/v1/customers/',
      '/api/public/v1/customers/cus_canary',
      '/api/public/v1/appointments/apt_1',
      '/api/public/v1/staff',
      '/api/public/v1/services',
      '/api/public/v1/api-keys',
      '/api/public/v1/webhooks',
      '/api/public/v2/customers',
      '/api/admin',
      '/admin',
      '/health',
      '/metrics',
      '/docs',
      '/documentation',
      '/openapi.yaml',
      '/.env',
      '/API/PUBLIC/V1/CUSTOMERS',
    ]) {
      const response = await app.inject({ method: 'GET', url, headers: bearer(key) })
      expect(response.statusCode, url).toBe(404)
      expect(response.json()).toMatchObject({ error: 'Not Found', code: 'not_found' })
    }
  })

  it('logs never hold the key, the Authorization header, query values or personal data', async () => {
    const before = logs.length
    const requests = [
      {
        url: `/api/public/v1/appointments?customerId=${CANARY.query}&staffId=${CANARY.query}`,
        headers: bearer(key),
      },
      { url: `/api/public/v1/appointments?status=${CANARY.query}`, headers: bearer(key) },
      { url: `/api/public/v1/customers?limit=${CANARY.query}`, headers: bearer(key) },
      { url: '/api/public/v1/customers', headers: bearer(key) },
      { url: '/api/public/v1/appointments', headers: bearer(key) },
      {
        url: `/api/public/v1/customers?x=${CANARY.query}`,
        headers: { authorization: `Basic ${CANARY.query}` },
      },
      { url: '/api/public/v1/customers', headers: bearer(`svc_test_${'c'.repeat(64)}`) },
      { url: `/api/public/v1/${CANARY.path}?q=${CANARY.query}`, headers: bearer(key) },
      { url: `/api/public/v1/customers?q=${CANARY.query}`, headers: bearer(key), method: 'POST' as const },
    ]
    for (const { url, headers, method } of requests) {
      const response = await app.inject({ method: method ?? 'GET', url, headers })
      expect(response.statusCode).toBeLessThan(500)
    }
    // The responses did carry the personal data: the point is that the logs do not.
    const page = await app.inject({ method: 'GET', url: '/api/public/v1/customers', headers: bearer(key) })
    expect(page.body).toContain(CANARY.notes)

    const lines = logs.slice(before)
    expect(lines.length).toBeGreaterThanOrEqual(requests.length) // one line per request, at least
    const text = logs.join('\n')
    const forbidden = [
      key,
      key.slice(-64),
      key.slice(-16),
      hashSecret(key),
      `svc_test_${'c'.repeat(64)}`,
      ...Object.values(CANARY),
    ]
    for (const value of forbidden) expect(text, `log holds ${value.slice(0, 12)}…`).not.toContain(value)
    expect(text.toLowerCase()).not.toContain('authorization')
    expect(text.toLowerCase()).not.toContain('bearer')
    expect(text).not.toMatch(/"url"\s*:/)
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>
      expect(entry.reqId).toMatch(/^req-/)
    }
  })
})
