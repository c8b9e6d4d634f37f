import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { documentFromUrl, GENERATED_DIR, generateFiles, parameterChecks } from '../scripts/generate.js'
import { QUERY_PARAMETERS } from '../src/generated/api.js'
import {
  APPOINTMENT_STATUSES,
  AuthenticationError,
  type BadRequestError,
  InvalidParametersError,
  Openbook,
} from '../src/index.js'
import { patience } from './helpers/patience.js'
import { startServer, type TestServer } from './helpers/server.js'

let server: TestServer

beforeAll(async () => {
  server = await startServer()
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
})

describe('generated types', () => {
  // Fetched once: generating takes seconds, longer than the server keeps an idle connection open.
  let served: ReturnType<typeof documentFromUrl> | undefined
  const servedDocument = async () => {
    served ??= documentFromUrl(`${server.baseUrl}/openapi.json`)
    return structuredClone(await served)
  }

  it('match the OpenAPI document the running server serves', async () => {
    const document = await servedDocument()
    const files = await generateFiles(document)
    const regenerate = 'npm run build && npm run generate -w @openbook/client, and commit the files'
    expect(Object.keys(files).sort(), `the generated files differ: ${regenerate}`).toEqual(
      readdirSync(GENERATED_DIR).sort(),
    )
    for (const [name, source] of Object.entries(files))
      expect(source, `${name} is out of date: ${regenerate}`).toBe(
        readFileSync(join(GENERATED_DIR, name), 'utf8'),
      )
  })

  it('carry one type of each resource and of the pagination, which the lists reference', () => {
    const source = ['components.ts', 'operations.ts']
      .map((name) => readFileSync(join(GENERATED_DIR, name), 'utf8'))
      .join('')
    for (const field of ['preferredContactMethod?:', 'confirmedAfterPayment?:', 'hasMore:'])
      expect(source.split(field).length - 1, field).toBe(1)
    expect(source).toContain("data: components['schemas']['Customer'][]")
    expect(source).toContain("data: components['schemas']['Appointment'][]")
    expect(source).toContain("pagination: components['schemas']['Pagination']")
  })

  it('notice a change to the document', async () => {
    const document = await servedDocument()
    const schemas = (document.components?.schemas ?? {}) as Record<string, { properties?: object }>
    const customer = schemas.Customer
    if (!customer) throw new Error('no Customer schema')
    customer.properties = { ...customer.properties, loyaltyTier: { type: 'string' } }
    const files = await generateFiles(document)
    expect(files['components.ts']).not.toBe(readFileSync(join(GENERATED_DIR, 'components.ts'), 'utf8'))
    expect(files['parameters.ts']).not.toBe(readFileSync(join(GENERATED_DIR, 'parameters.ts'), 'utf8'))
  })

  it("notice a change to a date-time rule: the checks are copied from the document's x-openbook-checks", async () => {
    const document = await servedDocument()
    const parameters = parameterChecks(document).listAppointments ?? []
    const startDate = parameters.find((parameter) => parameter.name === 'startDate')
    expect(startDate).toEqual(
      QUERY_PARAMETERS.listAppointments.find((parameter) => parameter.name === 'startDate'),
    )
    // The served parameter, changed as a change to the server's rule would change it.
    const paths = (document.paths ?? {}) as Record<string, { get: { parameters: object[] } }>
    const served = paths['/api/public/v1/appointments']?.get
    if (!served) throw new Error('no appointments list in the document')
    const parameter = served.parameters.find((each) => (each as { name?: string }).name === 'startDate') as {
      schema: { 'x-openbook-checks': { pattern: string; message: string }[] }
    }
    const fraction = parameter.schema['x-openbook-checks'].at(-1)
    if (!fraction) throw new Error('startDate publishes no checks')
    fraction.pattern = fraction.pattern.replace('{1,9}', '{1,6}')
    fraction.message = fraction.message.replace('9', '6')
    const files = await generateFiles(document)
    expect(files['parameters.ts']).not.toBe(readFileSync(join(GENERATED_DIR, 'parameters.ts'), 'utf8'))
    expect(files['parameters.ts']).toContain('startDate must have at most 6 fractional-second digits')
  })
})

