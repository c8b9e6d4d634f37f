import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

interface Parameter {
  name: string
  in: string
  schema: Record<string, unknown>
}

describe('GET /openapi.json', () => {
  let testStore: TestStore
  let app: FastifyInstance
  let key: string
  // biome-ignore lint/suspicious/noExplicitAny: the document is checked field by field below
  let document: any

  beforeAll(async () => {
    testStore = await createTestStore('embedded')
    const org = await createOrg(testStore.store, 'org_doc')
    await addCustomers(testStore.store, org.id, [
      {
        id: 'cus_1',
        createdAt: '2025-01-01T00:00:00.000Z',
        firstName: 'Ada',
        dateOfBirth: '1990-01-02',
        country: 'GB',
      },
      { id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' },
    ])
    await addAppointments(testStore.store, org.id, [
      {
        id: 'apt_1',
        start: '2025-03-01T09:00:00.000Z',
        customerId: 'cus_1',
        priceCents: 100,
        currency: 'EUR',
        dayKey: '2025-03-01',
      },
      {
        id: 'apt_2',
        start: '2025-03-02T09:00:00.000Z',
        status: 'cancelled',
        paymentKind: 'card',
        amountPaidCents: 0,
      },
    ])
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
    const response = await app.inject({ url: '/openapi.json' })
    expect(response.statusCode).toBe(200)
    document = response.json()
  })

  afterAll(async () => {
    await app?.close()
    await testStore?.close()
  })

  it('is a valid OpenAPI 3.1 document, contract version 1.0.0, served without a key', async () => {
    const result = await new Validator().validate(document)
    expect(result.errors).toBeUndefined()
    expect(result.valid).toBe(true)
    expect(document.openapi).toMatch(/^3\.1\./)
    expect(document.info.version).toBe('1.0.0')
  })

  it('declares exactly the public paths with their operation ids and bearer security', () => {
    expect(Object.keys(document.paths).sort()).toEqual([
      '/api/public/v1/appointments',
      '/api/public/v1/customers',
      '/openapi.json',
    ])
    expect(document.paths['/api/public/v1/customers'].get.operationId).toBe('listCustomers')
    expect(document.paths['/api/public/v1/appointments'].get.operationId).toBe('listAppointments')
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
    for (const path of ['/api/public/v1/customers', '/api/public/v1/appointments']) {
      const operation = document.paths[path].get
      expect(operation.security).toEqual([{ bearerAuth: [] }])
      expect(Object.keys(operation.responses).sort()).toEqual(['200', '304', '400', '401', '500', '503'])
      // Conditional pages: the validator on a 200 and a 304, the condition as a header.
      expect(Object.keys(operation.responses['200'].headers)).toEqual(['ETag'])
      expect(operation.responses['304']).toMatchObject({ headers: { ETag: { schema: { type: 'string' } } } })
      expect(operation.responses['304'].content).toBeUndefined()
      expect(operation.parameters).toContainEqual(
        expect.objectContaining({ name: 'If-None-Match', in: 'header', required: false }),
      )
      expect(operation.responses['503'].headers['Retry-After'].schema).toEqual({
        type: 'integer',
        minimum: 1,
      })
      for (const status of ['200', '400', '401', '500', '503']) {
        expect(operation.responses[status].content['application/json'].examples).toBeDefined()
      }
    }
  })

  it('documents every parameter with its bounds, default and enum', () => {
    const params = (path: string): Record<string, Parameter> =>
      Object.fromEntries(
        document.paths[path].get.parameters
          .filter((p: Parameter) => p.in === 'query')
          .map((p: Parameter) => [p.name, p]),
      )
    const customers = params('/api/public/v1/customers')
    expect(Object.keys(customers).sort()).toEqual(['limit', 'offset'])
    expect(customers.limit?.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 50 })
    expect(customers.offset?.schema).toMatchObject({ type: ['integer', 'null'], minimum: 0, default: 0 })
    const appointments = params('/api/public/v1/appointments')
    expect(Object.keys(appointments).sort()).toEqual([
      'customerId',
      'endDate',
      'limit',
      'offset',
      'staffId',
      'startDate',
      'status',
    ])
    expect(appointments.status?.schema.enum).toEqual([
      'scheduled',
      'confirmed',
      'checked_in',
      'no_show',
      'cancelled',
      'completed',
    ])
    expect(appointments.startDate?.schema).toMatchObject({ type: 'string', format: 'date-time' })
    expect(appointments.endDate?.schema).toMatchObject({ type: 'string', format: 'date-time' })
    for (const parameter of Object.values(appointments)) expect(parameter.in).toBe('query')
  })

  it('real responses validate against the documented schemas', async () => {
    const ajv = new Ajv2020.default({ strict: false, allErrors: true })
    addFormats.default(ajv)
    for (const [name, schema] of Object.entries(document.components.schemas))
      ajv.addSchema(schema as object, `#/components/schemas/${name}`)
    const check = (schemaName: string, body: unknown) => {
      const validate = ajv.getSchema(`#/components/schemas/${schemaName}`)
      expect(validate, schemaName).toBeDefined()
      const valid = validate?.(body)
      expect(validate?.errors ?? null, JSON.stringify(body)).toBeNull()
      expect(valid).toBe(true)
    }
    const customers = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    check('CustomerList', customers.json())
    const appointments = await app.inject({ url: '/api/public/v1/appointments', headers: bearer(key) })
    check('AppointmentList', appointments.json())
    expect(appointments.json().data).toHaveLength(2)
    check(
      'Error',
      (await app.inject({ url: '/api/public/v1/customers?limit=0', headers: bearer(key) })).json(),
    )
    check('Error', (await app.inject({ url: '/api/public/v1/customers' })).json())
  })

  it('the examples validate against their own schemas', () => {
    const ajv = new Ajv2020.default({ strict: false })
    addFormats.default(ajv)
    for (const [name, schema] of Object.entries(document.components.schemas))
      ajv.addSchema(schema as object, `#/components/schemas/${name}`)
    for (const path of ['/api/public/v1/customers', '/api/public/v1/appointments']) {
      for (const response of Object.values(document.paths[path].get.responses) as {
        content: Record<string, { schema: { $ref: string }; examples: Record<string, { value: unknown }> }>
      }[]) {
        // A 304 has no body.
        if (response.content === undefined) continue
        const media = response.content['application/json']
        if (!media) throw new Error('no JSON content')
        const validate = ajv.getSchema(media.schema.$ref)
        for (const example of Object.values(media.examples))
          expect(validate?.(example.value), JSON.stringify(validate?.errors)).toBe(true)
      }
    }
  })
})
