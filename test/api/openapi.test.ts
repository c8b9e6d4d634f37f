import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FIELD_RULES } from '../../src/schemas/field-rules.js'
import { APPOINTMENT_LIST, filterValues } from '../../src/schemas/filters.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

interface Parameter {
  name: string
  in: string
  required?: boolean
  schema: Record<string, unknown>
}

const run = promisify(execFile)
const BIN = join(process.cwd(), 'node_modules/.bin')
/** No network, no notices: both tools run offline (their rulesets ship with them). */
const OFFLINE = {
  ...process.env,
  REDOCLY_TELEMETRY: 'off',
  REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
  NO_COLOR: '1',
}

/** Redocly's `recommended` ruleset: its warnings and errors, as `rule at pointer: message`. */
async function redoclyProblems(file: string): Promise<string[]> {
  const { stdout } = await run(
    join(BIN, 'redocly'),
    ['lint', '--extends', 'recommended', '--format', 'json', file],
    {
      env: OFFLINE,
    },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }))
  const report = JSON.parse(stdout) as {
    problems: { ruleId: string; message: string; location: { pointer: string }[] }[]
  }
  return report.problems.map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)
}

/** Spectral's `spectral:oas` ruleset: every result, warnings and hints included. */
async function spectralProblems(file: string, directory: string): Promise<string[]> {
  const ruleset = join(directory, '.spectral.yaml')
  writeFileSync(ruleset, 'extends: ["spectral:oas"]\n')
  const { stdout } = await run(
    join(BIN, 'spectral'),
    ['lint', '--ruleset', ruleset, '--format', 'json', '--quiet', file],
    {
      env: OFFLINE,
    },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }))
  const results = JSON.parse(stdout || '[]') as { code: string; message: string; path: string[] }[]
  return results.map((r) => `${r.code} at ${r.path.join('.')}: ${r.message}`)
}

