import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { csvField } from '../../packages/client/src/sync/fields.js'
import { patience } from '../../packages/client/test/helpers/patience.js'
import {
  createDatabase,
  hasPostgres,
  type TestDatabase,
} from '../../packages/client/test/helpers/postgres.js'
import { startServer, type TestServer } from '../../packages/client/test/helpers/server.js'
import { sync } from '../../packages/client/test/helpers/sync.js'
import {
  APPOINTMENT,
  CUSTOMER,
  type FieldDescription,
  itemFields,
  type ResourceDescription,
} from '../../src/schemas/descriptions.js'

// Every field the server describes (src/schemas/descriptions.ts), end to end: written by
// `openbook import` with a value of its own, read back from the API, and written by
// `openbook-sync` to NDJSON, CSV and PostgreSQL. A field added to a description and missed by the
// import, the API, the document the client is generated from or the sync fails here.

const ORG = 'org_fields'
const START = '2026-03-02T10:15:30.123Z'

/** A value for a field by its type: one no default would produce, and text that needs quoting in CSV. */
function sampleOf({ field, type }: FieldDescription): unknown {
  if (Array.isArray(type)) return type.at(-1)
  switch (type) {
    case 'id':
      return field === 'orgId' ? ORG : `${field}_fields_1`
    case 'text':
      return `${field}, "quoted"\nand on two lines`
    case 'timestamp':
      return field === 'start'
        ? START
        : field === 'end'
          ? '2026-03-02T11:00:00.456Z'
          : `2025-0${(field.length % 9) + 1}-1${field.length % 10}T08:09:10.${String(field.length).padStart(3, '0')}Z`
    case 'date':
      return '1990-05-17'
    case 'day':
      return START.slice(0, 10)
    case 'boolean':
      return true
    case 'cents':
      return 1234 + field.length
    case 'country':
      return 'SE'
    case 'currency':
      return 'SEK'
  }
  throw new Error(`no sample for ${field}`)
}

/** An import record of the resource with every described field set. */
function recordOf(resource: ResourceDescription, type: string): Record<string, unknown> {
  const record: Record<string, unknown> = { type }
  for (const field of resource.fields) record[field.field] = sampleOf(field)
  // References point at the rows imported beside it.
  if ('customerId' in record) record.customerId = 'id_fields_1'
  if ('staffId' in record) record.staffId = 'stf_fields'
  if ('preferredStaffId' in record) record.preferredStaffId = 'stf_fields'
  if ('serviceId' in record) record.serviceId = 'srv_fields'
  record.id = 'id_fields_1'
  return record
}

/** The item the API should answer for a record: every item field, as imported. */
const itemOf = (resource: ResourceDescription, record: Record<string, unknown>) =>
  Object.fromEntries(itemFields(resource).map(({ field }) => [field, record[field]]))

const RESOURCES = [
  { name: 'customers', resource: CUSTOMER, record: recordOf(CUSTOMER, 'customer') },
  { name: 'appointments', resource: APPOINTMENT, record: recordOf(APPOINTMENT, 'appointment') },
] as const

let server: TestServer
let key: string
let directory: string
let keyFile: string
let database: TestDatabase | undefined

beforeAll(async () => {
  server = await startServer()
  const owner = 'owner@fields.test'
  await server.importLines([
    { type: 'organization', id: ORG, name: 'Fields', plan: 'enterprise' },
    { type: 'user', id: 'usr_fields', email: owner },
    { type: 'membership', orgId: ORG, userId: 'usr_fields', role: 'owner' },
    { type: 'staff', orgId: ORG, id: 'stf_fields', name: 'Staff' },
    { type: 'service', orgId: ORG, id: 'srv_fields', name: 'Service' },
    ...RESOURCES.map(({ record }) => record),
  ])
  const created = JSON.parse(
    await server.cli(['keys', 'create', '--org', ORG, '--as', owner, '--env', 'test', '--json']),
  ) as { key: string }
  key = created.key
  directory = mkdtempSync(join(tmpdir(), 'openbook-fields-'))
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${key}\n`, { mode: 0o600 })
  if (hasPostgres) database = await createDatabase('openbook_fields')
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

const syncTo = async (resource: string, target: readonly string[]) => {
  const run = await sync([resource, '--key-file', keyFile, '--base-url', server.baseUrl, ...target], {
    cwd: directory,
  }).done
  expect(run.code, run.stderr).toBe(0)
}

describe.each(RESOURCES)('every described field of $name, end to end', ({ name, resource, record }) => {
  const expected = () => itemOf(resource, record)

  it('is imported and answered by the API as it was imported', async () => {
    const response = await fetch(`${server.baseUrl}/api/public/v1/${name}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    const body = (await response.json()) as { data: Record<string, unknown>[] }
    expect(body.data).toEqual([expected()])
  })

  it('is written by openbook-sync to NDJSON', async () => {
    const out = join(directory, `${name}.ndjson`)
    await syncTo(name, ['--out', out])
    const rows = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(rows).toEqual([expected()])
  })

  it('is written by openbook-sync to CSV, one column each', async () => {
    const out = join(directory, `${name}.csv`)
    await syncTo(name, ['--out', out])
    const text = readFileSync(out, 'utf8')
    const [header = ''] = text.split('\r\n')
    const columns = header.split(',')
    for (const { field } of itemFields(resource)) expect(columns).toContain(field)
    const row = columns.map((column) => csvField(expected()[column])).join(',')
    expect(text).toContain(`\r\n${row}\r\n`)
  })

  it.skipIf(!hasPostgres)('is written by openbook-sync to PostgreSQL', async () => {
    await syncTo(name, ['--pg', database?.url ?? ''])
    const client = new pg.Client({ connectionString: database?.url })
    await client.connect()
    try {
      const { rows } = await client.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_name LIKE $1`,
        [`openbook_${name}_%`],
      )
      expect(rows).toHaveLength(1)
      const table = await client.query<{ data: Record<string, unknown> }>(
        `SELECT data FROM "${rows[0]?.table_name}"`,
      )
      expect(table.rows.map((row) => row.data)).toEqual([expected()])
    } finally {
      await client.end()
    }
  })
})
