import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'
import { seedTenants, type Tenant } from './tenants.js'

const RUNS = Number(process.env.SECURITY_FC_RUNS ?? 300)
const SEED = Number(process.env.SECURITY_FC_SEED ?? Date.now() % 2_147_483_647)

const REQUIRED = { error: 'Unauthorized', message: 'API key required in Authorization header' }
const INVALID = { error: 'Unauthorized', message: 'Invalid or expired API key' }

interface Parameter {
  name: string
  in: string
  schema: { type?: string | string[]; enum?: string[]; minimum?: number; maximum?: number; format?: string }
}
interface OpenApiResponse {
  content?: { 'application/json'?: { schema?: { $ref?: string } } }
}
interface OpenApiDocument {
  paths: Record<string, { get?: { parameters?: Parameter[]; responses: Record<string, OpenApiResponse> } }>
  components: { schemas: Record<string, object> }
}

// ---- value generators: from the documented parameter schema, and far outside it ----

const hostileFragments = [
  "' OR '1'='1",
  "'; DROP TABLE customers; --",
  '1; SELECT pg_sleep(5)',
  '$1',
  '\\',
  '%',
  '%00',
  '%ZZ',
  '%E0%A4%A',
  '{"$gt":""}',
  '[]',
  '{}',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-Infinity',
  'true',
  '__proto__',
  'constructor',
  '1e309',
  '0x10',
  '0b1',
  ' 1',
  '1 ',
  '+1',
  '-0',
  '1.0',
  '1.5',
  '01',
  '９',
  '٣',
  '2024-02-30T00:00:00Z',
  '2024-13-01T00:00:00Z',
  '2024-01-01',
  '2024-01-01T00:00:00',
  '275760-09-13T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '2024-01-01T25:00:00Z',
  '2024-01-01T00:00:00+99:00',
  '\u0000',
  '\u0007',
  '\n',
  '\r\n',
  '\u202e',
  '\ud800',
  '😀',
  'ｓｃｈｅｄｕｌｅｄ',
  'SCHEDULED',
  'scheduled ',
]

const numbersAround = [
  -1,
  0,
  1,
  2,
  50,
  99,
  100,
  101,
  1000,
  2 ** 31,
  2 ** 31 + 1,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 1,
  2 ** 63,
  1e21,
].map(String)

const pad = (n: number, width = 2) => String(n).padStart(width, '0')

/**
 * RFC 3339 date-times in every shape the format allows (any year, fractions, offsets up to ±23:59,
 * with or without the colon), each field now and then at or just past its bound.
 */
/** Mostly values in range, now and then one at or just past the bound. */
const edge = <T>(inRange: fc.Arbitrary<T>, bounds: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 6, arbitrary: inRange }, { weight: 1, arbitrary: bounds })

const rfc3339DateTime: fc.Arbitrary<string> = fc
  .record({
    year: edge(fc.integer({ min: 1, max: 9999 }), fc.constantFrom(0, 1, 1970, 9999)),
    month: edge(fc.integer({ min: 1, max: 12 }), fc.constantFrom(0, 13)),
    day: edge(fc.integer({ min: 1, max: 28 }), fc.constantFrom(0, 29, 30, 31, 32)),
    hour: edge(fc.integer({ min: 0, max: 23 }), fc.constant(24)),
    minute: edge(fc.integer({ min: 0, max: 59 }), fc.constant(60)),
    second: edge(fc.integer({ min: 0, max: 59 }), fc.constant(60)),
    fraction: fc.option(fc.stringMatching(/^[0-9]{1,12}$/), { nil: undefined }),
    offset: fc.oneof(
      fc.constant('Z'),
      fc
        .record({
          sign: fc.constantFrom('+', '-'),
          hours: edge(fc.integer({ min: 0, max: 23 }), fc.constantFrom(14, 15, 16, 24, 99)),
          minutes: edge(fc.integer({ min: 0, max: 59 }), fc.constant(60)),
          colon: fc.boolean(),
        })
        .map(({ sign, hours, minutes, colon }) => `${sign}${pad(hours)}${colon ? ':' : ''}${pad(minutes)}`),
    ),
  })
  .map(
    (d) =>
      `${pad(d.year, 4)}-${pad(d.month)}-${pad(d.day)}T${pad(d.hour)}:${pad(d.minute)}:${pad(d.second)}` +
      `${d.fraction === undefined ? '' : `.${d.fraction}`}${d.offset}`,
  )

