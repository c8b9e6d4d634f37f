import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  APPOINTMENT,
  CUSTOMER,
  type FieldDescription,
  type ResourceDescription,
} from '../../src/schemas/descriptions.js'
import { checkName, checkOf, FIELD_RULES, ruleOf } from '../../src/schemas/field-rules.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate, schemaState } from '../../src/store/schema/migrate.js'
import { migrateTo } from '../helpers/migrate-to.js'
import { ROOT } from '../helpers/process.js'
import {
  createTestDatabase,
  createTestRole,
  describeEachStore,
  postgresAvailable,
  type TestRole,
} from '../helpers/stores.js'

// The salon software writes customers and appointments directly (docs/writers.md): only the
// table's CHECKs hold its writes to the rules the import and the API publish. For every described
// field of both tables, each value its type's rule refuses (field-rules.ts) is written into the
// column and must meet check_violation, and each value the rule takes at its edges must be
// stored. On PostgreSQL as a login member of openbook_writer, the salon software's role; on
// PGlite as the owner, whom the CHECKs hold as well. A field added with a rule the table lacks
// fails here, naming the CHECK to add in a new migration.

type Query = (text: string, params?: readonly unknown[]) => Promise<unknown>

const ORGS = { customers: 'org_fc_c', appointments: 'org_fc_a' } as const
const IDS = FIELD_RULES.id.accepted
const NOW = '2025-06-01T10:00:00.000Z'
/** The NOT NULL columns a row needs, beside the one under test. */
const BASE: Record<ResourceDescription['table'], Record<string, unknown>> = {
  customers: { is_active: true, created_at: NOW, updated_at: NOW },
  appointments: {
    start_at: NOW,
    end_at: '2025-06-01T11:00:00.000Z',
    status: 'scheduled',
    is_active: true,
    created_at: NOW,
    updated_at: NOW,
  },
}

/** Columns held to each other by a CHECK of their own, written together. */
const PAIRED = ['appointments.start_at', 'appointments.end_at']

const shown = (value: unknown) => {
  const text = JSON.stringify(value)
  return text.length > 24 ? `${text.slice(0, 12)}… (${String(value).length} characters)` : text
}
const typeName = (field: FieldDescription) =>
  typeof field.type === 'string' ? field.type : `[${field.type.join(', ')}]`

/**
 * Writes one row whose `column` holds `value`, inside a savepoint rolled back after it: the
 * error's SQLSTATE and constraint, or undefined when the row was stored.
 */
async function attempt(
  query: Query,
  resource: ResourceDescription,
  column: string,
  value: unknown,
  n: number,
): Promise<{ code?: string; constraint?: string } | undefined> {
  const row: Record<string, unknown> = {
    org_id: ORGS[resource.table],
    id: `row_${n}`,
    ...BASE[resource.table],
    // An appointment ends at or after its start (its own CHECK): both ends take the value.
    ...(PAIRED.includes(`${resource.table}.${column}`) ? { start_at: value, end_at: value } : {}),
    [column]: value,
  }
  const columns = Object.keys(row)
  await query('SAVEPOINT attempt')
  try {
    await query(
      `INSERT INTO ${resource.table} (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
      Object.values(row),
    )
    return undefined
  } catch (error) {
    const { code, constraint } = error as { code?: string; constraint?: string }
    return { code, constraint }
  } finally {
    await query('ROLLBACK TO SAVEPOINT attempt')
  }
}

/** What every described field's rule finds wrong in the table: one line each, empty when all hold. */
async function faults(query: Query): Promise<string[]> {
  const found: string[] = []
  let n = 0
  for (const resource of [CUSTOMER, APPOINTMENT] as const) {
    for (const field of resource.fields) {
      const rule = ruleOf(field.type)
      const where = `${resource.table}.${field.column} (${field.field}, ${typeName(field)})`
      const check = checkOf(field.column, field.type)
      const todo = check
        ? `add CONSTRAINT ${checkName(resource.table, field.column)} CHECK (${check}) in a new migration (src/store/migrations/README.md)`
        : `its rule is the column's type (${rule.sqlType}): alter the column in a new migration`
      for (const value of rule.refused) {
        const outcome = await attempt(query, resource, field.column, value, n++)
        if (outcome?.code !== '23514')
          found.push(
            `${where} took ${shown(value)} (${outcome ? `SQLSTATE ${outcome.code}` : 'stored'}), which its rule refuses: ${todo}`,
          )
      }
      for (const value of rule.accepted) {
        const outcome = await attempt(query, resource, field.column, value, n++)
        if (outcome)
          found.push(
            `${where} refused ${shown(value)} (SQLSTATE ${outcome.code}, ${outcome.constraint ?? 'no constraint'}), which its rule takes`,
          )
      }
    }
  }
  return found
}

/** Organizations, staff, services and customers with the rule's edge ids, for the foreign keys. */
const FIXTURE = [
  `INSERT INTO organizations (id, name, plan) VALUES ('${ORGS.customers}', 'C', 'free'), ('${ORGS.appointments}', 'A', 'free'),
     ${IDS.map((id) => `('${id}', 'edge', 'free')`).join(', ')}`,
  ...[ORGS.customers, ORGS.appointments].map(
    (org) => `INSERT INTO staff (org_id, id) VALUES ${IDS.map((id) => `('${org}', '${id}')`).join(', ')}`,
  ),
  `INSERT INTO services (org_id, id) VALUES ${IDS.map((id) => `('${ORGS.appointments}', '${id}')`).join(', ')}`,
  `INSERT INTO customers (org_id, id, is_active, created_at, updated_at) VALUES
     ${IDS.map((id) => `('${ORGS.appointments}', '${id}', true, now(), now())`).join(', ')}`,
]