/** Resolves a local `$ref` of the document. */
// biome-ignore lint/suspicious/noExplicitAny: a JSON document walked by pointer
function resolved(document: any, node: any): any {
  if (!node?.$ref) return node
  return (node.$ref as string)
    .slice(2)
    .split('/')
    .reduce((at, key) => at[key], document)
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
      expect(Object.keys(operation.responses).sort()).toEqual([
        '200',
        '304',
        '400',
        '401',
        '404',
        '405',
        '413',
        '431',
        '500',
        '503',
      ])
      // HEAD is served by the same handler: declared with the same parameters and statuses.
      const head = document.paths[path].head
      expect(head.operationId).toBe(
        `head${operation.operationId[0].toUpperCase()}${operation.operationId.slice(1)}`,
      )
      expect(head.parameters).toEqual(operation.parameters)
      expect(Object.keys(head.responses).sort()).toEqual(Object.keys(operation.responses).sort())
      expect(head.responses['200'].content).toBeUndefined()
      expect(resolved(document, operation.responses['405']).headers.Allow).toBeDefined()
      const response = (status: string) => resolved(document, operation.responses[status])
      // Conditional pages: the validator on a 200 and a 304, the condition as a header.
      expect(resolved(document, response('304').headers.ETag).schema.type).toBe('string')
      expect(response('304').content).toBeUndefined()
      expect(operation.parameters.map((p: Parameter) => resolved(document, p))).toContainEqual(
        expect.objectContaining({ name: 'If-None-Match', in: 'header', required: false }),
      )
      expect(resolved(document, response('503').headers['Retry-After']).schema).toEqual({
        type: 'integer',
        minimum: 1,
      })
      for (const status of ['200', '400', '401', '500', '503']) {
        expect(response(status).content['application/json'].examples).toBeDefined()
        expect(resolved(document, response(status).headers['X-Request-Id']).schema.type).toBe('string')
      }
      expect(Object.keys(response('200').headers).sort()).toEqual([
        'ETag',
        'Openbook-Key-Expires',
        'Openbook-Organization',
        'X-Request-Id',
      ])
      expect(Object.keys(response('304').headers).sort()).toContain('Openbook-Organization')
    }
  })

  const params = (path: string): Record<string, Parameter> =>
    Object.fromEntries(
      document.paths[path].get.parameters
        .map((p: Parameter) => resolved(document, p))
        .filter((p: Parameter) => p.in === 'query')
        .map((p: Parameter) => [p.name, p]),
    )

  // The contract (public-api-v1) names each list's parameters: written here from it, not from the
  // descriptions the document is made of, so that a filter added to filters.ts fails here until
  // the contract names it too.
  it('documents the parameters the contract names, with their bounds, default and enum', () => {
    const customers = params('/api/public/v1/customers')
    expect(Object.keys(customers).sort()).toEqual(['limit', 'offset'])
    expect(customers.limit?.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 50 })
    expect(customers.offset?.schema).toMatchObject({ type: ['integer', 'null'], minimum: 0, default: 0 })
    const appointments = params('/api/public/v1/appointments')
    expect(
      Object.keys(appointments).sort(),
      "listAppointments takes the contract's parameters: a filter of src/schemas/filters.ts the contract does not name is a change of the contract; name it there first, then here",
    ).toEqual(['customerId', 'endDate', 'limit', 'offset', 'staffId', 'startDate', 'status'])
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

  it.each(APPOINTMENT_LIST.filters.map((filter) => [filter.param, filter] as const))(
    "documents the filter %s as its description in filters.ts says: optional, in the query, of its field's type",
    (param, filter) => {
      const parameter = params('/api/public/v1/appointments')[param]
      expect(
        parameter,
        `${param} (src/schemas/filters.ts) is not a parameter of the served document`,
      ).toBeDefined()
      expect(parameter?.in).toBe('query')
      expect(parameter?.required ?? false).toBe(false)
      const values = filterValues(APPOINTMENT_LIST, filter)
      const id = FIELD_RULES.id
      const expected =
        filter.compare !== 'equals'
          ? { type: 'string', format: 'date-time' }
          : values
            ? { type: 'string', enum: [...values] }
            : { type: 'string', minLength: id.minLength, maxLength: id.maxLength }
      expect(parameter?.schema).toMatchObject(expected)
    },
  )

  it('real responses validate against the documented schemas', async () => {
    const ajv = new Ajv2020.default({ strict: false, allErrors: true })
    addFormats.default(ajv)
    ajv.addSchema({ $id: 'openapi.json', components: document.components })
    const check = (schemaName: string, body: unknown) => {
      const validate = ajv.getSchema(`openapi.json#/components/schemas/${schemaName}`)
      expect(validate, schemaName).toBeDefined()
      const valid = validate?.(body)
      expect(validate?.errors ?? null, JSON.stringify(body)).toBeNull()
      expect(valid).toBe(true)
    }
    const customers = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    check('CustomerList', customers.json())
    // The key's organization, named on a page and on a 304 (declared above).
    expect(customers.headers['openbook-organization']).toBe('org_doc')
    const notModified = await app.inject({
      url: '/api/public/v1/customers',
      headers: { ...bearer(key), 'if-none-match': String(customers.headers.etag) },
    })
    expect(notModified.statusCode).toBe(304)
    expect(notModified.headers['openbook-organization']).toBe('org_doc')
    const appointments = await app.inject({ url: '/api/public/v1/appointments', headers: bearer(key) })
    check('AppointmentList', appointments.json())
    expect(appointments.json().data).toHaveLength(2)
    check(
      'ValidationError',
      (await app.inject({ url: '/api/public/v1/customers?limit=0', headers: bearer(key) })).json(),
    )
    check('Error', (await app.inject({ url: '/api/public/v1/customers' })).json())
    check(
      'Error',
      (
        await app.inject({ url: '/api/public/v1/customers', headers: bearer(`svc_test_${'ab'.repeat(32)}`) })
      ).json(),
    )
  })

  it('leaves every body open to fields added within v1: no schema says additionalProperties false', () => {
    const closed: string[] = []
    const walk = (node: unknown, at: string) => {
      if (node === null || typeof node !== 'object') return
      for (const [key, value] of Object.entries(node)) {
        if (key === 'additionalProperties' && value === false) closed.push(at)
        walk(value, `${at}/${key}`)
      }
    }
    walk(document, '#')
    expect(closed).toEqual([])
    // A page with a field the document does not know still validates.
    const ajv = new Ajv2020.default({ strict: false })
    addFormats.default(ajv)
    ajv.addSchema({ $id: 'openapi.json', components: document.components })
    const page = ajv.getSchema('openapi.json#/components/schemas/CustomerList')
    const customer = { id: 'c', isActive: true, createdAt: '2025-01-01T00:00:00.000Z' }
    const item = { ...customer, updatedAt: customer.createdAt, loyaltyTier: 'gold' }
    const pagination = { limit: 1, offset: 0, total: 1, hasMore: false, cursor: null }
    expect(page?.({ data: [item], pagination, meta: {} }), JSON.stringify(page?.errors)).toBe(true)
  })

  it('real items carry only declared fields, every required one, and a minimal row exactly the required ones', async () => {
    for (const [list, name, minimal] of [
      ['customers', 'Customer', 'cus_2'],
      ['appointments', 'Appointment', 'apt_2'],
    ] as const) {
      const schema = document.components.schemas[name]
      const declared = Object.keys(schema.properties)
      const items = (await app.inject({ url: `/api/public/v1/${list}`, headers: bearer(key) })).json()
        .data as Record<string, unknown>[]
      for (const item of items) {
        expect(declared).toEqual(expect.arrayContaining(Object.keys(item)))
        expect(Object.keys(item)).toEqual(expect.arrayContaining(schema.required))
      }
      // The row with every optional column empty: what it carries is always sent, so required.
      const row = items.find((item) => item.id === minimal)
      expect(Object.keys(row ?? {}).sort()).toEqual([...schema.required].sort())
    }
  })

  it('the statuses every path answers: 404, 405 with Allow, 413 and 431 in the Error shape; HEAD without a body', async () => {
    const ajv = new Ajv2020.default({ strict: false })
    addFormats.default(ajv)
    ajv.addSchema({ $id: 'openapi.json', components: document.components })
    const error = ajv.getSchema('openapi.json#/components/schemas/Error')
    const operation = document.paths['/api/public/v1/customers'].get
    const declared = (status: number) => resolved(document, operation.responses[String(status)])
    const answers = [
      await app.inject({ url: '/api/public/v1/customer', headers: bearer(key) }),
      await app.inject({ method: 'POST', url: '/api/public/v1/customers', headers: bearer(key) }),
      await app.inject({
        url: '/api/public/v1/customers',
        headers: { ...bearer(key), 'transfer-encoding': 'chunked' },
        payload: 'x',
      }),
    ]
    expect(answers.map((answer) => answer.statusCode)).toEqual([404, 405, 413])
    for (const answer of answers) {
      expect(error?.(answer.json()), answer.body).toBe(true)
      expect(declared(answer.statusCode).content['application/json'].examples).toBeDefined()
      expect(answer.json().code).toBe(
        Object.values(
          declared(answer.statusCode).content['application/json'].examples as Record<
            string,
            { value: { code: string } }
          >,
        )[0]?.value.code,
      )
    }
    expect(answers[1]?.headers.allow).toBe('GET, HEAD')
    const get = await app.inject({ url: '/api/public/v1/customers', headers: bearer(key) })
    const head = await app.inject({ method: 'HEAD', url: '/api/public/v1/customers', headers: bearer(key) })
    expect(head.statusCode).toBe(200)
    expect(head.body).toBe('')
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(get.body)))
    expect(
      resolved(document, operation.responses['431']).content['application/json'].examples.headers.value.code,
    ).toBe('header_too_large')
  })

  it('the examples validate against their own schemas', () => {
    const ajv = new Ajv2020.default({ strict: false })
    addFormats.default(ajv)
    ajv.addSchema({ $id: 'openapi.json', components: document.components })
    for (const path of ['/api/public/v1/customers', '/api/public/v1/appointments']) {
      for (const response of Object.values(document.paths[path].get.responses).map((r) =>
        resolved(document, r),
      ) as {
        content: Record<string, { schema: { $ref: string }; examples: Record<string, { value: unknown }> }>
      }[]) {
        // A 304 has no body.
        if (response.content === undefined) continue
        const media = response.content['application/json']
        if (!media) throw new Error('no JSON content')
        const validate = ajv.getSchema(`openapi.json${media.schema.$ref}`)
        expect(validate, media.schema.$ref).toBeDefined()
        for (const example of Object.values(media.examples))
          expect(validate?.(example.value), JSON.stringify(validate?.errors)).toBe(true)
      }
    }
  })
  it('names Customer, Appointment, Pagination and the errors once, and every list uses them by $ref', () => {
    const schemas = document.components.schemas
    for (const name of ['Customer', 'Appointment', 'Pagination', 'Error', 'ErrorCode', 'ValidationError'])
      expect(schemas[name], name).toBeDefined()
    for (const item of ['Customer', 'Appointment']) {
      expect(schemas[`${item}List`].properties.data.items).toEqual({ $ref: `#/components/schemas/${item}` })
      expect(schemas[`${item}List`].properties.pagination).toEqual({
        $ref: '#/components/schemas/Pagination',
      })
    }
    // No inline copy of a resource anywhere else in the document.
    const text = JSON.stringify({ ...document, components: { ...document.components, schemas: {} } })
    expect(text).not.toContain('"preferredContactMethod":{')
    expect(text).not.toContain('"hasMore":{')
  })

  it('declares the rules a client needs: X-Request-Id, Retry-After, key expiry, every error code, the client guidance', () => {
    const { headers, schemas } = document.components
    expect(Object.keys(headers).sort()).toEqual([
      'Allow',
      'ETag',
      'Openbook-Key-Expires',
      'Openbook-Organization',
      'Retry-After',
      'WWW-Authenticate',
      'X-Request-Id',
    ])
    expect(schemas.ErrorCode.enum.sort()).toEqual([
      'bad_request',
      'expired_api_key',
      'header_too_large',
      'internal_error',
      'invalid_api_key',
      'invalid_query',
      'method_not_allowed',
      'missing_api_key',
      'not_found',
      'overloaded',
      'payload_too_large',
      'revoked_api_key',
      'service_unavailable',
      'unsupported_media_type',
    ])
    for (const code of schemas.ErrorCode.enum) expect(document.info.description).toContain(`\`${code}\``)
    expect(document.info.description).toMatch(/two requests in flight per key/)
    expect(document.info.description).toMatch(/Idempotency/)
    expect(document.info.description).toMatch(/backoff/)
    // Using the API well: conditional requests, and new fields within v1.
    expect(document.info.description).toMatch(/`ETag`.*`If-None-Match`.*304/)
    expect(document.info.description).toMatch(/ignore fields you do not know/)
    expect(document.info.contact.email).toBeDefined()
    expect(document.info.license.name).toBeDefined()
    const contract = document.paths['/openapi.json'].get
    expect(contract.description).toBeTruthy()
    expect(Object.keys(contract.responses).some((status) => status.startsWith('4'))).toBe(true)
  })

  it("passes Redocly's recommended rules and Spectral's spectral:oas with no warning at all", async () => {
    const directory = mkdtempSync(join(tmpdir(), 'openbook-openapi-lint-'))
    try {
      const served = join(directory, 'openapi.json')
      writeFileSync(served, JSON.stringify(document))
      // The tools find what they are meant to find: a copy without contact, and whose /openapi.json
      // has no 4xx (so the BadRequest response goes unused), warns.
      const broken = join(directory, 'broken.json')
      const { contact: _contact, ...info } = document.info
      const copy = structuredClone({ ...document, info })
      for (const method of ['get', 'head']) {
        const { responses } = copy.paths['/openapi.json'][method]
        for (const status of Object.keys(responses)) if (status.startsWith('4')) delete responses[status]
      }
      writeFileSync(broken, JSON.stringify(copy))
      const [redocly, spectral, redoclyBroken, spectralBroken] = await Promise.all([
        redoclyProblems(served),
        spectralProblems(served, directory),
        redoclyProblems(broken),
        spectralProblems(broken, directory),
      ])
      expect(redocly).toEqual([])
      expect(spectral).toEqual([])
      expect(redoclyBroken.some((problem) => problem.startsWith('operation-4xx-response'))).toBe(true)
      expect(spectralBroken.some((problem) => problem.startsWith('info-contact'))).toBe(true)
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  }, 60_000)
})
