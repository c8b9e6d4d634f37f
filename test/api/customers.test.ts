import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { customerSchema } from '../../src/schemas/resources.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { listEnvelope } from '../helpers/envelope.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const CUSTOMER_FIELDS = new Set(Object.keys(customerSchema.shape))
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** Text the database must escape when it writes the items' JSON. */
const TEXT = {
  firstName: 'Zoë "Z" O\'Brien',
  lastName: 'back\\slash /slash',
  notes: 'line\nbreak\ttab\rreturn \u0001\u001f bell\u0007 </script> \u2028\u2029 😀 \ud83d\ude00 ✓',
  city: 'Zürich',
  region: '{"json":"inside"}',
}

describeEachStore('GET /api/public/v1/customers on %s', (testStore) => {
  let app: FastifyInstance
  let key: string
  let textKey: string
  // Active customers of org A in the expected order: createdAt DESC, then id DESC.
  const expectedOrder = ['cus_e', 'cus_d2', 'cus_d1', 'cus_c', 'cus_a']

  beforeAll(async () => {
    const { store } = testStore
    const orgA = await createOrg(store, 'org_a')
    const orgB = await createOrg(store, 'org_b')
    await addCustomers(store, orgA.id, [
      {
        id: 'cus_a',
        createdAt: '2025-01-01T00:00:00.000Z',
        firstName: 'Ann',
        email: 'ann@example.com',
        country: 'DE',
      },
      { id: 'cus_b', createdAt: '2025-01-02T00:00:00.000Z', isActive: false },
      {
        id: 'cus_c',
        createdAt: '2025-01-03T00:00:00.000Z',
        dateOfBirth: '1990-04-05',
        marketingConsent: true,
      },
      // Same createdAt: the id breaks the tie.
      { id: 'cus_d1', createdAt: '2025-01-04T10:00:00.123Z' },
      { id: 'cus_d2', createdAt: '2025-01-04T10:00:00.123Z' },
      { id: 'cus_e', createdAt: '2025-01-05T00:00:00.000Z', notes: 'VIP', secondaryPhone: null },
      { id: 'cus_f', createdAt: '2025-01-06T00:00:00.000Z', isActive: false },
    ])
    await addCustomers(store, orgB.id, [
      { id: 'cus_b1', createdAt: '2025-02-01T00:00:00.000Z' },
      { id: 'cus_b2', createdAt: '2025-02-02T00:00:00.000Z' },
    ])
    key = (await createKey(store, orgA)).key
    const orgText = await createOrg(store, 'org_text')
    await addCustomers(store, orgText.id, [
      { id: 'cus_text', createdAt: '2025-03-01T00:00:00.000Z', ...TEXT },
    ])
    textKey = (await createKey(store, orgText)).key
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  })

  afterAll(async () => {
    await app?.close()
  })

  const get = (query = '') =>
    app.inject({ method: 'GET', url: `/api/public/v1/customers${query}`, headers: bearer(key) })

  it('lists only active customers of the key organization, newest first, id as tie-break', async () => {
    const response = await get()
    expect(response.statusCode).toBe(200)
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
    const body = response.json()
    expect(body.data.map((c: { id: string }) => c.id)).toEqual(expectedOrder)
    expect(body.pagination).toEqual({ limit: 50, offset: 0, total: 5, hasMore: false })
  })

  it('returns only contract fields, times as toISOString, and omits empty optional values', async () => {
    const body = (await get()).json()
    for (const customer of body.data) {
      for (const field of Object.keys(customer)) expect(CUSTOMER_FIELDS.has(field), field).toBe(true)
      expect(customer).not.toHaveProperty('orgId')
      expect(customer.isActive).toBe(true)
      expect(customer.createdAt).toMatch(ISO_MS)
      expect(customer.updatedAt).toMatch(ISO_MS)
    }
    const byId = Object.fromEntries(body.data.map((c: { id: string }) => [c.id, c]))
    expect(byId.cus_d1).toEqual({
      id: 'cus_d1',
      isActive: true,
      createdAt: '2025-01-04T10:00:00.123Z',
      updatedAt: '2025-01-04T10:00:00.123Z',
    })
    expect(byId.cus_a).toMatchObject({ firstName: 'Ann', email: 'ann@example.com', country: 'DE' })
    expect(byId.cus_c).toMatchObject({ dateOfBirth: '1990-04-05', marketingConsent: true })
    expect(byId.cus_e).toMatchObject({ notes: 'VIP' })
    expect(byId.cus_e).not.toHaveProperty('secondaryPhone')
  })

  it('writes every kind of text as exact JSON: quotes, backslashes, controls, line separators, astral', async () => {
    const response = await app.inject({
      method: 'GET',
      url: '/api/public/v1/customers',
      headers: bearer(textKey),
    })
    expect(response.statusCode).toBe(200)
    const body = response.json()
    expect(listEnvelope(customerSchema).safeParse(body).success).toBe(true)
    expect(body.data).toEqual([
      {
        id: 'cus_text',
        isActive: true,
        createdAt: '2025-03-01T00:00:00.000Z',
        updatedAt: '2025-03-01T00:00:00.000Z',
        ...TEXT,
      },
    ])
  })

  it('every page matches the strict envelope schema', async () => {
    for (const query of ['', '?limit=1&offset=4', '?offset=10']) {
      const result = listEnvelope(customerSchema).safeParse((await get(query)).json())
      expect(result.error?.issues, query).toBeUndefined()
    }
  })

  it('pages without repeating or skipping a row, with an exact total and hasMore', async () => {
    const seen: string[] = []
    const flags: boolean[] = []
    for (let offset = 0; ; offset += 2) {
      const body = (await get(`?limit=2&offset=${offset}`)).json()
      expect(body.pagination).toMatchObject({ limit: 2, offset, total: 5 })
      seen.push(...body.data.map((c: { id: string }) => c.id))
      flags.push(body.pagination.hasMore)
      if (!body.pagination.hasMore) break
    }
    expect(seen).toEqual(expectedOrder)
    expect(flags).toEqual([true, true, false])
  })

  it('past the end: empty data, the exact total, hasMore false', async () => {
    const body = (await get('?offset=10')).json()
    expect(body).toEqual({ data: [], pagination: { limit: 50, offset: 10, total: 5, hasMore: false } })
  })

  it.each(['?offset=null', '?offset=', '?offset=0'])('%s means offset 0', async (query) => {
    const response = await get(query)
    expect(response.statusCode).toBe(200)
    expect(response.json().pagination.offset).toBe(0)
  })

  it('refuses unknown parameters, each named in details after the known ones, also with a matching ETag', async () => {
    const response = await get('?search=ann&limit=0&orgId=org_b')
    expect(response.statusCode).toBe(400)
    const body = response.json()
    expect(body.code).toBe('invalid_query')
    expect(body.details.map((issue: { path: string[] }) => issue.path)).toEqual([
      ['limit'],
      ['search'],
      ['orgId'],
    ])
    expect(body.details[1]).toEqual({
      code: 'unrecognized_keys',
      keys: ['search'],
      path: ['search'],
      message: 'search is not a parameter of this list, which takes limit, offset',
    })
    // Never a 304 for a query the list does not take, whatever the tag.
    const etag = String((await get('')).headers.etag)
    const conditional = await app.inject({
      url: '/api/public/v1/customers?updatedSince=2026-01-01T00:00:00Z',
      headers: { ...bearer(key), 'if-none-match': etag },
    })
    expect(conditional.statusCode).toBe(400)
    expect(conditional.json().details[0].path).toEqual(['updatedSince'])
    // A parameter with no value is a parameter too.
    expect((await get('?limit=1&flag')).statusCode).toBe(400)
  })

  it.each([
    'limit=0',
    'limit=101',
    'limit=-1',
    'limit=abc',
    'limit=1e1',
    'limit=0x10',
    'limit=1.5',
    'limit=%2010',
    'limit=',
    'offset=-1',
    'offset=1.5',
    'offset=abc',
    'limit=1&limit=2',
    'offset=1&offset=2',
  ])('rejects %s with 400 and details', async (query) => {
    const response = await get(`?${query}`)
    expect(response.statusCode).toBe(400)
    const body = response.json()
    expect(body.error).toBe('Invalid query parameters')
    expect(typeof body.message).toBe('string')
    expect(body.details.length).toBeGreaterThan(0)
    for (const detail of body.details) {
      expect(typeof detail.code).toBe('string')
      expect(Array.isArray(detail.path)).toBe(true)
      expect(typeof detail.message).toBe('string')
    }
  })

  it('reports bounds as Zod does', async () => {
    const tooBig = (await get('?limit=101')).json()
    expect(tooBig.details).toEqual([
      expect.objectContaining({ code: 'too_big', maximum: 100, type: 'number', path: ['limit'] }),
    ])
    const tooSmall = (await get('?limit=0')).json()
    expect(tooSmall.details).toEqual([
      expect.objectContaining({ code: 'too_small', minimum: 1, type: 'number', path: ['limit'] }),
    ])
    const negative = (await get('?offset=-1')).json()
    expect(negative.details[0]).toMatchObject({ path: ['offset'] })
  })

  it('accepts the bounds themselves', async () => {
    expect((await get('?limit=1')).json().data).toHaveLength(1)
    expect((await get('?limit=100')).statusCode).toBe(200)
    expect((await get('?limit=007')).json().pagination.limit).toBe(7)
  })
})
