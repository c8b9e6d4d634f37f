import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { APPOINTMENT_LIST } from '../../src/schemas/filters.js'
import { appointmentSchema } from '../../src/schemas/resources.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { listEnvelope } from '../helpers/envelope.js'
import { addAppointments, addCustomers, addStaff, createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const APPOINTMENT_FIELDS = new Set(Object.keys(appointmentSchema.shape))

describeEachStore('GET /api/public/v1/appointments on %s', (testStore) => {
  let app: FastifyInstance
  let key: string

  beforeAll(async () => {
    const { store } = testStore
    const orgA = await createOrg(store, 'org_a')
    const orgB = await createOrg(store, 'org_b')
    await addCustomers(store, 'org_a', [
      { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' },
      { id: 'cus_2', createdAt: '2025-01-01T00:00:00.000Z' },
    ])
    await addCustomers(store, 'org_b', [{ id: 'cus_b', createdAt: '2025-01-01T00:00:00.000Z' }])
    await addStaff(store, 'org_a', ['stf_1', 'stf_2'])
    await addStaff(store, 'org_b', ['stf_b'])
    await addAppointments(store, 'org_a', [
      {
        id: 'apt_1',
        start: '2025-03-01T09:00:00.000Z',
        status: 'completed',
        customerId: 'cus_1',
        staffId: 'stf_1',
        priceCents: 4500,
        currency: 'EUR',
        locationType: 'in_person',
        note: 'Window seat',
      },
      {
        id: 'apt_2',
        start: '2025-03-02T09:00:00.000Z',
        status: 'cancelled',
        customerId: 'cus_2',
        staffId: 'stf_1',
      },
      // Same start: the id breaks the tie.
      {
        id: 'apt_3a',
        start: '2025-03-03T09:00:00.000Z',
        status: 'confirmed',
        customerId: 'cus_1',
        staffId: 'stf_2',
      },
      {
        id: 'apt_3b',
        start: '2025-03-03T09:00:00.000Z',
        status: 'confirmed',
        customerId: 'cus_2',
        staffId: 'stf_2',
      },
      {
        id: 'apt_4',
        start: '2025-03-04T09:00:00.000Z',
        status: 'scheduled',
        customerId: 'cus_1',
        staffId: 'stf_1',
      },
      {
        id: 'apt_5',
        start: '2025-03-05T09:00:00.000Z',
        status: 'no_show',
        customerId: 'cus_1',
        staffId: 'stf_2',
        isActive: false,
      },
      { id: 'apt_6', start: '2025-03-06T09:00:00.000Z', status: 'checked_in' },
    ])
    await addAppointments(store, 'org_b', [
      {
        id: 'apt_b1',
        start: '2025-03-02T09:00:00.000Z',
        status: 'completed',
        customerId: 'cus_b',
        staffId: 'stf_b',
      },
    ])
    key = (await createKey(store, orgA)).key
    await createKey(store, orgB)
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  })

  afterAll(async () => {
    await app?.close()
  })

  const get = (query = '') =>
    app.inject({ method: 'GET', url: `/api/public/v1/appointments${query}`, headers: bearer(key) })
  const ids = async (query: string) => {
    const response = await get(query)
    expect(response.statusCode, response.body).toBe(200)
    return response.json().data.map((a: { id: string }) => a.id)
  }

  it('lists active appointments of the key organization, latest start first, id as tie-break', async () => {
    const body = (await get()).json()
    expect(body.data.map((a: { id: string }) => a.id)).toEqual([
      'apt_6',
      'apt_4',
      'apt_3b',
      'apt_3a',
      'apt_2',
      'apt_1',
    ])
    expect(body.pagination).toEqual({ limit: 50, offset: 0, total: 6, hasMore: false })
    for (const appointment of body.data) {
      expect(appointment.orgId).toBe('org_a')
      for (const field of Object.keys(appointment)) expect(APPOINTMENT_FIELDS.has(field), field).toBe(true)
    }
  })

  it('every page matches the strict envelope schema, nullable fields included', async () => {
    for (const query of ['', '?limit=2&offset=1', '?status=completed', '?offset=100']) {
      const result = listEnvelope(appointmentSchema).safeParse((await get(query)).json())
      expect(result.error?.issues, query).toBeUndefined()
    }
  })

  it('shapes an appointment: ISO times, nullable fields null, absent optional fields omitted', async () => {
    const body = (await get()).json()
    const first = body.data.find((a: { id: string }) => a.id === 'apt_1')
    expect(first).toMatchObject({
      id: 'apt_1',
      start: '2025-03-01T09:00:00.000Z',
      end: '2025-03-01T09:30:00.000Z',
      status: 'completed',
      customerId: 'cus_1',
      staffId: 'stf_1',
      priceCents: 4500,
      currency: 'EUR',
      locationType: 'in_person',
      note: 'Window seat',
      amountPaidCents: null,
      paymentKind: null,
      paymentId: null,
      invoiceId: null,
      createdAt: '2025-03-01T09:00:00.000Z',
    })
    const bare = body.data.find((a: { id: string }) => a.id === 'apt_6')
    expect(bare.note).toBeNull()
    for (const field of [
      'customerId',
      'staffId',
      'serviceId',
      'locationType',
      'priceCents',
      'currency',
      'dayKey',
    ]) {
      expect(bare).not.toHaveProperty(field)
    }
  })

  it.each([
    ['status=confirmed', ['apt_3b', 'apt_3a']],
    ['status=no_show', []],
    ['customerId=cus_1', ['apt_4', 'apt_3a', 'apt_1']],
    ['staffId=stf_2', ['apt_3b', 'apt_3a']],
    ['startDate=2025-03-04T09:00:00.000Z', ['apt_6', 'apt_4']],
    ['endDate=2025-03-02T09:00:00Z', ['apt_2', 'apt_1']],
    ['startDate=2025-03-02T09:00:00Z&endDate=2025-03-03T09:00:00Z', ['apt_3b', 'apt_3a', 'apt_2']],
    // An offset in the bound: 11:00+02:00 is 09:00Z.
    ['startDate=2025-03-04T11:00:00%2B02:00', ['apt_6', 'apt_4']],
    ['status=confirmed&customerId=cus_1', ['apt_3a']],
    ['status=completed&staffId=stf_2', []],
    ['customerId=cus_1&staffId=stf_1&startDate=2025-03-02T00:00:00Z', ['apt_4']],
    ['customerId=cus_b', []],
    ['staffId=stf_b', []],
  ])('filters %s (AND, inclusive bounds on start)', async (query, expected) => {
    expect(await ids(`?${query}`)).toEqual(expected)
    const body = (await get(`?${query}&limit=1`)).json()
    expect(body.pagination.total).toBe(expected.length)
    expect(body.pagination.hasMore).toBe(expected.length > 1)
  })

  it('bounds the start time only, not the end', async () => {
    // apt_1 runs 09:00-09:30; a bound at 09:15 excludes it from startDate and includes it in endDate.
    expect(await ids('?startDate=2025-03-01T09:15:00Z&endDate=2025-03-02T00:00:00Z')).toEqual([])
    expect(await ids('?startDate=2025-03-01T00:00:00Z&endDate=2025-03-01T09:15:00Z')).toEqual(['apt_1'])
  })

  it.each([
    'status=done',
    'status=CONFIRMED',
    'status=confirmed&status=completed',
    'startDate=2025-03-01',
    'startDate=2025-03-01T09:00:00',
    'startDate=2025-02-30T09:00:00Z',
    'startDate=2025-13-01T09:00:00Z',
    'startDate=yesterday',
    'endDate=2025-03-01T25:00:00Z',
    'startDate=2025-03-05T00:00:00Z&endDate=2025-03-01T00:00:00Z',
    'customerId=',
    `customerId=${'x'.repeat(129)}`,
    'customerId=a%00b',
    'limit=0',
    'offset=-5',
  ])('rejects %s with 400', async (query) => {
    const response = await get(`?${query}`)
    expect(response.statusCode).toBe(400)
    const body = response.json()
    expect(body.error).toBe('Invalid query parameters')
    expect(body.details.length).toBeGreaterThan(0)
  })

  it('refuses a guessed filter rather than answer the whole list', async () => {
    const response = await get('?updatedSince=2026-01-01T00:00:00Z&status=confirmed')
    expect(response.statusCode).toBe(400)
    expect(response.json().details).toEqual([
      {
        code: 'unrecognized_keys',
        keys: ['updatedSince'],
        path: ['updatedSince'],
        // The paging parameters, then the filters in the order they are described.
        message: `updatedSince is not a parameter of this list, which takes ${['limit', 'offset', ...APPOINTMENT_LIST.filters.map((filter) => filter.param)].join(', ')}`,
      },
    ])
  })

  it('names the parameter and the allowed values for a bad status', async () => {
    const body = (await get('?status=done')).json()
    expect(body.details[0]).toMatchObject({ code: 'invalid_enum_value', path: ['status'] })
    expect(body.details[0].options).toEqual([
      'scheduled',
      'confirmed',
      'checked_in',
      'no_show',
      'cancelled',
      'completed',
    ])
  })

  it('pages filtered results with a stable order', async () => {
    const first = (await get('?customerId=cus_1&limit=2')).json()
    const second = (await get('?customerId=cus_1&limit=2&offset=2')).json()
    expect(first.data.map((a: { id: string }) => a.id)).toEqual(['apt_4', 'apt_3a'])
    expect(first.pagination).toEqual({ limit: 2, offset: 0, total: 3, hasMore: true })
    expect(second.data.map((a: { id: string }) => a.id)).toEqual(['apt_1'])
    expect(second.pagination).toEqual({ limit: 2, offset: 2, total: 3, hasMore: false })
  })
})