describe('the client against the server', () => {
  it('lists customers and appointments, typed, with the request id', async () => {
    const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
    const customers = await openbook.customers.list({ limit: 3 })
    expect(customers.data).toHaveLength(3)
    expect(customers.pagination).toMatchObject({ limit: 3, offset: 0, hasMore: true })
    expect(customers.requestId).toMatch(/^req-/)
    const first = customers.data[0]
    expect(first?.isActive).toBe(true)
    const appointments = await openbook.appointments.list({ limit: 2, status: 'completed' })
    for (const appointment of appointments.data) expect(appointment.status).toBe('completed')
  })

  it('gets an AuthenticationError with the server message and request id for an unknown key', async () => {
    const openbook = new Openbook({ apiKey: `svc_test_${'0'.repeat(64)}`, baseUrl: server.baseUrl })
    const error = await openbook.customers.list().catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(AuthenticationError)
    expect(error).toMatchObject({
      status: 401,
      error: 'Unauthorized',
      message: 'Invalid or expired API key',
      code: 'invalid_api_key',
    })
    expect((error as AuthenticationError).requestId).toMatch(/^req-/)
  })

  it(
    'refuses locally exactly what the server refuses, with the same words',
    async () => {
      const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl, retry: false })
      const integer = fc.oneof(
        fc.integer({ min: -3, max: 120 }).map(String),
        fc.constantFrom(
          '',
          'null',
          'abc',
          '1.5',
          '-0',
          '007',
          '+5',
          ' 5',
          '1e3',
          '9'.repeat(400),
          `-${'9'.repeat(400)}`,
        ),
        fc.constantFrom('9007199254740991', '9007199254740992', '100', '101', '0'),
      )
      const id = fc.oneof(
        fc.constantFrom(
          '',
          'cus_1',
          'a'.repeat(128),
          'a'.repeat(129),
          'tab\there',
          'nul\u0000',
          '\u0085x',
          'é ü',
        ),
        fc.string({ maxLength: 6 }),
      )
      const day = fc.constantFrom(
        '2026-01-31',
        '2026-02-29',
        '2024-02-29',
        '2026-02-30',
        '2026-04-31',
        '0000-01-01',
        '1900-02-29',
      )
      const time = fc.constantFrom(
        'T10:00:00',
        't10:00',
        'T23:59:59.123456789',
        'T10:00:00.1234567890',
        'T24:00:00',
        'T10:00:00.5',
      )
      const zone = fc.constantFrom('Z', 'z', '+01:00', '-0530', '+15:59', '+16:00', '-15:60', '', '+1')
      const dateTime = fc.oneof(
        fc.tuple(day, time, zone).map((parts) => parts.join('')),
        fc.constantFrom('yesterday', '2026-01-01', 'tz', '2026-01-01T00:00:00.000Z'),
        fc.string({ maxLength: 8 }),
      )
      const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined, freq: 2 })
      const params = fc.record(
        {
          limit: optional(integer),
          offset: optional(integer),
          status: optional(
            fc.oneof(fc.constantFrom(...APPOINTMENT_STATUSES), fc.constantFrom('done', 'Confirmed', '')),
          ),
          customerId: optional(id),
          staffId: optional(id),
          startDate: optional(dateTime),
          endDate: optional(dateTime),
        },
        { requiredKeys: [] },
      )
      await fc.assert(
        fc.asyncProperty(params, fc.boolean(), async (query, customers) => {
          const wire = customers ? { limit: query.limit, offset: query.offset } : query
          const defined = Object.fromEntries(Object.entries(wire).filter(([, value]) => value !== undefined))
          const path = customers ? 'customers' : 'appointments'
          const response = await fetch(
            `${server.baseUrl}/api/public/v1/${path}?${new URLSearchParams(defined as Record<string, string>)}`,
            { headers: { authorization: `Bearer ${server.key}` } },
          )
          const body = (await response.json()) as { message?: string; details?: unknown }
          const local = await (customers
            ? openbook.customers.list(defined as never)
            : openbook.appointments.list(defined as never)
          )
            .then(() => undefined)
            .catch((error: unknown) => error)
          if (response.status === 200) {
            expect(local).toBeUndefined()
          } else {
            expect(response.status).toBe(400)
            expect(local).toBeInstanceOf(InvalidParametersError)
            expect((local as BadRequestError).message).toBe(body.message)
            expect((local as BadRequestError).details).toEqual(body.details)
          }
        }),
        { numRuns: 300 },
      )
    },
    patience(120_000),
  )
})