describeEachStore('every described field’s rule is a CHECK of its table, on %s', (testStore) => {
  let role: TestRole | undefined
  let writer: pg.Client | undefined

  beforeAll(async () => {
    await testStore.store.admin(async (sql) => {
      for (const statement of FIXTURE) await sql.exec(statement)
    })
    if (testStore.kind === 'postgres' && testStore.url) {
      role = await createTestRole('openbook_writer')
      writer = new pg.Client({ connectionString: testStore.url.replace('root@', `${role.name}@`) })
      await writer.connect()
    }
  })
  afterAll(async () => {
    await writer?.end()
    await role?.drop()
  })

  it('refuses each value a field’s rule refuses (check_violation), and stores those it takes', async () => {
    let found: string[]
    if (writer) {
      const client = writer
      await client.query('BEGIN')
      try {
        found = await faults((text, params) => client.query(text, params as unknown[]))
      } finally {
        await client.query('ROLLBACK')
      }
    } else {
      found = await testStore.store.admin((sql) => faults((text, params) => sql.query(text, params)))
    }
    expect(found).toEqual([])
  })

  it('holds every column to its rule’s type, and every CHECK validated', async () => {
    const columns = await testStore.store.admin((sql) =>
      sql.query<{ table: string; column: string; type: string }>(
        `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relname IN ('customers', 'appointments') AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped`,
      ),
    )
    const typed = new Map(columns.map((row) => [`${row.table}.${row.column}`, row.type]))
    const expected = new Map(
      [CUSTOMER, APPOINTMENT].flatMap((resource) =>
        resource.fields.map((field) => [`${resource.table}.${field.column}`, ruleOf(field.type).sqlType]),
      ),
    )
    expect(Object.fromEntries(typed)).toEqual(Object.fromEntries(expected))
    const invalid = await testStore.store.admin((sql) =>
      sql.query<{ name: string }>(
        `SELECT conname AS name FROM pg_constraint
         WHERE conrelid IN ('customers'::regclass, 'appointments'::regclass) AND NOT convalidated`,
      ),
    )
    expect(invalid).toEqual([])
  })
})

describe.skipIf(!postgresAvailable())('migration 020 over rows that break a rule (PostgreSQL)', () => {
  it('fails, naming the table and the constraint, and leaves the schema at 19', async () => {
    const database = await createTestDatabase()
    const store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
    try {
      await migrateTo(store, 19)
      await store.admin(async (sql) => {
        await sql.exec(`INSERT INTO organizations (id, name, plan) VALUES ('org_old', 'Old', 'free')`)
        await sql.query(
          `INSERT INTO customers (org_id, id, notes, is_active, created_at, updated_at)
           VALUES ('org_old', 'cus_1', $1, true, now(), now())`,
          ['n'.repeat(10_001)],
        )
      })
      await expect(migrate(store)).rejects.toThrow(
        'check constraint "customers_notes_check" of relation "customers" is violated by some row',
      )
      expect((await schemaState(store)).version).toBe(19)
      // Once the row is corrected, the same migration goes through.
      await store.admin((sql) => sql.exec(`UPDATE customers SET notes = left(notes, 10000)`))
      expect((await migrate(store)).applied[0]).toBe('020_field_rules_checked.sql')
    } finally {
      await store.close()
      await database.drop()
    }
  })
})

describe.skipIf(!postgresAvailable())(
  'migration 023 over dates and timestamps out of range (PostgreSQL)',
  () => {
    it('fails, naming the constraint, and upgrading.md’s query finds the rows to correct', async () => {
      const database = await createTestDatabase()
      const store = createPostgresStore({ connectionString: database.url, maxConnections: 2 })
      try {
        await migrateTo(store, 22)
        await store.admin(async (sql) => {
          await sql.exec(`INSERT INTO organizations (id, name, plan) VALUES ('org_old', 'Old', 'free')`)
          await sql.exec(
            `INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
           VALUES ('org_old', 'apt_open', now(), 'infinity', 'scheduled', true, now(), now()),
                  ('org_old', 'apt_ok', now(), now(), 'scheduled', true, now(), now())`,
          )
        })
        await expect(migrate(store)).rejects.toThrow(
          'check constraint "appointments_end_at_check" of relation "appointments" is violated by some row',
        )
        expect((await schemaState(store)).version).toBe(22)
        const upgrading = readFileSync(join(ROOT, 'docs', 'operators', 'upgrading.md'), 'utf8')
        const query = /```sql\n\s*(SELECT org_id, id FROM appointments WHERE NOT \([^;]*;)/.exec(
          upgrading,
        )?.[1]
        expect(query, 'upgrading.md names the rows migration 023 refuses').toBeDefined()
        const found = await store.admin((sql) => sql.query<{ id: string }>(query ?? ''))
        expect(found.map((row) => row.id)).toEqual(['apt_open'])
        await store.admin((sql) =>
          sql.exec(`UPDATE appointments SET end_at = start_at WHERE id = 'apt_open'`),
        )
        expect((await migrate(store)).applied).toEqual(['023_dates_and_times_in_range.sql'])
      } finally {
        await store.close()
        await database.drop()
      }
    })
  },
)