function documentedValue(parameter: Parameter): fc.Arbitrary<string> {
  const { schema } = parameter
  const types = Array.isArray(schema.type) ? schema.type : [schema.type]
  if (schema.enum) return fc.constantFrom(...schema.enum)
  if (types.includes('integer')) {
    const min = schema.minimum ?? 0
    const max = Math.min(schema.maximum ?? 1_000_000, 1_000_000)
    return fc.oneof(
      fc.integer({ min, max }).map(String),
      fc.constantFrom(String(min), String(schema.maximum ?? max)),
    )
  }
  if (schema.format === 'date-time')
    return fc.oneof(
      { weight: 1, arbitrary: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()) },
      { weight: 3, arbitrary: rfc3339DateTime },
    )
  return fc.string({ minLength: 1, maxLength: 128, unit: 'grapheme' })
}

const outsideValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...hostileFragments, ...numbersAround),
  fc.string({ maxLength: 40, unit: 'binary' }),
  fc.string({ maxLength: 40, unit: 'grapheme-composite' }),
  fc.integer({ min: 130, max: 20_000 }).map((n) => 'x'.repeat(n)),
  fc.stringMatching(/^[0-9]{17,40}$/),
  fc.double().map(String),
  fc.bigInt().map(String),
)

/** Percent-encodes the UTF-8 bytes (lone surrogates become U+FFFD, as a browser would send them). */
const pct = (v: string) =>
  [...Buffer.from(v, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')

/** Encodes a value, or leaves it raw (raw `%`, `&`, `=` and friends reach the query parser as sent). */
const encoded = (value: fc.Arbitrary<string>) =>
  fc
    .tuple(value, fc.boolean())
    .map(([v, raw]) => (raw ? v.replace(/[^\x21-\x7e]|#/g, pct) : v.replace(/[^A-Za-z0-9_.~-]/g, pct)))

function queryArbitrary(parameters: readonly Parameter[]): fc.Arbitrary<string> {
  const names = parameters.map((p) => p.name)
  const documented = fc.oneof(
    ...parameters.map((p) =>
      fc.tuple(
        fc.constant(p.name),
        encoded(fc.oneof({ weight: 3, arbitrary: documentedValue(p) }, outsideValue)),
      ),
    ),
  )
  const foreignName = fc.tuple(
    encoded(
      fc.oneof(
        fc.constantFrom(
          ...names.map((n) => `${n}[]`),
          ...names.map((n) => `${n}[0]`),
          'orgId',
          'org_id',
          '__proto__',
        ),
        fc.string({ maxLength: 20 }),
      ),
    ),
    encoded(outsideValue),
  )
  const pair = fc.oneof({ weight: 4, arbitrary: documented }, { weight: 1, arbitrary: foreignName })
  return fc.oneof(
    { weight: 2, arbitrary: wellFormedQuery(parameters) },
    { weight: 3, arbitrary: fc.array(pair, { maxLength: 8 }).map(joinPairs) },
  )
}

const joinPairs = (pairs: readonly (readonly [string, string])[]) =>
  pairs.map(([k, v]) => `${k}=${v}`).join('&')

/**
 * Queries the document allows: each parameter at most once, with a value of its schema (in-format
 * edge values included), so that unusual but valid values reach the database.
 */
function wellFormedQuery(parameters: readonly Parameter[], minLength = 0): fc.Arbitrary<string> {
  return fc
    .subarray([...parameters], { minLength })
    .chain((chosen) =>
      fc.tuple(...chosen.map((p) => fc.tuple(fc.constant(p.name), encoded(documentedValue(p))))),
    )
    .map(joinPairs)
}

// ---- the contract the responses are checked against ----

/**
 * The document with each operation's parameters and responses taken from their components in
 * place of the `$ref`s that name them (the schemas stay referenced: the validators resolve them),
 * and only the query parameters: the ones a query string carries.
 */
function withComponentsInPlace(document: OpenApiDocument): OpenApiDocument {
  const components = document.components as Record<string, Record<string, unknown>>
  const inPlace = <T>(value: T | { $ref: string }): T => {
    const ref = (value as { $ref?: string }).$ref
    if (!ref) return value as T
    const [, kind = '', name = ''] = /^#\/components\/(\w+)\/(.+)$/.exec(ref) ?? []
    return components[kind]?.[name] as T
  }
  const paths = Object.fromEntries(
    Object.entries(document.paths).map(([path, item]) => {
      const get = item.get
      if (!get) return [path, item]
      return [
        path,
        {
          get: {
            parameters: get.parameters?.map(inPlace).filter((parameter) => parameter.in === 'query'),
            responses: Object.fromEntries(
              Object.entries(get.responses).map(([status, response]) => [status, inPlace(response)]),
            ),
          },
        },
      ]
    }),
  )
  return { ...document, paths }
}

function validators(document: OpenApiDocument) {
  const ajv = new Ajv2020.default({ strict: false, allErrors: true })
  addFormats.default(ajv)
  // The schemas refer to one another (`#/components/schemas/…`): resolved within the document.
  ajv.addSchema({ $id: 'openapi.json', components: document.components })
  const compiled = new Map<string, ValidateFunction>()
  for (const name of Object.keys(document.components.schemas)) {
    const validate = ajv.getSchema(`openapi.json#/components/schemas/${name}`)
    if (!validate) throw new Error(`no schema ${name}`)
    compiled.set(name, validate)
  }
  return (name: string) => {
    const validate = compiled.get(name)
    if (!validate) throw new Error(`no schema ${name} in the OpenAPI document`)
    return validate
  }
}

/**
 * The validator of the JSON body the document declares for `status` on `path`, or undefined when
 * the document declares no such response for that route.
 */
function responseValidator(
  document: OpenApiDocument,
  schemaOf: ReturnType<typeof validators>,
  path: string,
  status: number,
): ValidateFunction | undefined {
  const response = document.paths[path]?.get?.responses[String(status)]
  const ref = response?.content?.['application/json']?.schema?.$ref
  if (!ref) return undefined
  const name = /^#\/components\/schemas\/(\w+)$/.exec(ref)?.[1]
  if (!name) throw new Error(`unexpected $ref ${ref}`)
  return schemaOf(name)
}

describeEachStore('hostile input on %s', (testStore) => {
  const { kind } = testStore
  let store: Store
  let app: FastifyInstance
  let tenant: Tenant
  let document: OpenApiDocument
  let schemaOf: ReturnType<typeof validators>

  beforeAll(async () => {
    store = testStore.store
    ;[tenant] = (await seedTenants(store, ['org_h1'])) as [Tenant]
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
    const response = await app.inject({ method: 'GET', url: '/openapi.json' })
    document = withComponentsInPlace(response.json<OpenApiDocument>())
    schemaOf = validators(document)
  })

  afterAll(async () => {
    await app?.close()
  })

  it('property: generated query strings give only documented statuses and bodies, never 5xx', async () => {
    const listPaths = Object.keys(document.paths).filter((p) => p.startsWith('/api/public/v1/'))
    expect(listPaths.length).toBe(2)
    let runs = 0
    let violations = 0
    let serverErrors = 0
    const problems: string[] = []
    const statuses: Record<number, number> = {}
    try {
      type Auth = 'valid' | 'none' | 'unknown'
      const anyAuth = fc.constantFrom<Auth>('valid', 'valid', 'valid', 'none', 'unknown')
      // Per route: the whole query space with any key; then, where the route has date-time
      // parameters, well-formed date filters with a valid key, so that they reach the database.
      const campaigns = listPaths.flatMap((path) => {
        const operation = document.paths[path]?.get
        const parameters = operation?.parameters ?? []
        // The statuses the document declares for this route; 5xx among them are still never expected.
        expect(Object.keys(operation?.responses ?? {}).sort()).toEqual([
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
        expect(parameters.length).toBeGreaterThan(0)
        const dates = parameters.filter((p) => p.schema.format === 'date-time')
        return [
          { path, query: queryArbitrary(parameters), auth: anyAuth, numRuns: RUNS },
          ...(dates.length === 0
            ? []
            : [
                {
                  path,
                  query: wellFormedQuery(dates, 1),
                  auth: fc.constant<Auth>('valid'),
                  numRuns: Math.ceil(RUNS / 2),
                },
              ]),
        ]
      })
      expect(campaigns).toHaveLength(3)
      for (const { path, query: queryArb, auth: authArb, numRuns } of campaigns) {
        await fc.assert(
          fc.asyncProperty(queryArb, authArb, async (query, auth) => {
            runs++
            const headers =
              auth === 'valid'
                ? bearer(tenant.key)
                : auth === 'unknown'
                  ? bearer(`svc_live_${'0'.repeat(64)}`)
                  : {}
            const url = `${path}?${query}`
            const response = await app.inject({ method: 'GET', url, headers })
            const status = response.statusCode
            statuses[status] = (statuses[status] ?? 0) + 1
            if (status >= 500) serverErrors++
            const allowed = auth === 'valid' ? [200, 400] : [401]
            let body: unknown
            try {
              body = response.json()
            } catch {
              body = undefined
            }
            // The schema comes from the served document's response for this route and status.
            const validate = responseValidator(document, schemaOf, path, status)
            const ok =
              allowed.includes(status) &&
              validate !== undefined &&
              body !== undefined &&
              validate(body) &&
              String(response.headers['content-type']).startsWith('application/json') &&
              (status !== 400 || (body as { error: string }).error === 'Invalid query parameters') &&
              (status !== 401 ||
                (body as { message: string }).message === (auth === 'none' ? REQUIRED : INVALID).message) &&
              (status !== 200 ||
                (body as { data: { orgId?: string }[] }).data.every(
                  (a) => a.orgId === undefined || a.orgId === tenant.id,
                ))
            if (!ok) {
              violations++
              if (problems.length < 5)
                problems.push(
                  `${status} ${url.slice(0, 300)} ${response.body.slice(0, 300)} ${JSON.stringify(validate?.errors)}`,
                )
            }
            return ok
          }),
          { numRuns, seed: SEED, endOnFailure: true },
        )
      }
    } finally {
      // Printed even when the property fails, so the figures always show in the test output.
      console.log(
        `[hostile ${kind}] runs ${runs}, seed ${SEED}, contract violations ${violations}, 5xx ${serverErrors}`,
        `(statuses ${JSON.stringify(statuses)})`,
      )
    }
    expect(problems).toEqual([])
    expect(violations).toBe(0)
    expect(serverErrors).toBe(0)
    expect(runs).toBe(2 * RUNS + Math.ceil(RUNS / 2))
    // Both accepted and refused queries were generated, so the property covered both paths.
    expect(statuses[200] ?? 0).toBeGreaterThan(RUNS / 10)
    expect(statuses[400] ?? 0).toBeGreaterThan(RUNS / 10)
    expect(statuses[401] ?? 0).toBeGreaterThan(0)
  })

  it.each([
    ['huge repeated limit', `limit=${'1&limit='.repeat(2000)}1`],
    [
      'every parameter repeated',
      'status=scheduled&status=confirmed&customerId=a&customerId=b&offset=1&offset=2',
    ],
    ['array syntax', 'limit[]=1&status[]=scheduled&customerId[$ne]=x'],
    ['NUL in an id', 'customerId=cus%00x'],
    ['raw control characters', 'customerId=%01%02%1F%7F'],
    ['invalid percent-encoding', 'customerId=%E0%A4%A&staffId=%ZZ'],
    ['SQL fragment', `customerId=${encodeURIComponent("x' OR 1=1 --")}`],
    ['limit past bounds', 'limit=101'],
    ['offset past safe integer', `offset=${2 ** 53}`],
    ['offset of 40 digits', `offset=${'9'.repeat(40)}`],
    ['date past year 9999', 'startDate=+275760-09-13T00:00:00Z'],
    ['offset of 16 hours', `startDate=${encodeURIComponent('2024-01-01T00:00:00+16:00')}`],
    ['offset of 23:59 on the last day', `endDate=${encodeURIComponent('9999-12-31T23:59:59-23:59')}`],
    ['offset of 99 hours', `startDate=${encodeURIComponent('2024-01-01T00:00:00+99:00')}`],
    ['140 fractional-second digits in startDate', `startDate=2025-01-01T00:00:00.${'1'.repeat(140)}Z`],
    ['140 fractional-second digits in endDate', `endDate=2025-01-01T00:00:00.${'9'.repeat(140)}Z`],
    ['lower-case t and z', 'startDate=2024-01-01t00:00:00.5z&endDate=2025-01-01t00:00:00z'],
    [
      'nine fractional digits in the last second, past UTC year 9999',
      `startDate=${encodeURIComponent('9999-12-31T23:59:59.999999999-15:59')}`,
    ],
    ['200 KB of query', `customerId=${'a'.repeat(200_000)}`],
  ])('%s: 200 or 400 in the documented shape', async (_label, query) => {
    const path = '/api/public/v1/appointments'
    const response = await app.inject({
      method: 'GET',
      url: `${path}?${query}`,
      headers: bearer(tenant.key),
    })
    expect([200, 400]).toContain(response.statusCode)
    const body = response.json()
    const validate = responseValidator(document, schemaOf, path, response.statusCode)
    expect(validate?.(body), JSON.stringify(validate?.errors)).toBe(true)
  })

  it('known values at the bounds: limit 1 and 100 are 200, 0 and 101 are 400, with the same key', async () => {
    const status = async (query: string) =>
      (
        await app.inject({
          method: 'GET',
          url: `/api/public/v1/customers?${query}`,
          headers: bearer(tenant.key),
        })
      ).statusCode
    expect(await status('limit=1')).toBe(200)
    expect(await status('limit=100')).toBe(200)
    expect(await status('limit=0')).toBe(400)
    expect(await status('limit=101')).toBe(400)
    expect(await status('offset=-1')).toBe(400)
    expect(await status(`offset=${Number.MAX_SAFE_INTEGER}`)).toBe(200)
  })
})

describeEachStore('Authorization edge cases on %s', (testStore) => {
  const { kind } = testStore
  let store: Store
  let app: FastifyInstance
  let key: string
  let keyId: string
  let liveKey: string

  beforeAll(async () => {
    store = testStore.store
    const org = await createOrg(store, 'org_auth')
    ;({ key, id: keyId } = await createKey(store, org, 'test'))
    ;({ key: liveKey } = await createKey(store, org, 'live'))
    ;({ app } = await buildTestApp(store, { logLevel: 'silent' }))
  })
  afterAll(async () => {
    await app?.close()
  })

  const get = (authorization: string | undefined) =>
    app.inject({
      method: 'GET',
      url: '/api/public/v1/customers',
      headers: authorization === undefined ? {} : { authorization },
    })

  const expect401 = async (authorization: string | undefined, expected: typeof REQUIRED) => {
    const response = await get(authorization)
    expect(response.statusCode, String(authorization).slice(0, 80)).toBe(401)
    expect(response.json()).toEqual({ ...expected, code: expect.any(String) })
    expect(response.headers['www-authenticate']).toMatch(/^Bearer realm=/)
  }

  it('lower-case "bearer" with a valid key is 200', async () => {
    expect((await get(`bearer ${key}`)).statusCode).toBe(200)
    expect((await get(`Bearer ${key}`)).statusCode).toBe(200)
  })

  it('malformed headers: 401 "API key required"', async () => {
    for (const header of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      `Basic ${Buffer.from(`user:${key}`).toString('base64')}`,
      `Token ${key}`,
      key,
      `Bearer ${key} extra`,
      `Bearer\t${key}`,
      `${key} Bearer`,
    ]) {
      await expect401(header, REQUIRED)
    }
  })

  it('trailing whitespace after the token (inject keeps it; real HTTP trims it): 200 or 401 only', async () => {
    const response = await get(`Bearer ${key}   `)
    console.log(`[auth ${kind}] trailing whitespace after a valid key: ${response.statusCode}`)
    // Node trims header values; either way the result is a documented 200 or 401, never more.
    expect([200, 401]).toContain(response.statusCode)
    if (response.statusCode === 401) expect(response.json()).toMatchObject(REQUIRED)
  })

  it('tokens of the wrong shape: 401 "Invalid or expired API key"', async () => {
    const hex = key.slice(-64)
    const cases = [
      key.slice(0, -1), // 63 hex characters
      `${key}0`, // 65 hex characters
      `svc_test_${hex.toUpperCase()}`, // upper-case hex
      `acme_test_${hex}`, // wrong brand
      `svc_live_${hex}`, // test key's secret with the live prefix
      `svc_test_${liveKey.slice(-64)}`, // live key's secret with the test prefix
      `svc_test_${'f'.repeat(64)}`, // right format, unknown
      `svc_test_${hex}${'a'.repeat(20_000)}`, // very long token
      `svc_test_${hex.slice(0, 63)}g`,
      `${key}\u00a0`, // trailing no-break space (HTTP trims only spaces and tabs)
      `${key}\u3000`, // trailing ideographic space
      `${key}\u200b`, // trailing zero-width space
      `\u00a0${key}`,
    ]
    // The controls: both keys work as issued.
    expect((await get(`Bearer ${key}`)).statusCode).toBe(200)
    expect((await get(`Bearer ${liveKey}`)).statusCode).toBe(200)
    for (const token of cases) await expect401(`Bearer ${token}`, INVALID)
  })

  it('a revoked key is refused on the very next request', async () => {
    const org = await createOrg(store, 'org_revoke')
    const fresh = await createKey(store, org, 'live')
    expect((await get(`Bearer ${fresh.key}`)).statusCode).toBe(200)
    await store.admin((sql) => sql.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [fresh.id]))
    await expect401(`Bearer ${fresh.key}`, INVALID)
  })

  it('an expired key is refused on the very next request', async () => {
    expect((await get(`Bearer ${key}`)).statusCode).toBe(200)
    await store.admin((sql) =>
      sql.query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [keyId]),
    )
    await expect401(`Bearer ${key}`, INVALID)
  })
})
