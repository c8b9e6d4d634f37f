import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bearer, buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { addAppointments, addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

/**
 * The contract as another language reads it: the document served at /openapi.json, checked by
 * Python (`re` and `jsonschema`, Draft 2020-12 as OpenAPI 3.1 uses): every `pattern` compiles and
 * a schema's own stay in the subset RE2 and Java read alike, every example and default validates
 * against its schema, and real answers of a running server (both lists, a page with a field added
 * as a later release within v1 might send it, the error bodies) validate against the schema the
 * document declares for their operation and status; Java compiles every pattern where a JDK is
 * installed. Python needs Debian's `python3-jsonschema` (.ci/run installs it); without it that
 * part is skipped loudly, except under CI, where it fails.
 */

const SCRIPT = fileURLToPath(new URL('./other-languages/validate_openapi.py', import.meta.url))
const JAVA_PATTERNS = fileURLToPath(new URL('./other-languages/Patterns.java', import.meta.url))

/** The first Python with jsonschema: the one on PATH, else Debian's (which .ci/run installs it for). */
function pythonWithJsonschema(): { ok: true; command: string } | { ok: false; why: string } {
  let why = 'no python3'
  for (const command of ['python3', '/usr/bin/python3']) {
    const probe = spawnSync(command, ['-c', 'from jsonschema import Draft202012Validator, FormatChecker'], {
      encoding: 'utf8',
    })
    if (probe.status === 0) return { ok: true, command }
    why = probe.error
      ? `${command} not found (${probe.error.message})`
      : `${command}: ${probe.stderr.trim().split('\n').at(-1)}`
  }
  return { ok: false, why }
}

const python = pythonWithJsonschema()
const required = Boolean(process.env.CI)
if (!python.ok && !required)
  console.warn(
    `\n*** SKIPPED: the OpenAPI document is NOT checked from Python: ${python.why}. ` +
      'Install it: apt-get install -y python3-jsonschema ***\n',
  )

interface Sample {
  /** The document's path whose operation declares the answer (the request may go elsewhere: a 404). */
  readonly path: string
  readonly method: 'get' | 'head'
  readonly status: number
  readonly body: unknown
  /** False: a body that must fail validation. */
  readonly valid?: boolean
}

/** Every `pattern` of the document, its schemas' and its extensions' (JSON strings, one a line). */
function patternsOf(node: unknown): string[] {
  if (node === null || typeof node !== 'object') return []
  return Object.entries(node).flatMap(([key, value]) =>
    key === 'pattern' && typeof value === 'string' ? [value] : patternsOf(value),
  )
}

const java = spawnSync('java', ['-version'], { encoding: 'utf8' })
describe.skipIf(java.status !== 0)("the document's patterns, compiled by Java's Pattern", () => {
  it('every pattern compiles', async () => {
    const { buildOpenApiDocument } = await import('../../src/openapi/document.js')
    const { LIST_ROUTES, PUBLIC_V1_PREFIX } = await import('../../src/routes/public/v1/index.js')
    const patterns = patternsOf(
      JSON.parse(JSON.stringify(buildOpenApiDocument(PUBLIC_V1_PREFIX, LIST_ROUTES))),
    )
    expect(patterns.length).toBeGreaterThan(10)
    expect(patterns.every((pattern) => !pattern.includes('\n'))).toBe(true)
    const directory = mkdtempSync(join(tmpdir(), 'openbook-java-'))
    try {
      writeFileSync(join(directory, 'patterns.txt'), patterns.join('\n'))
      const output = execFileSync('java', [JAVA_PATTERNS, join(directory, 'patterns.txt')], {
        encoding: 'utf8',
      })
      expect(output.trim()).toBe(`compiled ${patterns.length}`)
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  }, 60_000)
})

describe.skipIf(!python.ok && !required)('the OpenAPI document, read by Python', () => {
  let testStore: TestStore
  let app: FastifyInstance
  let base: string
  let key: string

  beforeAll(async () => {
    if (!python.ok) throw new Error(`CI: python3 with jsonschema is required here: ${python.why}`)
    testStore = await createTestStore('embedded')
    const org = await createOrg(testStore.store, 'org_py')
    await addCustomers(testStore.store, org.id, [
      {
        id: 'cus_1',
        createdAt: '2025-01-01T00:00:00.000Z',
        firstName: 'Zoë',
        email: 'zoe@example.com',
        dateOfBirth: '1990-01-02',
        country: 'GB',
        preferredContactMethod: 'sms',
        marketingConsent: true,
        notes: 'line\nbreak \u0001',
      },
      { id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' },
      { id: 'cus_3', createdAt: '2025-01-03T00:00:00.000Z', lastName: 'O"Brien' },
    ])
    await addAppointments(testStore.store, org.id, [
      {
        id: 'apt_1',
        start: '2025-03-01T09:00:00.000Z',
        customerId: 'cus_1',
        priceCents: 4500,
        currency: 'EUR',
        dayKey: '2025-03-01',
        locationType: 'online',
        paymentStatus: 'partially_paid',
        paymentKind: 'card',
        amountPaidCents: 1000,
        note: 'first visit',
      },
      { id: 'apt_2', start: '2025-03-02T09:00:00.000Z', status: 'no_show' },
    ])
    key = (await createKey(testStore.store, org)).key
    ;({ app } = await buildTestApp(testStore.store, { logLevel: 'silent' }))
    base = `http://127.0.0.1:${await listenOnLoopback(app)}`
  })

  afterAll(async () => {
    await app?.close()
    await testStore?.close()
  })

  it('every pattern compiles, every example validates, and real answers validate against their schemas', async () => {
    const get = async (url: string, init: RequestInit = {}) => {
      const response = await fetch(base + url, init)
      return { status: response.status, body: await response.json() }
    }
    const auth = { headers: bearer(key) }
    const customers = '/api/public/v1/customers'
    const appointments = '/api/public/v1/appointments'
    const document = (await get('/openapi.json')).body
    const page = await get(`${customers}?limit=2`, auth)
    expect(page.body.pagination.hasMore).toBe(true)
    const answers: Sample[] = [
      { path: customers, method: 'get', ...page },
      { path: customers, method: 'get', ...(await get(`${customers}?offset=2`, auth)) },
      { path: appointments, method: 'get', ...(await get(appointments, auth)) },
      { path: appointments, method: 'get', ...(await get(`${appointments}?status=done&limit=0`, auth)) },
      {
        path: customers,
        method: 'get',
        ...(await get(`${customers}?updatedSince=2026-01-01T00:00:00Z`, auth)),
      },
      { path: customers, method: 'get', ...(await get(customers)) },
      { path: customers, method: 'get', ...(await get('/api/public/v1/customer', auth)) },
      { path: customers, method: 'get', ...(await get(customers, { ...auth, method: 'POST' })) },
      { path: '/openapi.json', method: 'get', ...(await get('/openapi.json')) },
    ]
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 400, 400, 401, 404, 405, 200])
    // A page as a later release within v1 might send it: a field more everywhere.
    const added = {
      ...page.body,
      data: page.body.data.map((item: object) => ({ ...item, loyaltyTier: 'gold' })),
      pagination: { ...page.body.pagination, cursor: null },
      meta: {},
    }
    const broken = { ...page.body, pagination: { ...page.body.pagination, total: 'many' } }
    const samples: Sample[] = [
      ...answers,
      { path: customers, method: 'get', status: 200, body: added },
      { path: customers, method: 'get', status: 200, body: broken, valid: false },
      {
        path: appointments,
        method: 'get',
        status: 200,
        body: { data: [{ id: 'apt_x' }], pagination: page.body.pagination },
        valid: false,
      },
    ]
    const directory = mkdtempSync(join(tmpdir(), 'openbook-python-'))
    try {
      writeFileSync(join(directory, 'openapi.json'), JSON.stringify(document))
      writeFileSync(join(directory, 'samples.json'), JSON.stringify(samples))
      const output = execFileSync(
        python.ok ? python.command : 'python3',
        [SCRIPT, join(directory, 'openapi.json'), join(directory, 'samples.json')],
        { encoding: 'utf8' },
      )
      const { problems, checked } = JSON.parse(output) as {
        problems: string[]
        checked: Record<string, number>
      }
      expect(problems).toEqual([])
      expect(checked.samples).toBe(10)
      expect(checked.refused).toBe(2)
      // The date-time and id parameters' patterns, the dates of the items, the request id's.
      expect(checked.portable).toBeGreaterThanOrEqual(6)
      expect(checked.patterns).toBeGreaterThan(checked.portable ?? 0)
      expect(checked.examples).toBeGreaterThan(20)
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  })
})
